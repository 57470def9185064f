"""Fuzzing the event decoder and the core behind it: hostile records never crash, never stall.

``decode_input`` must return an ``InputEvent`` or an ``InputRejected`` with a stable reason for
any bytes at all; an accepted event must survive the core (apply, cycle, state form) and
every output must stay small enough for any log (a Kafka producer refuses records over its
1 MiB max request, on every retry: one oversized output stalls the partition for good).

Examples per property are kept small for ``make test``; ``EVSCHED_FUZZ_EXAMPLES=N`` runs N.
Longer, coverage-guided runs: ``tests/fuzz/fuzz_codec.py`` (atheris).
"""

from __future__ import annotations

import copy
import os
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.codec import decode_input, decode_input_object, dumps, encode_output, output_to_dict
from events.models import MAX_RECORD_BYTES, InputEvent, InputRejected, OutputEvent
from events.times import MAX_TIME_US, MIN_TIME_US, TimeFormatError, format_time, parse_time
from scheduler.core.engine import Engine
from scheduler.simulation.simulate import Simulation
from tests.fuzz.strategies import (
    EDGE_INTS,
    EDGE_STRINGS,
    EDGE_TIMES,
    HOSTILE_YAML,
    hostile_events,
    json_values,
    nested,
    to_json_bytes,
)

EXAMPLES = int(os.environ.get("EVSCHED_FUZZ_EXAMPLES", "0")) or None
FUZZ = settings(
    max_examples=EXAMPLES or 100, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
KAFKA_MAX_REQUEST = 1 << 20  # aiokafka's default max_request_size: a larger record is refused

REASONS = {
    "invalid", "too-large", "unknown-type", "duplicate", "unknown-app", "unknown-ask", "unknown-node",
    "unknown-queue", "not-a-leaf", "acl-denied", "priority-class", "priority-range", "config-invalid",
    "unknown-partition", "app-exists", "app-completed", "ask-allocated", "node-exists", "overflow",
    "too-many-resource-types",
}  # fmt: skip

VALID: dict[str, dict[str, Any]] = {
    "app.added": {"app_id": "a1", "queue": "root.default", "user": "u", "groups": ["g"], "tags": {"k": "v"}},
    "app.removed": {"app_id": "a1"},
    "ask.added": {"app_id": "a1", "ask_id": "k1", "resources": {"vcore": 1000}, "priority": 5},
    "ask.removed": {"app_id": "a1", "ask_id": "k1"},
    "allocation.released": {"app_id": "a1", "ask_id": "k1"},
    "node.added": {"node_id": "n1", "capacity": {"vcore": 8000, "memory": 2**34}},
    "node.updated": {"node_id": "n1", "occupied": {"vcore": 1}, "schedulable": True},
    "node.removed": {"node_id": "n1"},
    "config.updated": {"yaml": "partitions: [{name: default, queues: [{name: root, submitacl: '*'}]}]"},
    "priorityclass.upserted": {"name": "pc", "value": 10},
    "priorityclass.deleted": {"name": "pc"},
}
OPTIONAL_FIELDS = ["required_node", "priority_class", "partition", "priority", "extra"]
EDGE_VALUES: list[Any] = [
    *EDGE_INTS, *EDGE_STRINGS, *EDGE_TIMES, *HOSTILE_YAML[:20],
    None, True, 1.5, float("inf"), float("nan"), [], {}, [1], {"a": 1},
    {"vcore": -1}, {"vcore": 2**63}, {"vcore": 2**63 - 1}, {"": 1}, {"x" * 300: 1},
]  # fmt: skip


def envelope(event_type: str, data: Any, **fields: Any) -> dict[str, Any]:
    return {"specversion": "1.0", "id": "e1", "source": "fuzz", "type": event_type,
            "time": "2024-01-01T00:00:00Z", "data": data} | fields  # fmt: skip


def check_decoded(result: object) -> None:
    """What every decode result must satisfy, whatever the input."""
    assert isinstance(result, InputEvent | InputRejected), result
    if isinstance(result, InputRejected):
        assert result.reason in REASONS, result
        assert isinstance(result.message, str) and result.message
        assert result.input_id is None or len(result.input_id) < 300
        return
    assert MIN_TIME_US <= result.time_us < MAX_TIME_US
    assert parse_time(format_time(result.time_us)) == result.time_us  # every accepted time round-trips


def check_outputs(outputs: list[OutputEvent]) -> None:
    for event in outputs:
        raw = encode_output(event)
        assert len(raw) < KAFKA_MAX_REQUEST, (event.type, len(raw))
        # encode_output writes flat models from their own values: the bytes must be the
        # published form's, as built by pydantic's dump.
        assert raw == dumps(output_to_dict(event)), event
        if isinstance(event.data, InputRejected):
            assert event.data.reason in REASONS, event.data


def run_engine(records: list[bytes]) -> Engine:
    """Decode, apply, and run two cycles (timers fire in the second) over ``records``."""
    engine = Engine()
    for i, raw in enumerate(records):
        result = decode_input(raw, append_time_us=1_700_000_000_000_000, position=f"inputs@{i}")
        check_decoded(result)
        if isinstance(result, InputEvent):
            engine.apply(result)
        else:
            engine.reject_raw(result)
    check_outputs(engine.cycle(1_700_000_000_000_000, {"inputs": len(records)}))
    check_outputs(engine.cycle(1_700_000_600_000_000, {"inputs": len(records)}))
    engine.state_form()
    return engine


# ---------------------------------------------------------------- every field × every edge value


@pytest.mark.parametrize("event_type", sorted(VALID))
def test_every_edge_value_in_every_field_is_decoded_or_rejected(event_type: str) -> None:
    setup = [envelope("node.added", VALID["node.added"], id="s1"), envelope("app.added", VALID["app.added"], id="s2"),
             envelope("ask.added", VALID["ask.added"], id="s3")]  # fmt: skip
    base = envelope(event_type, VALID[event_type])
    records = [to_json_bytes(e) for e in setup]
    cases = 0
    for where in ("envelope", "data"):
        fields = list(base) if where == "envelope" else [*VALID[event_type], *OPTIONAL_FIELDS]
        for name in fields:
            for value in EDGE_VALUES:
                event = copy.deepcopy(base)
                (event if where == "envelope" else event["data"])[name] = value
                event["id"] = f"{where}-{name}-{cases}" if not (where == "envelope" and name == "id") else value
                records.append(to_json_bytes(event))
                cases += 1
    run_engine(records)  # one engine over all of them: accepted ones also meet each other's state
    assert cases > 500


# ---------------------------------------------------------------- random and mutated records


@FUZZ
@given(st.lists(hostile_events(), min_size=1, max_size=8))
def test_hostile_event_sequences_never_crash_the_decoder_or_the_core(events: list[dict[str, Any]]) -> None:
    run_engine([to_json_bytes(e) for e in events])


@FUZZ
@given(st.binary(max_size=512))
def test_random_bytes_are_rejected_with_a_reason(raw: bytes) -> None:
    result = decode_input(raw, append_time_us=0, position="inputs@0")
    check_decoded(result)


@FUZZ
@given(hostile_events(), st.data())
def test_byte_level_mutations_of_events_never_crash(event: dict[str, Any], data: st.DataObject) -> None:
    raw = bytearray(to_json_bytes(event))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, max(0, len(raw) - 1)))
        op = data.draw(st.sampled_from(["flip", "insert", "delete"]))
        if op == "flip" and raw:
            raw[pos] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "insert":
            raw[pos:pos] = data.draw(st.binary(min_size=1, max_size=4))
        elif raw:
            del raw[pos]
    run_engine([bytes(raw)])


@FUZZ
@given(hostile_events())
def test_the_fast_path_and_the_model_path_agree(event: dict[str, Any]) -> None:
    # decode_input may take a fast path for common records; decode_input_object is the
    # pydantic path. Both must reach the same verdict on every record.
    raw = to_json_bytes(event)
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return
    fast = decode_input(raw, append_time_us=5, position="p")
    slow = decode_input_object(obj, append_time_us=5, position="p")
    assert type(fast) is type(slow)
    if isinstance(fast, InputEvent):
        assert fast == slow
    else:
        assert isinstance(slow, InputRejected)
        assert (fast.reason, fast.input_id, fast.input_type) == (slow.reason, slow.input_id, slow.input_type)


@FUZZ
@given(hostile_events())
def test_an_accepted_event_decodes_the_same_after_a_round_trip(event: dict[str, Any]) -> None:
    first = decode_input(to_json_bytes(event), append_time_us=5)
    if not isinstance(first, InputEvent):
        return
    again = envelope(first.type, first.data.model_dump(), id=first.id, source=first.source,
                     time=format_time(first.time_us))  # fmt: skip
    assert decode_input(orjson.dumps(again), append_time_us=7) == first


schedule_lines = st.builds(
    lambda time, data: {"type": "schedule"} | ({"time": time} if time is not None else {})
    | ({"data": data} if data is not None else {}),
    st.one_of(st.none(), st.sampled_from(EDGE_TIMES), json_values),
    st.one_of(st.none(), json_values, st.fixed_dictionaries({"max_allocations": st.sampled_from(EDGE_INTS)})),
)
simulate_lines = st.one_of(
    hostile_events().map(to_json_bytes), schedule_lines.map(to_json_bytes), st.binary(max_size=60)
)


@FUZZ
@given(st.lists(simulate_lines, max_size=10))
def test_hostile_simulate_files_never_crash(lines: list[bytes]) -> None:
    # ``evsched simulate`` reads its own line format (schedule lines, defaults for id,
    # source and time) on top of the decoder.
    sim = Simulation()
    outputs = [event for line in lines for event in sim.feed(line)] + sim.finish()
    check_outputs(outputs)
    sim.engine.state_form()


def test_a_schedule_line_at_the_end_of_time_is_ignored_not_fatal() -> None:
    # Found by test_hostile_simulate_files…: the cycle's time was printed with format_time,
    # which raised OverflowError: `evsched simulate` died on this one line.
    sim = Simulation()
    outputs = sim.feed(b'{"type": "schedule", "time": "9999-12-31T23:59:59-01:00"}') + sim.finish()
    assert [o.type for o in outputs] == ["cycle.completed", "cycle.completed"]


# ---------------------------------------------------------------- the shapes named in issue #8


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(nested(100_000), id="deep-array"),
        pytest.param(nested(100_000, "{\"a\":", "}"), id="deep-object"),
        pytest.param(b'{"id":"x","source":"s","type":"node.removed","data":' + nested(5000) + b"}", id="deep-data"),
        pytest.param(b"9" * 10_000, id="huge-number"),
        pytest.param(b'{"id":"x","source":"s","type":"ask.added","data":{"app_id":"a","ask_id":"k",'
                     b'"resources":{"vcore":1' + b"0" * 400 + b'}}}', id="huge-quantity"),
        pytest.param(b'{"id":"x","source":"s","type":"node.removed","data":{"node_id":1e999}}', id="float-overflow"),
        pytest.param(b'{"id":"x","source":"s","type":"node.removed","data":{"node_id":NaN}}', id="nan"),
        pytest.param(b'{"id":"\\ud800","source":"s","type":"node.removed","data":{"node_id":"n"}}', id="surrogate"),
        pytest.param(b'{"id":"x","source":"s","type":"node.removed","data":{"node_id":"n"}}\x00', id="trailing-nul"),
        pytest.param(b"\xef\xbb\xbf{}", id="utf8-bom"),
        pytest.param(b'"' + b"x" * (MAX_RECORD_BYTES - 2) + b'"', id="1MiB-string"),
        pytest.param(b" " * (MAX_RECORD_BYTES + 1), id="over-1MiB"),
        pytest.param(b"", id="empty"),
    ],
)
def test_pathological_records_are_rejected(raw: bytes) -> None:
    result = decode_input(raw, append_time_us=0, position="inputs@9")
    check_decoded(result)
    assert isinstance(result, InputRejected)


@pytest.mark.parametrize("priority", [-(2**31) - 1, 2**31, 2**63 - 1, -(2**63)])
def test_priorities_outside_int32_are_rejected_by_the_core(priority: int) -> None:
    ask = envelope("ask.added", VALID["ask.added"] | {"priority": priority}, id="k")
    engine = run_engine([orjson.dumps(envelope("app.added", VALID["app.added"], id="a")), orjson.dumps(ask)])
    assert engine.state.partitions["default"].apps["a1"].asks == {}


@pytest.mark.parametrize("priority", [-(2**31), 2**31 - 1])
def test_int32_edges_are_valid_priorities(priority: int) -> None:
    ask = envelope("ask.added", VALID["ask.added"] | {"priority": priority}, id="k")
    engine = run_engine([orjson.dumps(envelope("app.added", VALID["app.added"], id="a")), orjson.dumps(ask)])
    assert engine.state.partitions["default"].apps["a1"].asks["k1"].priority == priority


@pytest.mark.parametrize("node_id", ["日本語", "é", "😀" * 63, "\u202eevil", "..", "x" * 253])
def test_unicode_and_odd_ids_that_are_valid_survive_the_core(node_id: str) -> None:
    engine = run_engine([orjson.dumps(envelope("node.added", VALID["node.added"] | {"node_id": node_id}))])
    assert node_id in engine.state.partitions["default"].nodes


# ---------------------------------------------------------------- regressions found by fuzzing


@pytest.mark.parametrize(
    "time",
    ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "9999-06-01T00:00:00Z"],
)
def test_times_that_cannot_be_formatted_are_rejected(time: str) -> None:
    # Found by test_every_edge_value…: these decoded, then format_time raised OverflowError
    # wherever the time was printed (simulate's next cycle, explain, export).
    with pytest.raises(TimeFormatError, match="outside"):
        parse_time(time)
    result = decode_input(orjson.dumps(envelope("node.removed", VALID["node.removed"], time=time)), append_time_us=0)
    assert isinstance(result, InputRejected) and result.reason == "invalid" and "outside" in result.message


def test_an_out_of_range_append_time_is_rejected() -> None:
    # A Kafka record timestamp is set by the producer: it stands in for a missing ``time``.
    record = orjson.dumps({k: v for k, v in envelope("node.removed", VALID["node.removed"]).items() if k != "time"})
    result = decode_input(record, append_time_us=2**62, position="inputs@0")
    assert isinstance(result, InputRejected) and "append time" in result.message


def test_early_years_are_formatted_with_four_digits() -> None:
    # strftime("%Y") gives "1-01-01…" for year 1, which parse_time then refused: an export
    # of such a log was not readable by simulate.
    assert format_time(MIN_TIME_US) == "0001-01-01T00:00:00Z"
    assert parse_time(format_time(MIN_TIME_US + 1)) == MIN_TIME_US + 1


@pytest.mark.parametrize("field", ["type", "id"])
def test_a_1MiB_record_never_becomes_a_larger_output(field: str) -> None:
    # Found by check_outputs: an unknown 1 MiB ``type`` was echoed twice (input_type and
    # message), a 2 MiB input.rejected that Kafka refuses on every retry.
    event = envelope("x", {}, **{field: "t" * (MAX_RECORD_BYTES - 200)})
    raw = orjson.dumps(event)
    assert len(raw) <= MAX_RECORD_BYTES
    engine = run_engine([raw])
    assert engine.cycle_number == 2


def test_a_long_acl_denial_message_is_bounded() -> None:
    config = "partitions: [{name: default, queues: [{name: root, queues: [{name: a, submitacl: 'bob'}]}]}]"
    app = VALID["app.added"] | {"queue": "root.a", "user": "eve", "groups": ["g" * 253] * 3000}
    records = [orjson.dumps(envelope("config.updated", {"yaml": config}, id="c")), orjson.dumps(envelope(
        "app.added", app, id="a"))]  # fmt: skip
    engine = Engine()
    for raw in records:
        event = decode_input(raw, append_time_us=0)
        assert isinstance(event, InputEvent)
        engine.apply(event)
    outputs = engine.cycle(0, {})
    denied = [o.data for o in outputs if isinstance(o.data, InputRejected)]
    assert [d.reason for d in denied] == ["acl-denied"]
    assert "more characters" in denied[0].message
    check_outputs(outputs)
