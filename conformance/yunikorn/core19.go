//go:build yk19

// yunikorn-core v1.9.0's API (core15.go has v1.5.2's): an ask is an allocation without a node
// (YUNIKORN-2457), allocations are known by their key alone (2587), no node ready attribute,
// and what other schedulers' pods use is a foreign allocation on the node (2791), not an
// occupied resource.
package main

import (
	"github.com/apache/yunikorn-core/pkg/rmproxy/rmevent"
	"github.com/apache/yunikorn-core/pkg/scheduler/objects"
	"github.com/apache/yunikorn-core/pkg/scheduler/ugm"
	"github.com/apache/yunikorn-core/pkg/webservice/dao"
	siCommon "github.com/apache/yunikorn-scheduler-interface/lib/go/common"
	"github.com/apache/yunikorn-scheduler-interface/lib/go/si"
)

// askIsAllocation: an ask and its allocation are one object, released by one key.
const askIsAllocation = true

const coreVersion = "v1.9.0"

func nodeReady(map[string]string) {}

func occupyOnNode(*si.NodeInfo, map[string]int64) {}

// occupyAfterNode records what other schedulers' pods use on the node as one foreign
// allocation (replaced by each update), as the v1.9 shim reports such pods.
func (h *harness) occupyAfterNode(nodeID string, occupied map[string]int64) {
	if occupied == nil {
		return
	}
	ccUpdateAllocations(h.cc, &rmevent.RMUpdateAllocationEvent{Request: &si.AllocationRequest{RmID: rmID,
		Allocations: []*si.Allocation{{
			AllocationKey: "evsched-occupied-" + nodeID, NodeID: nodeID, PartitionName: h.part,
			ResourcePerAlloc: siResource(occupied),
			AllocationTags:   map[string]string{siCommon.Foreign: siCommon.AllocTypeDefault},
		}}}})
}

func addAsk(req *si.AllocationRequest, a askSpec) {
	req.Allocations = []*si.Allocation{{
		AllocationKey: a.key, ApplicationID: a.app, PartitionName: a.part,
		ResourcePerAlloc: a.res, Priority: a.prio, AllocationTags: a.tags,
		PreemptionPolicy: a.policy, Placeholder: a.placeholder, TaskGroupName: a.group,
	}}
}

func removeAsk(req *si.AllocationRequest, app, ask, part string) {
	req.Releases = &si.AllocationReleasesRequest{AllocationsToRelease: []*si.AllocationRelease{
		allocRelease(app, ask, ask, part, si.TerminationType_STOPPED_BY_RM),
	}}
}

func allocRelease(app, ask, _, part string, tt si.TerminationType) *si.AllocationRelease {
	return &si.AllocationRelease{ApplicationID: app, AllocationKey: ask, PartitionName: part, TerminationType: tt}
}

func allocIDOf(a *si.Allocation) string           { return a.AllocationKey }
func releasedIDOf(r *si.AllocationRelease) string { return r.AllocationKey }

// ugm's user and group trackers and their usage reports, by their v1.9.0 names (ugmTrees, output.go).
var (
	userTrackers  = (*ugm.Manager).GetUserTrackers
	userUsage     = (*ugm.UserTracker).GetResourceUsageDAOInfo
	groupTrackers = (*ugm.Manager).GetGroupTrackers
	groupUsage    = (*ugm.GroupTracker).GetResourceUsageDAOInfo
)

func usageOf(q *dao.ResourceUsageDAOInfo) map[string]int64 { return nonZero(q.ResourceUsage) }

// reservedNodes is the node each reserved ask of the app holds (keys are allocation keys).
func reservedNodes(app *objects.Application) map[string]string {
	out := map[string]string{}
	for _, ask := range app.GetReservations() {
		out[ask] = app.NodeReservedForAsk(ask)
	}
	return out
}
