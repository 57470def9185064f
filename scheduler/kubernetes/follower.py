"""The scheduler's state as the shim sees it when the service runs elsewhere: the log's cycles folded as recorded.

With the shim and the service apart (``evsched k8s --kafka …``) the shim has no engine of the
service's to reconcile with or to explain pending pods from. ``LogFollower`` rebuilds one the
way recovery does (``scheduler.service.recovery.fold_cycle``): each complete cycle of the output
log is applied as fact — its inputs, then its recorded outputs — never decided again, so the
state is exactly the one the service's decisions came from. It reads the output log for the
shim (``read``) and folds as it goes: the engine is consistent whenever the event loop runs
anything else. A cycle whose ``cycle.completed`` has not arrived yet waits for it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from events.log.port import EventLog, LogError, LogRecord
from events.log.source import read_range_async
from events.times import parse_time
from scheduler.core.engine import DEFAULT_SOURCE, Engine
from scheduler.core.recorded_cycles import LogStructureError, parse_record, recorded_cycles
from scheduler.service.recovery import fold_cycle

LOG = logging.getLogger("evsched.k8s")
READ_BATCH = 10_000  # output records per read


@dataclass
class LogFollower:
    """An engine that follows one log's recorded cycles (read only: it never writes)."""

    log: EventLog
    engine: Engine | None = None  # built from the first cycle's source
    output_offset: int = 0  # the next output record to read
    positions: dict[str, int] = field(default_factory=dict)  # inputs the folded cycles consumed (next to read)
    cycles: int = 0
    _tail: list[LogRecord] = field(default_factory=list)  # records of a cycle not complete yet
    _channels: list[str] = field(default_factory=list)

    def current(self) -> Engine:
        """The engine folded so far (an empty one before the first cycle)."""
        if self.engine is None:
            self.engine = Engine(source=DEFAULT_SOURCE)
        return self.engine

    async def between_cycles(self) -> None:
        """Folding happens inside ``read`` between awaits: the engine is never half-changed when others run."""

    async def read(self, start: int, max_records: int = READ_BATCH) -> list[LogRecord]:
        """Output records from ``start`` (as ``EventLog.read_outputs``), after folding every cycle they complete.

        ``start`` must be where the last read ended: the follower folds the log in order."""
        if start != self.output_offset:
            raise LogError(f"the follower is at output {self.output_offset}, not {start}")
        records = await self.log.read_outputs(start, max_records)
        if not records:
            return records
        self.output_offset = records[-1].offset + 1
        await self._fold([*self._tail, *records])
        return records

    async def _fold(self, records: list[LogRecord]) -> None:
        if not self._channels:
            self._channels = await self.log.input_channels()
        try:
            cycles = list(recorded_cycles(records))
        except LogStructureError as exc:
            raise LogError(f"the output log is not a sequence of cycles: {exc.message}") from None
        self._tail = []
        for rec in cycles:
            if not rec.complete:
                self._tail = [r for attempt in rec.attempts for r in attempt] + rec.records
                break
            if self.engine is None:
                obj = parse_record(rec.records[0])
                source = obj.get("source") if obj is not None else None
                self.engine = Engine(source=source if isinstance(source, str) and source else DEFAULT_SOURCE)
            if rec.number <= self.engine.cycle_number:
                continue
            started = rec.started
            inputs = await read_range_async(self.log, started.inputs_from, started.inputs_through)
            digest = fold_cycle(self.engine, rec, inputs, self._channels, parse_time(started.time))
            completed = rec.completed_data or {}
            if digest != completed.get("state_digest"):
                LOG.error("cycle %d: the state folded from the log differs from the recorded digest", rec.number)
            self.positions.update(started.inputs_through)
            self.cycles += 1

    async def catch_up(self, *, say_every_s: float = 10.0, poll_s: float = 0.2) -> None:
        """Fold the log until the service has decided every input present now (and every cycle is folded).

        The shim reconciles with this state: an input already in the log but not yet read by the
        service would otherwise be sent again. Waits (saying so) while no service reads the log."""
        wanted = await self.log.input_end()
        loop = asyncio.get_running_loop()
        said = loop.time()
        while True:
            while await self.read(self.output_offset):
                pass
            behind = {ch: end - self.positions.get(ch, 0) for ch, end in wanted.items()
                      if self.positions.get(ch, 0) < end}
            if not behind and not self._tail:
                return
            if loop.time() - said >= say_every_s:
                said = loop.time()
                LOG.warning("waiting for the scheduler service to read %d inputs already in the log (%s); is "
                            "`evsched run` running on this log?", sum(behind.values()), ", ".join(sorted(behind)))
            await asyncio.sleep(poll_s)
