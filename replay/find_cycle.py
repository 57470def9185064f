"""Finding one recorded cycle in the output log without reading all of it: bisection on output ids.

Output envelope ids are ``<cycle>-start`` and ``<cycle>-<n>``, and the service writes
cycles in order, so the cycle number never decreases along the output log (a crashed
cycle's re-run repeats the same number). ``find_cycle`` bisects on that number to the
first record of the cycle — about 2·log2(outputs) single-record reads — and groups the
cycle from there with ``scheduler.core.recorded_cycles.recorded_cycles``.

The bisection's answer is checked (the record before it belongs to an earlier cycle, the
group found has the number asked for). When a check fails — a damaged or tampered log,
an id that is not a cycle id — or the source cannot read single records, ``find_cycle``
falls back to a forward scan from the start, which is always right.
"""

from __future__ import annotations

from typing import Final

from events.log.port import LogRecord
from replay.reader import LogSource, output_at, outputs_end
from scheduler.core.recorded_cycles import LogStructureError, RecordedCycle, parse_record, recorded_cycles

_UNSURE: Final = "unsure"


def output_cycle(rec: LogRecord) -> int | None:
    """The cycle number in an output record's envelope id, or None when it has none.

    ``"12-start"`` and ``"12-3"`` → 12.
    """
    obj = parse_record(rec)
    ident = obj.get("id") if obj is not None else None
    if not isinstance(ident, str):
        return None
    head = ident.split("-", 1)[0]
    return int(head) if head.isdigit() else None


def _cycle_at(source: LogSource, offset: int) -> int | None:
    rec = output_at(source, offset)
    return output_cycle(rec) if rec is not None else None


def first_offset_of(source: LogSource, number: int, end: int) -> int | str:
    """The offset of the first output of cycle ``number`` or later (``end`` when every
    output is of an earlier cycle), or ``"unsure"`` when the ids do not allow a bisection."""
    lo, hi = 0, end
    while lo < hi:
        mid = (lo + hi) // 2
        cycle = _cycle_at(source, mid)
        if cycle is None:
            return _UNSURE
        if cycle < number:
            lo = mid + 1
        else:
            hi = mid
    if lo > 0:
        before = _cycle_at(source, lo - 1)
        if before is None or before >= number:
            return _UNSURE
    return lo


def _bisected(source: LogSource, number: int) -> RecordedCycle | str | None:
    end = outputs_end(source)
    if end is None:
        return _UNSURE
    offset = first_offset_of(source, number, end)
    if isinstance(offset, str):
        return _UNSURE
    if offset >= end:
        return None  # the log ends before cycle `number`
    try:
        found = next(recorded_cycles(source.iter_outputs(offset)), None)
    except LogStructureError:
        return _UNSURE
    if found is None or found.number != number:
        return _UNSURE
    return found


def scan_for_cycle(source: LogSource, number: int) -> RecordedCycle | None:
    """Cycle ``number`` found by reading the output log from the start (raises ``LogStructureError``
    when the log is not a sequence of cycles before it)."""
    for cycle in recorded_cycles(source.iter_outputs()):
        if cycle.number == number:
            return cycle
    return None


def find_cycle(source: LogSource, number: int) -> RecordedCycle | None:
    """Recorded cycle ``number`` (its last attempt's records, earlier attempts in ``attempts``),
    or None when the log has no such cycle. Bisects when it can (see the module docstring)."""
    found = _bisected(source, number)
    if isinstance(found, str):
        return scan_for_cycle(source, number)
    return found


def latest_cycle(source: LogSource) -> int:
    """The number of the last complete cycle in the output log (0 when there is none): ``--cycle latest``.

    Steps back from the end to the last ``cycle.completed`` when the source reads single
    records; otherwise scans forward.
    """
    end = outputs_end(source)
    if end is not None:
        for offset in range(end - 1, -1, -1):
            rec = output_at(source, offset)
            obj = parse_record(rec) if rec is not None else None
            if obj is not None and obj.get("type") == "cycle.completed" and rec is not None:
                number = output_cycle(rec)
                if number is not None:
                    return number
        return 0
    last = 0
    for cycle in recorded_cycles(source.iter_outputs()):
        if cycle.complete:
            last = cycle.number
    return last
