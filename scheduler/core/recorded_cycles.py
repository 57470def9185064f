"""Recorded cycles: the output log cut into the batches the service wrote, one per cycle.

The service writes, per cycle ``k``, ``cycle.started`` (id ``k-start``), the engine's
outputs (``k-0``, ``k-1``, …) and last ``cycle.completed``. ``recorded_cycles`` groups the
output records that way, without judging their contents (verify does that):

* a group starts at every ``cycle.started`` record and ends after ``cycle.completed``
  (or just before the next ``cycle.started``);
* a group cut short and followed by a ``cycle.started`` with the very same bytes is an
  attempt the service re-ran after a crash: it is kept in ``attempts`` of the re-run;
* records outside any group (before the first ``cycle.started``, or between a
  ``cycle.completed`` and the next ``cycle.started``) raise ``LogStructureError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
from pydantic import ValidationError

from events.log.port import LogRecord
from events.models import CycleStarted

STARTED: Final = "cycle.started"
COMPLETED: Final = "cycle.completed"


class LogStructureError(Exception):
    """The output log does not follow the cycle protocol; carries where it broke."""

    def __init__(self, message: str, *, cycle: int | None = None, output_offset: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.cycle = cycle
        self.output_offset = output_offset


@dataclass
class RecordedCycle:
    """One cycle's output records as recorded, ``cycle.started`` first."""

    number: int
    started: CycleStarted
    records: list[LogRecord]
    complete: bool = False
    attempts: list[list[LogRecord]] = field(default_factory=list)

    @property
    def completed_data(self) -> dict[str, Any] | None:
        """The ``data`` of the recorded ``cycle.completed``, when the cycle has one."""
        if not self.complete:
            return None
        obj = parse_record(self.records[-1])
        data = obj.get("data") if obj is not None else None
        return data if isinstance(data, dict) else None


def parse_record(rec: LogRecord) -> dict[str, Any] | None:
    """A log record (output or input) as a JSON object, or None when it is not one."""
    try:
        obj = orjson.loads(rec.value)
    except orjson.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def record_type(rec: LogRecord) -> str | None:
    """The ``type`` of an output record, or None when unreadable."""
    obj = parse_record(rec)
    kind = obj.get("type") if obj is not None else None
    return kind if isinstance(kind, str) else None


def boundary_kind(rec: LogRecord) -> str | None:
    """``cycle.started``, ``cycle.completed``, or None for any other record.

    Most records are neither, and bytes with no ``cycle.`` and no escape (which could spell
    it) cannot be either: those are told without parsing the JSON.
    """
    value = rec.value
    if b"cycle." not in value and b"\\" not in value:
        return None
    kind = record_type(rec)
    return kind if kind in (STARTED, COMPLETED) else None


def _started(rec: LogRecord) -> CycleStarted:
    obj = parse_record(rec)
    try:
        return CycleStarted.model_validate(obj.get("data") if obj is not None else None)
    except ValidationError as exc:
        raise LogStructureError(
            f"unreadable cycle.started record at output offset {rec.offset}: {exc.errors()[0]['msg']}",
            output_offset=rec.offset,
        ) from None


def recorded_cycles(outputs: Iterable[LogRecord]) -> Iterator[RecordedCycle]:
    """Group output records into recorded cycles (see the module docstring)."""
    current: RecordedCycle | None = None
    last_number: int | None = None
    for rec in outputs:
        kind = boundary_kind(rec)
        if kind == STARTED:
            started = _started(rec)
            if current is not None:
                if started.cycle == current.number and current.records[0].value == rec.value:
                    attempts = [*current.attempts, current.records]
                    current = RecordedCycle(started.cycle, started, [rec], attempts=attempts)
                    continue
                yield current
            current = RecordedCycle(started.cycle, started, [rec])
            continue
        if current is None:
            where = "before the first cycle.started" if last_number is None else f"after cycle {last_number} completed"
            raise LogStructureError(
                f"output record at offset {rec.offset} ({record_type(rec) or 'unreadable'}) is outside any cycle "
                f"({where})",
                cycle=None if last_number is None else last_number + 1,
                output_offset=rec.offset,
            )
        current.records.append(rec)
        if kind == COMPLETED:
            current.complete = True
            last_number = current.number
            yield current
            current = None
    if current is not None:
        yield current
