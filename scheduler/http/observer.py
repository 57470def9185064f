"""What the HTTP surface knows of a running service beyond its state: counters, recent decisions, timings.

A ``ServiceObserver`` is a cycle listener (``scheduler.service.loop.CycleListener``): the
service calls it after each cycle's outputs are durable, on the event loop, so it needs no
lock. Its per-cycle cost is one pass over the cycle's outputs (a counter per output type
and rejection reason) and a bounded deque of the latest decisions; everything derived from
the state (queues, apps, nodes) is read at request time, between cycles.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from events.models import AllocationDecided, InputRejected, OutputEvent
from scheduler.core.engine import Engine

RECENT_DECISIONS = 200
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

    def cycle_done(self, engine: Engine, outputs: list[OutputEvent]) -> None:
        """Count one cycle's outputs (called by the service after they are durable)."""
        self.cycles += 1
        self.last_cycle_unix = time.time()
        if self.cycle_seconds is not None:
            self.observe(self.cycle_seconds())
        for out in outputs:
            self.outputs_by_type[out.type] += 1
            data = out.data
            if isinstance(data, AllocationDecided):
                self.recent.append({
                    "decisionId": data.decision_id, "cycle": data.cycle, "time": out.time,
                    "applicationID": data.app_id, "allocationKey": data.ask_id, "partition": data.partition,
                    "queueName": data.queue, "nodeId": data.node_id, "resource": dict(data.resources),
                })
            elif isinstance(data, InputRejected):
                self.rejections_by_reason[data.reason] += 1
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

    def decisions(self, limit: int) -> list[dict[str, Any]]:
        """The latest decisions, newest first."""
        return list(reversed(self.recent))[: max(0, limit)]
