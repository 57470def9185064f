"""Export: the log as a self-contained ``simulate`` file that reproduces the recorded run.

Per recorded (complete) cycle: its input records, one JSON line each in the order the
cycle applied them, then ``{"type": "schedule", "time": <the cycle's time>}``. Fed to
``evsched simulate`` (which starts from the built-in default config, as the service's
engine does) the file yields the recorded decisions: same ids, nodes and order.

Each record is written so that ``simulate`` reads it as the service did:

* a JSON object keeps its fields; a missing (or null) ``time`` becomes the record's
  append time, written out, and a missing ``id`` / ``source`` becomes ``null`` so that
  simulate rejects the record as the service did instead of inventing one;
* any other JSON value is written compactly;
* a record that is not JSON is written verbatim when it is non-blank UTF-8 text on one
  line (simulate rejects it as ``invalid`` too), and otherwise replaced by a stand-in
  line of plain words naming the record — not JSON, so also rejected as ``invalid``;
* a record over 1 MiB is written verbatim when it is such a line, else as a stand-in of
  over 1 MiB, so simulate rejects it as ``too-large``;
* a JSON object whose ``type`` is ``"schedule"`` (rejected by the service as an unknown
  type, but a cycle to simulate) becomes a stand-in line (rejected as ``invalid``);
* a rules change the cycle refused as ``not-authorized`` (from outside its admin channels)
  becomes a stand-in line too: a simulate file is one trusted file and would apply it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import orjson

from events.log.port import LogRecord
from events.models import ADMIN_TYPES, MAX_RECORD_BYTES
from events.times import MAX_TIME_US, MIN_TIME_US, format_time
from replay.reader import InputCursor, InputGap, LogSource, channel_order
from scheduler.core.logged_cycle import decode_records, merge
from scheduler.core.recorded_cycles import LogStructureError, recorded_cycles


class ExportError(Exception):
    """The log cannot be exported (a structural problem, or no such cycle)."""

    def __init__(self, message: str, *, structural: bool = False) -> None:
        super().__init__(message)
        self.structural = structural  # the log itself cannot be replayed (exit 2), not a bad request (exit 1)


@dataclass
class ExportStats:
    """What an export wrote."""

    cycles: int = 0
    inputs: int = 0
    stand_ins: list[str] = field(default_factory=list)  # positions of records written as stand-in lines
    incomplete_cycle: int | None = None


def _one_line_text(raw: bytes) -> bool:
    if b"\n" in raw or not raw.strip():
        return False
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _stand_in(rec: LogRecord, why: str) -> bytes:
    return f"unreadable input record {rec.position} ({len(rec.value)} bytes, {why}) stands here".encode()


def simulate_line(rec: LogRecord) -> tuple[bytes, bool]:
    """The ``simulate`` line for one input record, and whether it is a stand-in."""
    raw = rec.value
    if len(raw) > MAX_RECORD_BYTES:
        if _one_line_text(raw):
            return raw, False
        line = _stand_in(rec, "over 1 MiB")
        return line + b" " + b"." * (MAX_RECORD_BYTES + 1 - len(line)), True
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        if _one_line_text(raw):
            return raw, False
        return _stand_in(rec, "not JSON text on one line"), True
    if not isinstance(obj, dict):
        return orjson.dumps(obj), False
    if obj.get("type") == "schedule":
        return _stand_in(rec, 'type "schedule" is reserved by simulate; the service rejected it as unknown-type'), True
    obj.setdefault("id", None)
    obj.setdefault("source", None)
    if obj.get("time") is None:
        if not MIN_TIME_US <= rec.append_time_us < MAX_TIME_US:  # the service rejected it as invalid
            return _stand_in(rec, f"no time, and an append time of {rec.append_time_us} µs out of range"), True
        obj["time"] = format_time(rec.append_time_us)
    return orjson.dumps(obj), False


def schedule_line(time_text: str) -> bytes:
    """The line that runs one cycle at the recorded time."""
    return orjson.dumps({"type": "schedule", "time": time_text})


def _input_type(rec: LogRecord) -> object:
    try:
        obj = orjson.loads(rec.value)
    except orjson.JSONDecodeError:
        return None
    return obj.get("type") if isinstance(obj, dict) else None


def _apply_order(records: list[LogRecord], channels: list[str]) -> list[LogRecord]:
    if len({r.channel for r in records}) <= 1:
        return sorted(records, key=lambda r: r.offset)
    return [d.record for d in merge(decode_records(records), channels)]


def export_lines(source: LogSource, stats: ExportStats, through_cycle: int | None = None) -> Iterator[bytes]:
    """The lines (without newlines) of the simulate file; fills in ``stats`` as it goes.

    Raises ``ExportError`` (possibly after some lines) when the log is damaged or
    ``through_cycle`` is not a complete cycle of the log.
    """
    if through_cycle is not None and through_cycle < 1:
        raise ExportError(f"--through-cycle must be at least 1, got {through_cycle}")
    cursor = InputCursor(source)
    try:
        for recorded in recorded_cycles(source.iter_outputs()):
            if not recorded.complete:
                stats.incomplete_cycle = recorded.number
                break
            if recorded.number != stats.cycles + 1:
                raise ExportError(
                    f"cycle {recorded.number} follows cycle {stats.cycles}: the output log is damaged", structural=True
                )
            started = recorded.started
            problem = cursor.check_from(started.inputs_from)
            if problem is not None:
                raise ExportError(f"cycle {recorded.number}: {problem}", structural=True)
            records = cursor.take(started.inputs_from, started.inputs_through)
            order = channel_order(source, set(started.inputs_through) | set(started.inputs_from))
            for rec in _apply_order(records, order):
                line, stand_in = simulate_line(rec)
                if started.admin_channels is not None and rec.channel not in started.admin_channels and (
                        _input_type(rec) in ADMIN_TYPES):
                    line, stand_in = _stand_in(rec, "a rules change refused as not-authorized"), True
                if stand_in:
                    stats.stand_ins.append(rec.position)
                stats.inputs += 1
                yield line
            yield schedule_line(started.time)
            stats.cycles += 1
            if through_cycle is not None and recorded.number >= through_cycle:
                return
    except (LogStructureError, InputGap) as exc:
        raise ExportError(f"cannot export the log: {exc}", structural=True) from None
    if through_cycle is not None and stats.cycles < through_cycle:
        raise ExportError(f"cycle {through_cycle} is not in the log: it holds {stats.cycles} complete cycles")
