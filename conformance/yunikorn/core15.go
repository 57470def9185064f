//go:build !yk19

// What differs in yunikorn-core v1.5.2's (and its scheduler interface's) API from v1.9.0's
// (core19.go, built with -tags yk19): asks are AllocationAsks, allocations carry an id,
// nodes a ready attribute and an occupied resource, ugm's trackers are named differently.
package main

import (
	"strings"

	"github.com/apache/yunikorn-core/pkg/scheduler/objects"
	"github.com/apache/yunikorn-core/pkg/scheduler/ugm"
	"github.com/apache/yunikorn-core/pkg/webservice/dao"
	siCommon "github.com/apache/yunikorn-scheduler-interface/lib/go/common"
	"github.com/apache/yunikorn-scheduler-interface/lib/go/si"
)

// askIsAllocation: an ask and its allocation are one object, released by one key.
const askIsAllocation = false

const coreVersion = "v1.5.2"

func nodeReady(attrs map[string]string) { attrs[siCommon.NodeReadyAttribute] = "true" }

// occupyOnNode puts the resources other schedulers' pods use on the node's own record.
func occupyOnNode(info *si.NodeInfo, occupied map[string]int64) {
	info.OccupiedResource = siResource(occupied)
}

// occupyAfterNode: nothing to send once the node is in (the node record carried it).
func (h *harness) occupyAfterNode(string, map[string]int64) {}

// addAsk asks for one allocation.
func addAsk(req *si.AllocationRequest, a askSpec) {
	req.Asks = []*si.AllocationAsk{{
		AllocationKey: a.key, ApplicationID: a.app, PartitionName: a.part,
		ResourceAsk: a.res, Priority: a.prio, Tags: a.tags, MaxAllocations: 1,
		PreemptionPolicy: a.policy, Placeholder: a.placeholder, TaskGroupName: a.group,
	}}
}

// removeAsk takes back a pending ask.
func removeAsk(req *si.AllocationRequest, app, ask, part string) {
	req.Releases = &si.AllocationReleasesRequest{AllocationAsksToRelease: []*si.AllocationAskRelease{{
		ApplicationID: app, AllocationKey: ask, PartitionName: part, TerminationType: si.TerminationType_STOPPED_BY_RM,
	}}}
}

// allocRelease ends the allocation of an ask (“id“: the one the core gave it).
func allocRelease(app, ask, id, part string, tt si.TerminationType) *si.AllocationRelease {
	return &si.AllocationRelease{ApplicationID: app, AllocationKey: ask, AllocationID: id, PartitionName: part,
		TerminationType: tt}
}

func allocIDOf(a *si.Allocation) string           { return a.AllocationID }
func releasedIDOf(r *si.AllocationRelease) string { return r.AllocationID }

// ugm's user and group trackers and their usage reports, by their v1.5.2 names (ugmTrees, output.go).
var (
	userTrackers  = (*ugm.Manager).GetUsersResources
	userUsage     = (*ugm.UserTracker).GetUserResourceUsageDAOInfo
	groupTrackers = (*ugm.Manager).GetGroupsResources
	groupUsage    = (*ugm.GroupTracker).GetGroupResourceUsageDAOInfo
)

func usageOf(q *dao.ResourceUsageDAOInfo) map[string]int64 { return norm(q.ResourceUsage) }

// reservedNodes is the node each reserved ask of the app holds (keys "nodeID|allocationKey").
func reservedNodes(app *objects.Application) map[string]string {
	out := map[string]string{}
	for _, k := range app.GetReservations() {
		if i := strings.LastIndex(k, "|"); i >= 0 {
			out[k[i+1:]] = k[:i]
		}
	}
	return out
}
