// The driver: turns scenario inputs into yunikorn-core requests, one at a time, and runs
// scheduling cycles (allocation steps until one makes no progress).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/apache/yunikorn-core/pkg/common"
	"github.com/apache/yunikorn-core/pkg/evclock"
	"github.com/apache/yunikorn-core/pkg/events"
	"github.com/apache/yunikorn-core/pkg/rmproxy/rmevent"
	"github.com/apache/yunikorn-core/pkg/scheduler"
	siCommon "github.com/apache/yunikorn-scheduler-interface/lib/go/common"
	"github.com/apache/yunikorn-scheduler-interface/lib/go/si"
)

const (
	rmID        = "rm:123"
	policyGroup = "policygroup"
	partition   = "default"
)

// harness holds the core and what the scenario has told it so far.
type harness struct {
	cc       *scheduler.ClusterContext
	rec      *recorder
	part     string
	out      *bufio.Writer
	cycleNo  int
	classes  map[string]int32 // priority class -> value
	preempts map[string]bool  // priority class -> its preemption_policy is PreemptLowerPriority
	dflt     *int32           // the global default class's value
	dfltName string           // the global default class's name
	askPrio  map[string]int32 // app \x00 ask -> priority
	allocIDs map[string]string
	states   map[string]string
	resv     map[string]string // app \x00 ask -> reserved node, as last printed
	pending  []stateChange     // state changes reported while applying inputs
	noConfig bool              // the first config was rejected: inputs are ignored
	fast     bool              // benchmark mode: no firing of zero-length app timers
	started  bool              // a line has set the clock
	last     time.Time         // the clock's time: the latest line's log time
}

func newHarness(out *bufio.Writer) *harness {
	events.Init()
	return &harness{
		rec:      newRecorder(),
		part:     common.GetNormalizedPartitionName(partition, rmID),
		out:      out,
		classes:  map[string]int32{},
		preempts: map[string]bool{},
		askPrio:  map[string]int32{},
		allocIDs: map[string]string{},
		states:   map[string]string{},
		resv:     map[string]string{},
	}
}

// clock sets yunikorn-core's clock (evclock, patched in at build time: patch_clock.py) to the
// line's log time; a missing time is the previous line's + 1 ms, as in evsched. Nothing
// fires here: timers run at the start of a cycle (fireTimers), as evsched's do, and the
// zero-length ones after each input and step (settle).
func (h *harness) clock(text string) {
	t := h.last.Add(time.Millisecond)
	if !h.started {
		t = time.Unix(0, 0).UTC()
	}
	if text != "" {
		if parsed, err := time.Parse(time.RFC3339Nano, text); err == nil {
			t = parsed
		}
	}
	h.started = true
	if t.After(h.last) {
		h.last = t
	}
	evclock.Set(h.last)
}

func siResource(m map[string]int64) *si.Resource {
	r := &si.Resource{Resources: map[string]*si.Quantity{}}
	for k, v := range m {
		r.Resources[k] = &si.Quantity{Value: v}
	}
	return r
}

func key(app, ask string) string { return app + "\x00" + ask }

// askSpec is one ask as the core's API version wants it built (addAsk: core15.go, core19.go).
type askSpec struct {
	key, app, part, group string
	res                   *si.Resource
	prio                  int32
	tags                  map[string]string
	policy                *si.PreemptionPolicy
	placeholder           bool
}

func (h *harness) needCore() error {
	if h.cc == nil && !h.noConfig {
		return fmt.Errorf("the scenario must start with a config.updated line")
	}
	return nil
}

// apply hands one input event to the core.
func (h *harness) apply(typ string, raw json.RawMessage) error {
	if typ == "config.updated" {
		return h.config(raw)
	}
	if typ == "priorityclass.upserted" {
		var d struct {
			Name             string `json:"name"`
			Value            int32  `json:"value"`
			GlobalDefault    bool   `json:"global_default"`
			PreemptionPolicy string `json:"preemption_policy"`
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			return err
		}
		h.classes[d.Name] = d.Value
		h.preempts[d.Name] = d.PreemptionPolicy == "PreemptLowerPriority"
		if d.GlobalDefault {
			h.dfltName = d.Name
			v := d.Value
			h.dflt = &v
		}
		return nil
	}
	if err := h.needCore(); err != nil || h.cc == nil {
		return err
	}
	var err error
	switch typ {
	case "node.added", "node.updated", "node.removed":
		err = h.node(typ, raw)
	case "app.added", "app.removed":
		err = h.app(typ, raw)
	case "ask.added", "ask.removed", "allocation.released":
		err = h.alloc(typ, raw)
	default:
		err = fmt.Errorf("unsupported input type %q", typ)
	}
	if h.cc != nil {
		h.settle()
		h.syncReservations()
	}
	_, _, states := h.takeAll()
	h.pending = append(h.pending, states...)
	return err
}

// takeAll takes what the core told the RM, handling its release notices (released), until the
// core says no more: the shim's confirmation of a placeholder's release makes the core send more
// (the real allocation that replaced it, the release of the placeholder).
func (h *harness) takeAll() (allocs []*si.Allocation, preempted int, states []stateChange) {
	for {
		a, rel, s := h.rec.take()
		if len(a) == 0 && len(rel) == 0 && len(s) == 0 {
			return allocs, preempted, states
		}
		allocs = append(allocs, a...)
		states = append(states, s...)
		preempted += h.released(rel)
	}
}

func (h *harness) config(raw json.RawMessage) error {
	var d struct {
		YAML string `json:"yaml"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return err
	}
	if h.cc == nil {
		cc, err := scheduler.NewClusterContext(rmID, policyGroup, []byte(d.YAML))
		if err != nil {
			h.emit("input.rejected", map[string]interface{}{"input_type": "config.updated", "reason": "config-invalid", "message": err.Error()})
			h.noConfig = true
			return nil
		}
		ccSetEventHandler(cc, h.rec)
		h.cc = cc
		evclock.AfterEach = func() { // a timer's releases (placeholder timeouts) confirmed at its time
			_, _, states := h.takeAll()
			h.pending = append(h.pending, states...)
		}
		return nil
	}
	if err := h.cc.UpdateRMSchedulerConfig(rmID, []byte(d.YAML)); err != nil {
		h.emit("input.rejected", map[string]interface{}{"input_type": "config.updated", "reason": "config-invalid", "message": err.Error()})
	}
	return nil
}

func (h *harness) node(typ string, raw json.RawMessage) error {
	var d struct {
		NodeID      string            `json:"node_id"`
		Capacity    map[string]int64  `json:"capacity"`
		Occupied    map[string]int64  `json:"occupied"`
		Schedulable *bool             `json:"schedulable"`
		Attributes  map[string]string `json:"attributes"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return err
	}
	attrs := map[string]string{}
	for k, v := range d.Attributes {
		attrs[k] = v
	}
	attrs[siCommon.NodePartition] = h.part
	nodeReady(attrs)
	info := &si.NodeInfo{NodeID: d.NodeID, Attributes: attrs}
	var infos []*si.NodeInfo
	switch typ {
	case "node.added":
		info.SchedulableResource = siResource(d.Capacity)
		occupyOnNode(info, d.Occupied)
		info.Action = si.NodeInfo_CREATE
		if d.Schedulable != nil && !*d.Schedulable {
			info.Action = si.NodeInfo_CREATE_DRAIN
		}
		infos = append(infos, info)
	case "node.updated":
		if d.Capacity != nil || d.Occupied != nil {
			info.Action = si.NodeInfo_UPDATE
			if d.Capacity != nil {
				info.SchedulableResource = siResource(d.Capacity)
			}
			if d.Occupied != nil {
				occupyOnNode(info, d.Occupied)
			}
			infos = append(infos, info)
		}
		if d.Schedulable != nil {
			action := si.NodeInfo_DRAIN_TO_SCHEDULABLE
			if !*d.Schedulable {
				action = si.NodeInfo_DRAIN_NODE
			}
			infos = append(infos, &si.NodeInfo{NodeID: d.NodeID, Attributes: attrs, Action: action})
		}
	case "node.removed":
		info.Action = si.NodeInfo_DECOMISSION
		infos = append(infos, info)
	}
	ccUpdateNodes(h.cc, &rmevent.RMUpdateNodeEvent{Request: &si.NodeRequest{Nodes: infos, RmID: rmID}})
	if typ != "node.removed" {
		h.occupyAfterNode(d.NodeID, d.Occupied)
	}
	return nil
}

func (h *harness) app(typ string, raw json.RawMessage) error {
	var d struct {
		AppID  string            `json:"app_id"`
		Queue  string            `json:"queue"`
		User   string            `json:"user"`
		Groups []string          `json:"groups"`
		Tags   map[string]string `json:"tags"`
		// gang scheduling, as the shim sends it
		PlaceholderAsk map[string]int64 `json:"placeholder_ask"`
		GangStyle      string           `json:"gang_scheduling_style"`
		TimeoutMs      int64            `json:"placeholder_timeout_ms"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return err
	}
	req := &si.ApplicationRequest{RmID: rmID}
	if typ == "app.added" {
		req.New = []*si.AddApplicationRequest{{
			ApplicationID: d.AppID, QueueName: d.Queue, PartitionName: h.part, Tags: d.Tags,
			Ugi:            &si.UserGroupInformation{User: d.User, Groups: d.Groups},
			PlaceholderAsk: siResource(d.PlaceholderAsk), GangSchedulingStyle: d.GangStyle,
			ExecutionTimeoutMilliSeconds: d.TimeoutMs,
		}}
	} else {
		req.Remove = []*si.RemoveApplicationRequest{{ApplicationID: d.AppID, PartitionName: h.part}}
	}
	ccUpdateApps(h.cc, &rmevent.RMUpdateApplicationEvent{Request: req})
	if typ == "app.added" {
		// an app rejection in evsched's form (the reason's class: the id is taken, or no queue
		// would take the app), else where the app was placed
		if reason, ok := h.rec.rejectedReason(d.AppID); ok {
			class := "no-placement"
			if strings.Contains(reason, "already existed") {
				class = "app-exists"
			}
			h.emit("input.rejected", map[string]interface{}{
				"input_type": "app.added", "app_id": d.AppID, "reason": class, "message": reason,
			})
		} else if app := h.cc.GetApplication(d.AppID, h.part); app != nil {
			h.emit("app.placed", map[string]interface{}{"app_id": d.AppID, "queue": app.GetQueuePath()})
		}
	}
	return nil
}

func (h *harness) alloc(typ string, raw json.RawMessage) error {
	var d struct {
		AppID         string            `json:"app_id"`
		AskID         string            `json:"ask_id"`
		Resources     map[string]int64  `json:"resources"`
		Priority      *int32            `json:"priority"`
		PriorityClass string            `json:"priority_class"`
		RequiredNode  string            `json:"required_node"`
		Tags          map[string]string `json:"tags"`
		PreemptOther  *bool             `json:"preempt_other"`
		AllowPreempt  *bool             `json:"allow_preemption"`
		Placeholder   bool              `json:"placeholder"`
		TaskGroup     string            `json:"task_group"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return err
	}
	req := &si.AllocationRequest{RmID: rmID}
	switch typ {
	case "ask.added":
		prio := int32(0)
		if d.Priority != nil {
			prio = *d.Priority
		} else if v, ok := h.classes[d.PriorityClass]; ok && d.PriorityClass != "" {
			prio = v
		} else if h.dflt != nil {
			prio = *h.dflt
		}
		tags := map[string]string{}
		for k, v := range d.Tags {
			tags[k] = v
		}
		if d.RequiredNode != "" {
			tags[siCommon.DomainYuniKorn+siCommon.KeyRequiredNode] = d.RequiredNode
		}
		h.askPrio[key(d.AppID, d.AskID)] = prio
		// preempt_other defaults to the class's policy (the global default class without one);
		// the built-in system- classes preempt, as evsched's core says.
		class := d.PriorityClass
		if class == "" {
			class = h.dfltName
		}
		other := h.preempts[class] || (len(class) > 7 && class[:7] == "system-")
		if d.PreemptOther != nil {
			other = *d.PreemptOther
		}
		self := d.AllowPreempt == nil || *d.AllowPreempt
		addAsk(req, askSpec{
			key: d.AskID, app: d.AppID, part: h.part, res: siResource(d.Resources), prio: prio, tags: tags,
			policy:      &si.PreemptionPolicy{AllowPreemptSelf: self, AllowPreemptOther: other},
			placeholder: d.Placeholder, group: d.TaskGroup,
		})
	case "ask.removed":
		if _, held := h.allocIDs[key(d.AppID, d.AskID)]; held && askIsAllocation {
			return nil // releasing the key would end the allocation; evsched's ask.removed only withdraws a pending ask
		}
		removeAsk(req, d.AppID, d.AskID, h.part)
	case "allocation.released":
		id, ok := h.allocIDs[key(d.AppID, d.AskID)]
		if !ok {
			return nil // nothing allocated for it: evsched ignores it the same way
		}
		req.Releases = &si.AllocationReleasesRequest{AllocationsToRelease: []*si.AllocationRelease{
			allocRelease(d.AppID, d.AskID, id, h.part, si.TerminationType_STOPPED_BY_RM),
		}}
	}
	ccUpdateAllocations(h.cc, &rmevent.RMUpdateAllocationEvent{Request: req})
	return nil
}

// settle runs the zero-length state timers yunikorn-core arms for apps tagged
// application.stateaware.disable (Starting -> Running "at once"), so that the next step
// sees them Running as evsched does.
func (h *harness) settle() {
	evclock.Fire(true)
}

// reservations counts the partition's reservations (the benchmark's progress that allocates nothing).
func (h *harness) reservations() int {
	n := 0
	for _, app := range h.cc.GetPartition(h.part).GetApplications() {
		n += len(app.GetReservations())
	}
	return n
}

// syncReservations prints the reservations made and ended since the last call, as evsched's
// ask.reserved (with the cycle) and ask.unreserved; true when there were any.
func (h *harness) syncReservations() bool {
	p := h.cc.GetPartition(h.part)
	now := map[string]string{}
	for _, app := range p.GetApplications() {
		for ask, node := range reservedNodes(app) {
			now[key(app.ApplicationID, ask)] = node
		}
	}
	changed := false
	for _, k := range sortedKeys(h.resv) {
		if node := h.resv[k]; now[k] != node {
			app, ask, _ := strings.Cut(k, "\x00")
			h.emit("ask.unreserved", map[string]interface{}{"app_id": app, "ask_id": ask, "node_id": node})
			changed = true
		}
	}
	for _, k := range sortedKeys(now) {
		if node := now[k]; h.resv[k] != node {
			app, ask, _ := strings.Cut(k, "\x00")
			h.emit("ask.reserved", map[string]interface{}{"app_id": app, "ask_id": ask, "node_id": node, "cycle": h.cycleNo})
			changed = true
		}
	}
	h.resv = now
	return changed
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// cycle runs allocation steps until a step neither allocates nor changes the reservations
// (or limit allocations were made; limit < 0: no limit), printing each outcome.
func (h *harness) cycle(limit int) {
	h.cycleNo++
	if h.cc != nil && !h.fast {
		evclock.Fire(false) // every timer due by the cycle's log time: state timers, placeholder timeouts, the queue cleaner
		_, _, states := h.takeAll()
		h.pending = append(h.pending, states...)
	}
	h.emitStates(h.pending)
	h.pending = nil
	decisions := 0
	if h.cc != nil {
		for steps := 0; limit < 0 || decisions < limit; steps++ {
			allocated := ccSchedule(h.cc)
			h.settle()
			allocs, preempted, states := h.takeAll()
			for _, a := range allocs {
				decisions++
				h.allocIDs[key(a.ApplicationID, a.AllocationKey)] = allocIDOf(a)
				h.emitAllocation(a, decisions)
			}
			h.emitStates(states)
			// progress: an allocation, a reservation made or ended, or victims chosen (a
			// preemptor that keeps its reservation changes nothing else), as in evsched
			if changed := h.syncReservations(); !allocated && !changed && preempted == 0 {
				break
			}
			if steps > 1_000_000 {
				fail("cycle %d does not end", h.cycleNo)
			}
		}
	}
	h.emit("cycle.completed", map[string]interface{}{"cycle": h.cycleNo, "decisions": decisions})
}

// released handles the core's release notices: a preemption victim stays allocated (and keeps
// its allocation id) until an allocation.released input confirms it, as in evsched, and is
// printed as allocation.revoked (reason preempted); any other release ends the allocation.
func (h *harness) released(rel []*si.AllocationRelease) (preempted int) {
	for _, r := range rel {
		if r.TerminationType == si.TerminationType_PREEMPTED_BY_SCHEDULER {
			h.emit("allocation.revoked", map[string]interface{}{
				"app_id": r.ApplicationID, "ask_id": r.AllocationKey, "reason": "preempted", "cycle": h.cycleNo,
			})
			preempted++
			continue
		}
		if r.TerminationType == si.TerminationType_PLACEHOLDER_REPLACED || r.TerminationType == si.TerminationType_TIMEOUT {
			// a placeholder the core gives up (replaced by a real allocation, timed out, smaller than
			// its real ask): the shim deletes its pod at once and confirms, as evsched's core assumes
			h.confirm(r)
		}
		delete(h.allocIDs, key(r.ApplicationID, r.AllocationKey))
	}
	return preempted
}

// confirm sends the shim's confirmation of a placeholder's release back to the core.
func (h *harness) confirm(r *si.AllocationRelease) {
	ccUpdateAllocations(h.cc, &rmevent.RMUpdateAllocationEvent{Request: &si.AllocationRequest{RmID: rmID,
		Releases: &si.AllocationReleasesRequest{AllocationsToRelease: []*si.AllocationRelease{
			allocRelease(r.ApplicationID, r.AllocationKey, releasedIDOf(r), h.part, r.TerminationType),
		}}}})
}

func (h *harness) emit(typ string, data map[string]interface{}) {
	b, err := json.Marshal(map[string]interface{}{"type": typ, "data": data})
	if err != nil {
		fail("%v", err)
	}
	h.out.Write(b)
	h.out.WriteByte('\n')
}

func (h *harness) emitAllocation(a *si.Allocation, n int) {
	queue := ""
	if app := h.cc.GetApplication(a.ApplicationID, h.part); app != nil {
		queue = app.GetQueuePath()
	}
	res := map[string]int64{}
	if a.ResourcePerAlloc != nil {
		for k, q := range a.ResourcePerAlloc.Resources {
			if q.Value != 0 {
				res[k] = q.Value
			}
		}
	}
	h.emit("allocation.decided", map[string]interface{}{
		"app_id": a.ApplicationID, "ask_id": a.AllocationKey, "node_id": a.NodeID, "queue": queue,
		"cycle": h.cycleNo, "decision_id": fmt.Sprintf("%s-%d-%d", partition, h.cycleNo, n),
		"partition": partition, "priority": h.askPrio[key(a.ApplicationID, a.AllocationKey)], "resources": res,
	})
}

func (h *harness) emitStates(states []stateChange) {
	for _, s := range states {
		from := h.states[s.appID]
		if from == "" {
			from = "New"
		}
		if from == s.state {
			continue
		}
		h.states[s.appID] = s.state
		h.emit("app.state_changed", map[string]interface{}{"app_id": s.appID, "from": from, "to": s.state})
	}
}
