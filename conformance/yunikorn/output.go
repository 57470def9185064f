// The harness's final state line (evsched's state form) and its benchmark mode.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/apache/yunikorn-core/pkg/common/resources"
	"github.com/apache/yunikorn-core/pkg/scheduler/objects"
)

func norm(r *resources.Resource) map[string]int64 {
	out := map[string]int64{}
	if r == nil {
		return out
	}
	for k, v := range r.Resources {
		if v != 0 {
			out[k] = int64(v)
		}
	}
	return out
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
		for _, app := range append(p.GetApplications(), p.GetCompletedApplications()...) {
			apps[app.ApplicationID] = map[string]interface{}{
				"queue": app.GetQueuePath(), "state": app.CurrentState(), "priority": app.GetAskMaxPriority(),
				"pending": norm(app.GetPendingResource()), "allocated": norm(app.GetAllocatedResource()),
			}
		}
		for _, n := range p.GetNodes() {
			entry := map[string]interface{}{
				"capacity": norm(n.GetCapacity()), "allocated": norm(n.GetAllocatedResource()),
				"available": norm(n.GetAvailableResource()),
			}
			// a node reservation's key is "appID|allocationKey"; evsched's state shows "app/ask"
			if keys := n.GetReservationKeys(); len(keys) > 0 {
				sort.Strings(keys)
				entry["reserved_for"] = strings.Replace(keys[0], "|", "/", 1)
			}
			nodes[n.NodeID] = entry
		}
	}
	b, err := json.Marshal(map[string]interface{}{"type": "state", "queues": queues, "apps": apps, "nodes": nodes})
	if err != nil {
		fail("%v", err)
	}
	h.out.Write(b)
	h.out.WriteByte('\n')
}

// cpuSeconds is the process's user+system CPU time so far (every goroutine, the GC's too).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// bench times scheduling alone over the applied inputs and prints one JSON line.
func (h *harness) bench() {
	if err := h.needCore(); err != nil {
		fail("%v", err)
	}
	cpu0 := cpuSeconds()
	start := time.Now()
	n := 0
	for ccSchedule(h.cc) {
		n += len(h.rec.newAllocs)
		h.rec.newAllocs = h.rec.newAllocs[:0]
	}
	wall := time.Since(start).Seconds()
	cpu := cpuSeconds() - cpu0
	b, _ := json.Marshal(map[string]interface{}{"allocations": n, "seconds": wall, "cpu_seconds": cpu,
		"per_second": float64(n) / wall})
	fmt.Fprintln(os.Stdout, string(b))
}
