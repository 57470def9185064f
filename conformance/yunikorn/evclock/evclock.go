// Package evclock is the clock the conformance build of yunikorn-core reads instead of the
// wall clock. `conformance/yunikorn/patch_clock.py` copies the module from the Go module
// cache into conformance/.build, rewrites its time.Now / time.Since / time.Until /
// time.AfterFunc calls (and the *time.Timer fields they fill) to this package's, makes the
// partition's queue cleaner an evclock.Every, and puts this file into the copy as
// pkg/evclock; an app's terminated callback, which the core runs on a goroutine, goes
// through Defer. The harness sets the time from the log (Set) and fires due timers itself
// (Fire), synchronously and in due order, so every time-dependent rule of yunikorn-core —
// the 2 s reservation delay, the preemption delay and retry, Starting -> Running after
// 5 minutes, Completing -> Completed after 30 s, the 10 s queue cleaner — follows log time
// exactly and deterministically. Nothing here reads the wall clock.
package evclock

import (
	"sync"
	"sync/atomic"
	"time"
)

// Timer is a pending callback at a clock time (what time.AfterFunc returns in the copy).
type Timer struct {
	when   time.Time
	seq    uint64
	f      func()
	every  time.Duration // > 0: re-armed after each run
	at0    bool          // armed with no delay (AfterFunc(0, …)): "at once"
	active bool
}

var (
	mu     sync.Mutex // guards now's writes, seq and timers
	now    = time.Unix(0, 0).UTC()
	nowNs  atomic.Int64 // now, for lock-free reads (the core reads the time per node tried)
	seq    uint64
	timers []*Timer
	later  []func() // Defer's calls, in order
)

// Now is the clock's time.
func Now() time.Time { return time.Unix(0, nowNs.Load()).UTC() }

func setNow(t time.Time) {
	now = t
	nowNs.Store(t.UnixNano())
}

// Since is Now().Sub(t).
func Since(t time.Time) time.Duration { return Now().Sub(t) }

// Until is t.Sub(Now()).
func Until(t time.Time) time.Duration { return t.Sub(Now()) }

// Set moves the clock to t (never backwards) without firing anything.
func Set(t time.Time) {
	mu.Lock()
	defer mu.Unlock()
	if t.After(now) {
		setNow(t)
	}
}

func arm(d time.Duration, f func(), every time.Duration) *Timer {
	mu.Lock()
	defer mu.Unlock()
	seq++
	t := &Timer{when: now.Add(d), seq: seq, f: f, every: every, at0: d <= 0, active: true}
	timers = append(timers, t)
	return t
}

// AfterFunc calls f once the clock has reached now+d and Fire is called.
func AfterFunc(d time.Duration, f func()) *Timer { return arm(d, f, 0) }

// Every calls f each time the clock has passed another d (first at now+d), on Fire.
func Every(d time.Duration, f func()) *Timer { return arm(d, f, d) }

// Stop cancels the timer; false when it had already run or been stopped.
func (t *Timer) Stop() bool {
	mu.Lock()
	defer mu.Unlock()
	was := t.active
	t.active = false
	return was
}

// Defer queues f to run at the next Fire, before any timer (what the core ran on a
// goroutine of its own, holding a lock f needs).
func Defer(f func()) {
	mu.Lock()
	defer mu.Unlock()
	later = append(later, f)
}

// runDeferred runs the queued Defer calls (and those they queue), in order.
func runDeferred() {
	for {
		mu.Lock()
		if len(later) == 0 {
			mu.Unlock()
			return
		}
		f := later[0]
		later = later[1:]
		mu.Unlock()
		f()
	}
}

// Fire runs the deferred calls, then every armed timer due at or before the clock's time (only those armed with no
// delay when atOnceOnly), earliest first (ties in the order they were armed), with the
// clock showing each timer's own time while it runs; timers armed by a callback run too
// when due. It returns how many ran. Call it holding no lock of the core: the callbacks
// take the core's locks.
// AfterEach, when set, runs after each timer a cycle's Fire runs (not the at-once ones), at that
// timer's time: the harness's shim answers what the callback told it (a placeholder timeout's
// releases) before the next timer fires, as a shim does in the milliseconds after it.
var AfterEach func()

func Fire(atOnceOnly bool) int {
	runDeferred()
	mu.Lock()
	target := now
	mu.Unlock()
	ran := 0
	for {
		mu.Lock()
		live := timers[:0]
		var next *Timer
		for _, t := range timers {
			if !t.active {
				continue
			}
			live = append(live, t)
			if (!atOnceOnly || t.at0) && !t.when.After(target) && (next == nil || earlier(t, next)) {
				next = t
			}
		}
		timers = live
		if next == nil {
			setNow(target)
			mu.Unlock()
			return ran
		}
		t := next
		setNow(t.when) // the callback sees its own time; the clock is back at target after the last
		if t.every > 0 {
			seq++
			t.when, t.seq = t.when.Add(t.every), seq
		} else {
			t.active = false
		}
		mu.Unlock()
		t.f()
		runDeferred()
		if !atOnceOnly && AfterEach != nil {
			AfterEach()
		}
		ran++
	}
}

func earlier(a, b *Timer) bool {
	if !a.when.Equal(b.when) {
		return a.when.Before(b.when)
	}
	return a.seq < b.seq
}
