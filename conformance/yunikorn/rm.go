// The resource-manager side: a synchronous event handler standing in for the RM proxy and
// the shim (like the tests' mockRMCallback), recording what yunikorn-core tells the RM.
package main

import (
	"sync"

	"github.com/apache/yunikorn-core/pkg/rmproxy/rmevent"
	"github.com/apache/yunikorn-scheduler-interface/lib/go/si"
)

// stateChange is one application state update reported to the RM.
type stateChange struct {
	appID string
	state string
}

// recorder receives every outgoing event of the core, in the order the core sends them.
type recorder struct {
	mu        sync.Mutex
	newAllocs []*si.Allocation
	released  []*si.AllocationRelease
	states    []stateChange
	rejected  map[string]string // app id -> reason
}

func newRecorder() *recorder {
	return &recorder{rejected: map[string]string{}}
}

// reply answers a synchronous event: the core blocks on an unbuffered channel after HandleEvent.
func reply(c chan *rmevent.Result) {
	if c != nil {
		go func() { c <- &rmevent.Result{Succeeded: true} }()
	}
}

func (r *recorder) HandleEvent(ev interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch e := ev.(type) {
	case *rmevent.RMNewAllocationsEvent:
		r.newAllocs = append(r.newAllocs, e.Allocations...)
		reply(e.Channel)
	case *rmevent.RMReleaseAllocationEvent:
		r.released = append(r.released, e.ReleasedAllocations...)
		reply(e.Channel)
	case *rmevent.RMApplicationUpdateEvent:
		for _, a := range e.RejectedApplications {
			r.rejected[a.ApplicationID] = a.Reason
			r.states = append(r.states, stateChange{a.ApplicationID, "Rejected"})
		}
		for _, a := range e.UpdatedApplications {
			r.states = append(r.states, stateChange{a.ApplicationID, a.State})
		}
	}
}

// take returns and clears what was recorded since the last call.
func (r *recorder) take() ([]*si.Allocation, []*si.AllocationRelease, []stateChange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, rel, s := r.newAllocs, r.released, r.states
	r.newAllocs, r.released, r.states = nil, nil, nil
	return a, rel, s
}

// rejectedReason takes the reason the core gave for rejecting the app, if it did.
func (r *recorder) rejectedReason(appID string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	reason, ok := r.rejected[appID]
	delete(r.rejected, appID) // an id may be used again
	return reason, ok
}
