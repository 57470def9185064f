// The harness's final state line (evsched's state form) and its benchmark mode.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apache/yunikorn-core/pkg/common/resources"
	"github.com/apache/yunikorn-core/pkg/scheduler/objects"
	"github.com/apache/yunikorn-core/pkg/scheduler/ugm"
	"github.com/apache/yunikorn-core/pkg/webservice/dao"
	"github.com/apache/yunikorn-scheduler-interface/lib/go/si"
)

func norm(r *resources.Resource) map[string]int64 {
	if r == nil {
		return map[string]int64{}
	}
	return nonZero(r.Resources)
}

// nonZero is a resource map without its zero quantities, as evsched's state form writes it.
func nonZero[Q ~int64](quantities map[string]Q) map[string]int64 {
	out := map[string]int64{}
	for k, v := range quantities {
		if v != 0 {
			out[k] = int64(v)
		}
	}
	return out
}

// each is f of every element of xs, in order.
func each[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, 0, len(xs))
	for _, x := range xs {
		out = append(out, f(x))
	}
	return out
}

// ugmTrees is each user's and group's usage tree (the trackers' and reports' names: the core's version file).
func ugmTrees() (users, groups map[string]*dao.ResourceUsageDAOInfo) {
	users, groups = map[string]*dao.ResourceUsageDAOInfo{}, map[string]*dao.ResourceUsageDAOInfo{}
	manager := ugm.GetUserManager()
	for _, info := range each(userTrackers(manager), userUsage) {
		users[info.UserName] = info.Queues
	}
	for _, info := range each(groupTrackers(manager), groupUsage) {
		groups[info.GroupName] = info.Queues
	}
	return users, groups
}

// printState prints the final state in evsched's state form (`simulate --state`).
func (h *harness) printState() {
	queues := map[string]interface{}{}
	apps := map[string]interface{}{}
	nodes := map[string]interface{}{}
	if h.cc != nil {
		p := h.cc.GetPartition(h.part)
		var walk func(q *objects.Queue)
		walk = func(q *objects.Queue) {
			queues[q.QueuePath] = map[string]interface{}{
				"allocated": norm(q.GetAllocatedResource()), "pending": norm(q.GetPendingResource()),
				"priority": q.GetCurrentPriority(), "running_apps": q.GetPartitionQueueDAOInfo(true).RunningApps,
			}
			children := q.GetCopyOfChildren()
			names := make([]string, 0, len(children))
			for name := range children {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				walk(children[name])
			}
		}
		walk(p.GetQueue("root"))
		for _, app := range p.GetApplications() { // a Completed app has left the partition, as in evsched
			apps[app.ApplicationID] = map[string]interface{}{
				"queue": app.GetQueuePath(), "state": app.CurrentState(), "priority": app.GetAskMaxPriority(),
				"pending": norm(app.GetPendingResource()), "allocated": norm(app.GetAllocatedResource()),
			}
		}
		holders := map[string][]string{} // node -> "app/ask" of each reservation on it
		for _, app := range p.GetApplications() {
			for ask, node := range reservedNodes(app) {
				holders[node] = append(holders[node], app.ApplicationID+"/"+ask)
			}
		}
		for _, n := range p.GetNodes() {
			entry := map[string]interface{}{
				"capacity": norm(n.GetCapacity()), "allocated": norm(n.GetAllocatedResource()),
				"available": norm(n.GetAvailableResource()),
			}
			if keys := holders[n.NodeID]; len(keys) > 0 {
				sort.Strings(keys)
				entry["reserved_for"] = keys[0]
			}
			nodes[n.NodeID] = entry
		}
	}
	b, err := json.Marshal(map[string]interface{}{"type": "state", "queues": queues, "apps": apps, "nodes": nodes,
		"usage": usage()})
	if err != nil {
		fail("%v", err)
	}
	h.out.Write(b)
	h.out.WriteByte('\n')
}

// usage is the user and group usage the core's ugm tracks, in evsched's form: per user (group),
// per queue with allocated resources or running apps, {"allocated", "running_apps"}.
func usage() map[string]interface{} {
	users, groups := map[string]interface{}{}, map[string]interface{}{}
	var walk func(into map[string]interface{}, q *dao.ResourceUsageDAOInfo)
	walk = func(into map[string]interface{}, q *dao.ResourceUsageDAOInfo) {
		if q == nil {
			return
		}
		alloc := usageOf(q)
		if len(alloc) > 0 || len(q.RunningApplications) > 0 {
			into[q.QueuePath] = map[string]interface{}{"allocated": alloc, "running_apps": len(q.RunningApplications)}
		}
		for _, c := range q.Children {
			walk(into, c)
		}
	}
	// record puts one user's (group's) queues under its name, when it uses any.
	record := func(into map[string]interface{}, name string, root *dao.ResourceUsageDAOInfo) {
		queues := map[string]interface{}{}
		walk(queues, root)
		if len(queues) > 0 {
			into[name] = queues
		}
	}
	userTrees, groupTrees := ugmTrees()
	for name, tree := range userTrees {
		record(users, name, tree)
	}
	for name, tree := range groupTrees {
		record(groups, name, tree)
	}
	return map[string]interface{}{"users": users, "groups": groups}
}

// cpuSeconds is the process's user+system CPU time so far (every goroutine, the GC's too).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// bench times scheduling alone over the applied inputs, then idle more single steps, and prints
// one JSON line. The timed cycle is a loop of steps until one neither allocates, changes the
// reservations nor chooses victims (as cycle: a step that reserves or preempts returns false from
// schedule; under v1.9.0 a preemptor need not change the reservations). The
// reservations are counted only after a step that returns false, untimed; as the count is
// compared with the last such count, a cycle whose allocations ended reservations may take one
// more step than cycle would (one step that finds nothing). apply is the seconds spent reading
// and applying the inputs, untimed cycles included.
//
// budget > 0 bounds the timed cycle's CPU seconds: a cycle that takes longer is stopped
// ("timed_out": its figures are lower bounds) and no idle step runs — after the step that
// passed it, or, when one step alone runs past it (a full cluster where no step succeeds),
// by a watchdog that reports at once and exits.
func (h *harness) bench(apply float64, idle int, budget float64) {
	if err := h.needCore(); err != nil {
		fail("%v", err)
	}
	n, preempted := 0, 0
	count := func() int { // allocations made since the last count; victims are added to preempted
		allocs, rel, _ := h.rec.take()
		for _, r := range rel {
			if r.TerminationType == si.TerminationType_PREEMPTED_BY_SCHEDULER {
				preempted++
			}
		}
		return len(allocs)
	}
	count()
	before := h.reservations()
	untimedCPU, untimedWall := 0.0, time.Duration(0)
	cpu0 := cpuSeconds()
	start := time.Now()
	timedOut := false
	var report sync.Once // one JSON line, from the loop's end or from the watchdog
	var decided int64    // n, for the watchdog
	var finished int32   // the timed loop is over: the watchdog stops
	if budget > 0 {
		go func() {
			for atomic.LoadInt32(&finished) == 0 {
				time.Sleep(100 * time.Millisecond)
				// untimed work is counted here (the watchdog only stops a step far past the budget)
				if cpu := cpuSeconds() - cpu0; cpu > budget && atomic.LoadInt32(&finished) == 0 {
					report.Do(func() {
						b, _ := json.Marshal(map[string]interface{}{"allocations": atomic.LoadInt64(&decided),
							"seconds": time.Since(start).Seconds(), "cpu_seconds": cpu, "apply_seconds": apply,
							"timed_out": true})
						fmt.Fprintln(os.Stdout, string(b))
						os.Exit(0)
					})
				}
			}
		}()
	}
	for {
		if ccSchedule(h.cc) {
			n += count()
			atomic.StoreInt64(&decided, int64(n))
			if budget > 0 && cpuSeconds()-cpu0-untimedCPU > budget {
				timedOut = true
				break
			}
			continue
		}
		c0, t0 := cpuSeconds(), time.Now()
		victims := preempted
		n += count()
		after := h.reservations()
		untimedCPU += cpuSeconds() - c0
		untimedWall += time.Since(t0)
		if after == before && preempted == victims { // victims chosen are progress too, as in cycle
			break
		}
		before = after
	}
	atomic.StoreInt32(&finished, 1)
	wall := (time.Since(start) - untimedWall).Seconds()
	cpu := cpuSeconds() - cpu0 - untimedCPU
	firstPreempted := preempted // the victims of the timed loop (the idle steps' are not reported)
	idleWall := make([]float64, 0, idle)
	idleCPU := make([]float64, 0, idle)
	idleAllocs := 0
	for i := 0; i < idle && !timedOut; i++ {
		c0, t0 := cpuSeconds(), time.Now()
		ccSchedule(h.cc)
		idleWall = append(idleWall, time.Since(t0).Seconds())
		idleCPU = append(idleCPU, cpuSeconds()-c0)
		idleAllocs += count()
	}
	b, _ := json.Marshal(map[string]interface{}{"allocations": n, "seconds": wall, "cpu_seconds": cpu,
		"per_second": float64(n) / wall, "apply_seconds": apply, "idle_seconds": idleWall,
		"idle_cpu_seconds": idleCPU, "idle_allocations": idleAllocs, "preemptions": firstPreempted,
		"timed_out": timedOut})
	report.Do(func() { fmt.Fprintln(os.Stdout, string(b)) })
}
