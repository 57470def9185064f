"""Cutting the output log into recorded cycles: the boundary records are told from the rest
exactly as a full JSON parse tells them, also when the bytes try to mislead."""

from __future__ import annotations

import orjson
import pytest

from events.log.port import LogRecord
from scheduler.core.recorded_cycles import (
    COMPLETED,
    STARTED,
    LogStructureError,
    boundary_kind,
    record_type,
    recorded_cycles,
)


def rec(offset: int, value: bytes) -> LogRecord:
    return LogRecord("outputs", offset, value, 0)


def started(cycle: int) -> bytes:
    data = {"cycle": cycle, "time": "1970-01-01T00:00:01Z", "inputs_from": {}, "inputs_through": {},
            "rules_version": 3}
    return orjson.dumps({"id": f"{cycle}-start", "type": STARTED, "data": data})


TRICKY = [
    started(1),
    orjson.dumps({"id": "1-9", "type": COMPLETED, "data": {"cycle": 1}}),
    b'{"id":"1-0","type":"\\u0063ycle.started","data":{}}',  # the type spelled with an escape
    b'{"id":"1-0","type":"allocation.decided","data":{"app_id":"cycle.started"}}',  # the name, not as type
    b'{"id":"1-0","type":"app.state_changed","data":{"app_id":"a"}}',
    b'not json at all, but it says cycle.completed',
    b'["cycle.started"]',
    b'{"type":"\\u0061pp.state_changed"}',
]


@pytest.mark.parametrize("value", TRICKY)
def test_a_boundary_is_told_as_a_full_parse_tells_it(value: bytes) -> None:
    full = record_type(rec(0, value))
    assert boundary_kind(rec(0, value)) == (full if full in (STARTED, COMPLETED) else None)


def test_an_escaped_cycle_started_still_opens_a_cycle() -> None:
    escaped = started(2).replace(b'"cycle.started"', b'"\\u0063ycle.started"')
    records = [rec(0, started(1)), rec(1, b'{"type":"app.state_changed","data":{}}'), rec(2, escaped)]
    cycles = list(recorded_cycles(records))
    assert [(c.number, len(c.records)) for c in cycles] == [(1, 2), (2, 1)]


def test_a_record_outside_any_cycle_is_named_by_its_type() -> None:
    with pytest.raises(LogStructureError, match=r"offset 0 \(app.state_changed\) is outside any cycle"):
        list(recorded_cycles([rec(0, b'{"type":"app.state_changed","data":{}}')]))
