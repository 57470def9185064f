"""Recent history of a log for the operator's surface: the latest decisions and each recent cycle's figures.

A service that restarts, or ``evsched serve`` over a log, shows what happened before it
started from the log itself: the last ``RECENT_DECISIONS`` allocation decisions, the time
of the last complete cycle, and for each of the last ``SERIES_CYCLES`` complete cycles one
``CycleSample`` per partition (pending and allocated at the cycle's end, decisions made,
and how long the cycle took from its start to its outputs being in the log).

Decisions and times are read from the output log's records; pending and allocated are the
state after each cycle, re-derived with ``replay.rederive`` (the service's own cycle code)
from a start point (a snapshot a little before the cycles wanted, else the beginning).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from events.codec import decode_output
from events.models import AllocationDecided, OutputEvent
from events.resources import Resources
from events.times import TimeFormatError, parse_time
from replay.reader import LogSource
from replay.rederive import Rederiver, StartPoint
from scheduler.core.engine import Engine
from scheduler.core.recorded_cycles import COMPLETED, RecordedCycle, record_type

RECENT_DECISIONS: Final = 200  # decisions the surface keeps (the page and /ws/v1/decisions show the newest)
SERIES_CYCLES: Final = 240  # cycles of figures kept per partition (the page's small charts)


def decision_row(out: OutputEvent) -> dict[str, Any]:
    """An ``allocation.decided`` output as the API shows it (``/ws/v1/decisions``)."""
    data = out.data
    assert isinstance(data, AllocationDecided)
    return {
        "decisionId": data.decision_id, "cycle": data.cycle, "time": out.time, "applicationID": data.app_id,
        "allocationKey": data.ask_id, "partition": data.partition, "queueName": data.queue,
        "nodeId": data.node_id, "resource": dict(data.resources),
    }


@dataclass(frozen=True)
class CycleSample:
    """One partition's figures after one cycle (a point of the page's small time series)."""

    cycle: int
    time: str  # the cycle's log time (RFC 3339)
    decisions: int  # allocation decisions of this partition in the cycle
    seconds: float | None  # from the cycle's start to its outputs in the log; None when unknown
    pending: Resources
    allocated: Resources

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"cycle": self.cycle, "time": self.time, "decisions": self.decisions, "seconds": self.seconds,
                "pending": dict(self.pending), "allocated": dict(self.allocated)}


def samples_of(engine: Engine, time: str, decisions: dict[str, int], seconds: float | None) -> dict[str, CycleSample]:
    """Each partition's sample after the engine's last cycle (``decisions``: counts by partition)."""
    cycle = engine.cycle_number
    return {name: CycleSample(cycle, time, decisions.get(name, 0), seconds, dict(part.root.pending),
                              dict(part.root.allocated))
            for name, part in engine.state.partitions.items()}


def decisions_by_partition(outputs: Iterable[OutputEvent]) -> dict[str, int]:
    """How many ``allocation.decided`` each partition has among ``outputs``."""
    counts: dict[str, int] = {}
    for out in outputs:
        if isinstance(out.data, AllocationDecided):
            counts[out.data.partition] = counts.get(out.data.partition, 0) + 1
    return counts


@dataclass
class History:
    """What the log says happened lately; ``engine`` is the state after ``last_cycle``."""

    decisions: list[dict[str, Any]] = field(default_factory=list)  # newest first
    samples: dict[str, list[CycleSample]] = field(default_factory=dict)  # by partition, oldest first
    last_cycle: int = 0
    last_cycle_unix: float | None = None  # when the log took the last complete cycle's outputs
    engine: Engine | None = None


def recent_decisions(source: LogSource, limit: int, through_cycle: int | None = None) -> list[dict[str, Any]]:
    """The last ``limit`` allocation decisions in the log (of cycles up to ``through_cycle``), newest first."""
    found: deque[dict[str, Any]] = deque(maxlen=max(0, limit))
    for record in source.iter_outputs():
        kind = record_type(record)
        if kind == COMPLETED and through_cycle is not None:
            through_cycle -= 1
            if through_cycle <= 0:
                break
        elif kind == "allocation.decided":
            found.append(decision_row(decode_output(record.value)))
    return list(reversed(found))


def completed_cycles(source: LogSource) -> int:
    """How many cycles the log records as complete."""
    return sum(1 for record in source.iter_outputs() if record_type(record) == COMPLETED)


def _seconds(recorded: RecordedCycle) -> float | None:
    """From the cycle's start (its ``cycle.started`` time) to the log taking its ``cycle.completed``."""
    try:
        began = parse_time(recorded.started.time)
    except TimeFormatError:
        return None
    return max(0.0, (recorded.records[-1].append_time_us - began) / 1e6)


def read_history(source: LogSource, start: StartPoint | None = None, *, cycles: int = SERIES_CYCLES,
                 decisions: int = RECENT_DECISIONS, through_cycle: int | None = None) -> History:
    """The log's recent history up to cycle ``through_cycle`` (None: its last); samples of the
    cycles after ``start`` (the last ``cycles`` of them).

    A service reading its own log passes the cycles there were when it started: the ones it
    writes meanwhile it observes itself. ``LogStructureError`` when the log cannot be re-derived.
    """
    if through_cycle is not None and through_cycle <= 0:
        return History()
    out = History(decisions=recent_decisions(source, decisions, through_cycle))
    series: dict[str, deque[CycleSample]] = {}
    engine: Engine | None = start.engine if start is not None else None
    for step in Rederiver(source, start=start, through_cycle=through_cycle).steps():
        recorded = step.recorded
        if not recorded.complete:
            break
        engine = step.engine
        counts: dict[str, int] = {}
        for rec in recorded.records:
            if record_type(rec) == "allocation.decided":
                data = decode_output(rec.value).data
                assert isinstance(data, AllocationDecided)
                counts[data.partition] = counts.get(data.partition, 0) + 1
        for name, sample in samples_of(engine, recorded.started.time, counts, _seconds(recorded)).items():
            series.setdefault(name, deque(maxlen=cycles)).append(sample)
        out.last_cycle_unix = recorded.records[-1].append_time_us / 1e6
    out.samples = {name: list(kept) for name, kept in series.items()}
    out.engine = engine
    out.last_cycle = engine.cycle_number if engine is not None else 0
    if out.last_cycle_unix is None and start is not None and start.output_offset > 0:
        last = next(iter(source.iter_outputs(start.output_offset - 1)), None)
        out.last_cycle_unix = last.append_time_us / 1e6 if last is not None else None
    return out

