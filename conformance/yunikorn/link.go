// The unexported ClusterContext entry points that yunikorn-core's own scheduler tests
// (pkg/scheduler/context_test.go, partition_test.go) call directly. Calling them from one
// goroutine makes every input take effect before the next one, without the RM proxy's
// asynchronous queues; `schedule` is one allocation step (what MultiStepSchedule(1) runs,
// without its 100 ms sleep).
package main

import (
	_ "unsafe" // go:linkname

	"github.com/apache/yunikorn-core/pkg/handler"
	"github.com/apache/yunikorn-core/pkg/rmproxy/rmevent"
	"github.com/apache/yunikorn-core/pkg/scheduler"
)

//go:linkname ccSetEventHandler github.com/apache/yunikorn-core/pkg/scheduler.(*ClusterContext).setEventHandler
func ccSetEventHandler(cc *scheduler.ClusterContext, h handler.EventHandler)

//go:linkname ccSchedule github.com/apache/yunikorn-core/pkg/scheduler.(*ClusterContext).schedule
func ccSchedule(cc *scheduler.ClusterContext) bool

//go:linkname ccUpdateNodes github.com/apache/yunikorn-core/pkg/scheduler.(*ClusterContext).handleRMUpdateNodeEvent
func ccUpdateNodes(cc *scheduler.ClusterContext, ev *rmevent.RMUpdateNodeEvent)

//go:linkname ccUpdateApps github.com/apache/yunikorn-core/pkg/scheduler.(*ClusterContext).handleRMUpdateApplicationEvent
func ccUpdateApps(cc *scheduler.ClusterContext, ev *rmevent.RMUpdateApplicationEvent)

//go:linkname ccUpdateAllocations github.com/apache/yunikorn-core/pkg/scheduler.(*ClusterContext).handleRMUpdateAllocationEvent
func ccUpdateAllocations(cc *scheduler.ClusterContext, ev *rmevent.RMUpdateAllocationEvent)
