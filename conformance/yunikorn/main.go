// Command yunikorn-harness runs apache/yunikorn-core over an evsched scenario (the JSONL of
// `evsched simulate`) and prints what the core decided in evsched's output form: one
// allocation.decided per allocation, app.state_changed, cycle.completed per `schedule`
// line (plus a last cycle at the end of the file), then the final state as one line.
//
//	yunikorn-harness FILE.jsonl       # '-' or nothing: standard input
//	yunikorn-harness -bench FILE.jsonl # apply every input, then time the scheduling alone
//
// In -bench mode a `schedule` line runs an untimed cycle (its outputs discarded), so a benchmark
// can fill a cluster before the timed part; -idle N then times N more single scheduling steps
// after the timed loop (each a step over a cluster where nothing more fits, as a steady-state
// cycle), -budget S stops a timed cycle past S CPU seconds (reported as timed out), and
// -reservation-delay sets yunikorn-core's reservation delay (default in -bench: never; see below).
//
// yunikorn-core is linked as a copy whose clock follows the log (conformance/patch_clock.py,
// evclock): each line sets the time, timers run at the start of a cycle.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/apache/yunikorn-core/pkg/evclock"
	"github.com/apache/yunikorn-core/pkg/log"
	"github.com/apache/yunikorn-core/pkg/scheduler/objects"
)

// line is one scenario line: an input event or a `schedule` marker.
type line struct {
	Type string          `json:"type"`
	Time string          `json:"time"`
	Data json.RawMessage `json:"data"`
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "yunikorn-harness: "+format+"\n", args...)
	os.Exit(2)
}

func open(name string) io.ReadCloser {
	if name == "" || name == "-" {
		return os.Stdin
	}
	f, err := os.Open(name)
	if err != nil {
		fail("%v", err)
	}
	return f
}

func main() {
	bench := flag.Bool("bench", false, "apply every input, then time scheduling until nothing more fits")
	idle := flag.Int("idle", 0, "-bench: time this many single scheduling steps after the timed loop")
	budget := flag.Float64("budget", 0, "-bench: stop the timed cycle once it has taken this many CPU seconds (0: never)")
	delay := flag.Duration("reservation-delay", -1, "-bench: yunikorn-core's reservation delay (default: never; "+
		"conformance runs keep yunikorn's 2 s, on the log's clock)")
	flag.Parse()
	log.UpdateLoggingConfig(map[string]string{"log.level": "FATAL"})
	// yunikorn-core's clock follows the log (evclock), so conformance runs keep its 2 s
	// reservation delay, as evsched's. A benchmark applies every input first and then
	// schedules at the last line's time: it reserves only with -reservation-delay 0s.
	if *delay >= 0 {
		objects.SetReservationDelay(*delay)
	} else if *bench {
		objects.SetReservationDelay(time.Duration(1<<63 - 1))
	}
	in := open(flag.Arg(0))
	defer in.Close()
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	defer out.Flush()
	h := newHarness(out)
	h.fast = *bench
	applyStart := time.Now()
	if *bench { // untimed cycles' outputs are not the benchmark's
		h.out = bufio.NewWriter(io.Discard)
	}
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 1<<20), 1<<21)
	n := 0
	for scanner.Scan() {
		n++
		raw := scanner.Bytes()
		if len(raw) == 0 {
			continue
		}
		var l line
		if err := json.Unmarshal(raw, &l); err != nil {
			fail("line %d: %v", n, err)
		}
		h.clock(l.Time)
		if l.Type == "schedule" {
			var d struct {
				MaxAllocations *int `json:"max_allocations"`
			}
			if len(l.Data) > 0 {
				if err := json.Unmarshal(l.Data, &d); err != nil {
					fail("line %d: %v", n, err)
				}
			}
			limit := -1
			if d.MaxAllocations != nil {
				limit = *d.MaxAllocations
			}
			h.cycle(limit)
			continue
		}
		if err := h.apply(l.Type, l.Data); err != nil {
			fail("line %d (%s): %v", n, l.Type, err)
		}
	}
	if err := scanner.Err(); err != nil {
		fail("%v", err)
	}
	if *bench {
		// the timed cycle runs 10 ms of log time after the last input (as the benchmarks'
		// evsched side does), so its asks are older than a 1 ns preemption delay
		evclock.Set(h.last.Add(10 * time.Millisecond))
		h.bench(time.Since(applyStart).Seconds(), *idle, *budget)
		return
	}
	h.cycle(-1)
	h.printState()
}
