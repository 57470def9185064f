"""What the HTTP surface knows of a running service beyond its state: counters, recent decisions, timings.

A ``ServiceObserver`` is a cycle listener (``scheduler.service.loop.CycleListener``): the
service calls it after each cycle's outputs are durable, on the event loop, so it needs no
lock. Its per-cycle cost is one pass over the cycle's outputs (a counter per output type
and rejection reason), a bounded deque of the latest decisions and one ``CycleSample`` per
partition (the root's pending and allocated); everything else derived from the state
(queues, apps, nodes) is read at request time, between cycles.

A service that (re)starts knows nothing of the cycles before it: ``seed`` fills in the
decisions, samples and last cycle time read from the log (``replay.history``), behind
whatever the service has observed since.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from events.models import AllocationDecided, InputRejected, OutputEvent
from events.times import format_time
from replay.history import (
    RECENT_DECISIONS,
    SERIES_CYCLES,
    CycleSample,
    History,
    decision_row,
    decisions_by_partition,
    samples_of,
)
from scheduler.core.engine import Engine

# Cycle duration buckets (seconds): a cycle is a few ms idle, up to seconds on a backlog.
CYCLE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass
class ServiceObserver:
    """Counters and recent decisions of one service, updated once per cycle."""

    cycles: int = 0
    outputs_by_type: Counter[str] = field(default_factory=Counter)
    rejections_by_reason: Counter[str] = field(default_factory=Counter)
    recent: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=RECENT_DECISIONS))
    last_cycle_unix: float | None = None
    on_cycle: list[Callable[[Engine, list[OutputEvent]], None]] = field(default_factory=list)
    cycle_seconds: Callable[[], float] | None = None  # the service's last cycle duration, once attached
    bucket_counts: list[int] = field(default_factory=lambda: [0] * (len(CYCLE_BUCKETS) + 1))
    seconds_sum: float = 0.0
    samples: dict[str, deque[CycleSample]] = field(default_factory=dict)  # by partition, oldest first

    def cycle_done(self, engine: Engine, outputs: list[OutputEvent]) -> None:
        """Count one cycle's outputs (called by the service after they are durable)."""
        self.cycles += 1
        self.last_cycle_unix = time.time()
        seconds = self.cycle_seconds() if self.cycle_seconds is not None else None
        if seconds is not None:
            self.observe(seconds)
        for out in outputs:
            self.outputs_by_type[out.type] += 1
            data = out.data
            if isinstance(data, AllocationDecided):
                self.recent.append(decision_row(out))
            elif isinstance(data, InputRejected):
                self.rejections_by_reason[data.reason] += 1
        when = format_time(engine.state.cycle_time_us) if engine.state.cycle_time_us is not None else ""
        for name, sample in samples_of(engine, when, decisions_by_partition(outputs), seconds).items():
            self._series(name).append(sample)
        for hook in self.on_cycle:
            hook(engine, outputs)

    def observe(self, seconds: float) -> None:
        """Count one cycle duration in its histogram bucket (the last bucket is +Inf)."""
        self.seconds_sum += seconds
        for i, bound in enumerate(CYCLE_BUCKETS):
            if seconds <= bound:
                self.bucket_counts[i] += 1
                return
        self.bucket_counts[-1] += 1

    def _series(self, partition: str) -> deque[CycleSample]:
        kept = self.samples.get(partition)
        if kept is None:
            kept = self.samples[partition] = deque(maxlen=SERIES_CYCLES)
        return kept

    def seed(self, history: History) -> None:
        """Put what the log says happened before this service's first observed cycle behind it."""
        first_decision = self.recent[0]["cycle"] if self.recent else None
        older = [d for d in reversed(history.decisions) if first_decision is None or d["cycle"] < first_decision]
        self.recent = deque([*older, *self.recent], maxlen=RECENT_DECISIONS)  # the newest kept
        for name, samples in history.samples.items():
            kept = self._series(name)
            first = kept[0].cycle if kept else None
            before = [s for s in samples if first is None or s.cycle < first]
            self.samples[name] = deque([*before, *kept], maxlen=SERIES_CYCLES)
        if self.last_cycle_unix is None:
            self.last_cycle_unix = history.last_cycle_unix

    def decisions(self, limit: int) -> list[dict[str, Any]]:
        """The latest decisions, newest first."""
        return list(reversed(self.recent))[: max(0, limit)]

    def series(self, partition: str, last: int) -> list[CycleSample]:
        """The partition's last ``last`` cycle samples, oldest first."""
        kept = list(self.samples.get(partition, ()))
        return kept[-last:] if last > 0 else []
