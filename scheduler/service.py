"""The live scheduler service: the asyncio loop that reads inputs, runs cycles, writes outputs.

Loop (DESIGN "How a cycle flows"): read a batch after the current positions → decode,
merge, apply → cycle → append ``cycle.started``, the outputs and ``cycle.completed`` in one
durable batch → commit input positions (Kafka) → hand outputs to the publisher → repeat.
On start it recovers from the log (``scheduler.recovery``). SIGINT/SIGTERM finish the
current cycle, then stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from events.codec import encode_output
from events.log.port import EventLog
from events.models import OutputEvent
from scheduler.core.engine import DEFAULT_SOURCE, Engine
from scheduler.cycle_runner import advance, run_logged_cycle
from scheduler.recovery import recover

LOG = logging.getLogger("evsched.service")


class CycleListener(Protocol):
    """Something that wants every cycle's outputs after they are durable (e.g. the MQTT bridge)."""

    def cycle_done(self, engine: Engine, outputs: list[OutputEvent]) -> None: ...


def wall_clock_us() -> int:
    """The service's clock (the only one: the core receives time from here)."""
    return time.time_ns() // 1000


@dataclass
class Progress:
    """Counters for the periodic progress line."""

    started: float = field(default_factory=time.monotonic)
    last_report: float = field(default_factory=time.monotonic)
    events: int = 0
    decisions: int = 0
    window_events: int = 0
    window_decisions: int = 0


class Service:
    """One scheduler instance over one log."""

    def __init__(
        self,
        log: EventLog,
        *,
        now_us: Callable[[], int] = wall_clock_us,
        batch_records: int = 5_000,
        source: str = DEFAULT_SOURCE,
        poll_interval_s: float = 0.2,
        progress_every_s: float = 5.0,
        listeners: list[CycleListener] | None = None,
    ) -> None:
        self.log = log
        self.now_us = now_us
        self.batch_records = batch_records
        self.source = source
        self.poll_interval_s = poll_interval_s
        self.progress_every_s = progress_every_s
        self.listeners = listeners or []
        self.engine = Engine(source=source)
        self.positions: dict[str, int] = {}
        self.channels: list[str] = []
        self.stopping = asyncio.Event()
        self.progress = Progress()

    async def start(self) -> None:
        """Recover state from the log and report what was found."""
        rec = await recover(self.log, source=self.source, engine=self.engine)
        self.positions = rec.positions
        self.channels = await self.log.input_channels()
        end = await self.log.input_end()
        lag = sum(max(0, end.get(ch, 0) - self.positions.get(ch, 0)) for ch in end)
        if rec.cycles:
            LOG.info(
                "recovered %d cycles (last cycle %d, state %s); resuming at %s with %d inputs waiting",
                rec.cycles, self.engine.cycle_number, self.engine.digest()[:19], self.positions, lag,
            )
        else:
            LOG.info("starting on an empty output log; %d inputs waiting", lag)
        if rec.repaired_outputs:
            LOG.warning("completed a cycle cut short by a crash: wrote %d missing outputs", rec.repaired_outputs)
        if rec.digest_mismatches:
            LOG.error("re-derived state differs from the recorded digest in cycles %s", rec.digest_mismatches)

    async def run_cycle_once(self) -> int:
        """Read one batch and run one cycle over it; returns the number of inputs consumed.

        With no new inputs a cycle still runs when an app timer is due (so Starting apps
        time out and Completing apps complete); otherwise nothing is written.
        """
        records = await self.log.read_inputs(self.positions, self.batch_records)
        now = self.now_us()
        if not records and not self.engine.state.timer_due(now):
            return 0
        through = advance(self.positions, records)
        outputs = run_logged_cycle(self.engine, records, self.channels, now, self.positions, through)
        await self.log.append_outputs([encode_output(o) for o in outputs])
        commit = getattr(self.log, "commit", None)
        if commit is not None:
            await commit(through)
        self.positions = through
        for listener in self.listeners:
            listener.cycle_done(self.engine, outputs)
        decisions = sum(1 for o in outputs if o.type == "allocation.decided")
        self._count(len(records), decisions)
        return len(records)

    def _count(self, events: int, decisions: int) -> None:
        p = self.progress
        p.events += events
        p.decisions += decisions
        p.window_events += events
        p.window_decisions += decisions
        now = time.monotonic()
        if now - p.last_report >= self.progress_every_s:
            span = now - p.last_report
            pending = sum(len(a.asks) for part in self.engine.state.partitions.values() for a in part.apps.values())
            LOG.info(
                "cycle %d: %.0f events/s, %.0f decisions/s, %d asks pending",
                self.engine.cycle_number, p.window_events / span, p.window_decisions / span, pending,
            )
            p.last_report = now
            p.window_events = p.window_decisions = 0

    async def lag(self) -> int:
        """Inputs in the log not yet consumed."""
        end = await self.log.input_end()
        return sum(max(0, end.get(ch, 0) - self.positions.get(ch, 0)) for ch in end)

    async def run(self, *, once: bool = False) -> None:
        """Run until stopped (or, with ``once``, until every present input is processed)."""
        while not self.stopping.is_set():
            consumed = await self.run_cycle_once()
            if consumed:
                continue
            if once:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), self.poll_interval_s)
        p = self.progress
        LOG.info(
            "stopped after cycle %d: %d events, %d decisions in %.1f s",
            self.engine.cycle_number, p.events, p.decisions, time.monotonic() - p.started,
        )

    def stop(self, *_: Any) -> None:
        """Ask the loop to finish its current cycle and return."""
        self.stopping.set()
