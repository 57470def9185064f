"""The decode fast path gives exactly what pydantic validation gives, on valid and invalid records."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from events.codec import decode_input, decode_input_object, decode_loaded, encode_output
from events.fast_decode import fast_input
from events.models import InputEvent, InputRejected

VALID: dict[str, dict[str, Any]] = {
    "ask.added": {
        "app_id": "app-1",
        "ask_id": "ask-1",
        "resources": {"vcore": 1000, "memory": 2**31},
        "priority": 5,
        "priority_class": "high",
        "required_node": "node-1",
        "tags": {"k": "v"},
        "partition": "default",
    },
    "app.added": {"app_id": "app-1", "queue": "root.a", "user": "u", "groups": ["g"], "tags": {}, "partition": "p-1"},
    "app.removed": {"app_id": "app-1"},
    "ask.removed": {"app_id": "app-1", "ask_id": "ask-1"},
    "allocation.released": {"app_id": "app-1", "ask_id": "ask-1", "partition": "x_y"},
    "node.added": {
        "node_id": "n1",
        "capacity": {"vcore": 4000},
        "occupied": {"memory": 0},
        "schedulable": False,
        "attributes": {"zone": "a"},
    },
    "node.updated": {"node_id": "n1", "capacity": {"vcore": 1}, "occupied": None, "schedulable": True},
    "node.removed": {"node_id": "n1"},
}

EDGE_STRINGS = ["", "a", "a" * 64, "a" * 65, "a" * 253, "a" * 254, "a" * 1025, "a" * 4097, "x/y", "x#", "x+",
                "\x7f", "tab\t", "ünïcødé", "default", "1.0", "1.1", "a b"]
EDGE_INTS = [-(2**63), -1, 0, 1, 2**31, 2**63 - 1, 2**63, 2**64 - 1]

json_scalar = st.one_of(
    st.none(), st.booleans(), st.sampled_from(EDGE_INTS), st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(EDGE_STRINGS), st.text(max_size=8),
)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.sampled_from(EDGE_STRINGS), st.text(max_size=4)), inner, max_size=3),
    ),
    max_leaves=6,
)
field_names = st.sampled_from(
    ["app_id", "ask_id", "resources", "priority", "priority_class", "required_node", "tags", "partition", "queue",
     "user", "groups", "node_id", "capacity", "occupied", "schedulable", "attributes", "unknown"]
)
envelope_names = st.sampled_from(["specversion", "id", "source", "type", "time", "data", "extra"])


@st.composite
def records(draw: st.DrawFn) -> dict[str, Any]:
    """A valid record of a fast-path type, then a few random edits to its data or envelope."""
    event_type = draw(st.sampled_from(sorted(VALID)))
    data = dict(VALID[event_type])
    record: dict[str, Any] = {"id": "e-1", "source": "s", "type": event_type, "data": data}
    if draw(st.booleans()):
        record["time"] = draw(st.sampled_from(["1970-01-01T00:00:01Z", "2024-02-29T12:00:00.5+02:00",
                                               "2024-01-01T00:00:00", "yesterday"]))
    for _ in range(draw(st.integers(0, 3))):
        action = draw(st.sampled_from(["drop", "set", "set", "envelope"]))
        if action == "drop" and data:
            del data[draw(st.sampled_from(sorted(data)))]
        elif action == "set":
            data[draw(field_names)] = draw(json_value)
        else:
            record[draw(envelope_names)] = draw(json_value)
    return record


def layout(model: Any) -> Any:
    """Everything validation decides about a model: values (with their exact types) and fields set."""
    if isinstance(model, InputRejected | InputEvent) or hasattr(model, "__pydantic_fields_set__"):
        return (type(model), {k: layout(v) for k, v in model.__dict__.items()}, model.__pydantic_fields_set__,
                model.__pydantic_extra__, model.__pydantic_private__)
    if isinstance(model, dict):
        return (dict, [(layout(k), layout(v)) for k, v in model.items()])
    if isinstance(model, list):
        return (list, [layout(v) for v in model])
    return (type(model), model)


def assert_same_as_pydantic(record: dict[str, Any]) -> None:
    try:
        raw = orjson.dumps(record)
    except orjson.JSONEncodeError:
        assume(False)
        return
    fast = decode_input(raw, append_time_us=7, position="p@1")
    slow = decode_input_object(orjson.loads(raw), append_time_us=7, position="p@1")
    assert layout(fast) == layout(slow)


@given(records())
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_fast_path_equals_pydantic_on_generated_records(record: dict[str, Any]) -> None:
    assert_same_as_pydantic(record)


def test_valid_records_take_the_fast_path_and_match() -> None:
    for event_type, data in VALID.items():
        record = {"id": "e-1", "source": "s", "type": event_type, "time": "1970-01-01T00:00:01Z", "data": data}
        assert fast_input(orjson.loads(orjson.dumps(record))) is not None, event_type
        assert_same_as_pydantic(record)
        minimal = {k: v for k, v in data.items() if k in ("app_id", "ask_id", "resources", "node_id", "capacity",
                                                          "queue", "user")}
        assert_same_as_pydantic({"id": "e-2", "source": "s", "type": event_type, "data": minimal})


def test_boundaries_match_pydantic() -> None:
    cases = [
        ("ask.added", "app_id", "a" * 253), ("ask.added", "app_id", "a" * 254), ("ask.added", "app_id", "a/b"),
        ("ask.added", "resources", {"vcore": 2**63 - 1}), ("ask.added", "resources", {"vcore": 2**63}),
        ("ask.added", "resources", {"vcore": -1}), ("ask.added", "resources", {"vcore": True}),
        ("ask.added", "resources", {"": 1}), ("ask.added", "priority", True), ("ask.added", "priority", 2**63),
        ("ask.added", "priority", None), ("ask.added", "tags", None), ("ask.added", "partition", "a" * 65),
        ("ask.added", "partition", "ok-1"), ("ask.added", "partition", "no.dots"), ("ask.added", "extra", 1),
        ("node.added", "schedulable", 1), ("node.added", "occupied", None), ("app.added", "queue", ""),
        ("app.added", "groups", ["a" * 254]), ("app.added", "user", ""), ("node.updated", "schedulable", None),
    ]
    for event_type, name, value in cases:
        data = dict(VALID[event_type])
        data[name] = value
        assert_same_as_pydantic({"id": "e", "source": "s", "type": event_type, "data": data})
    for envelope in ({"specversion": "1.0"}, {"specversion": "0.3"}, {"id": ""}, {"id": "a" * 254},
                     {"source": 5}, {"time": None}, {"time": 5}, {"type": ["ask.added"]}):
        record = {"id": "e", "source": "s", "type": "ask.added", "data": dict(VALID["ask.added"]), **envelope}
        assert_same_as_pydantic(record)


def simulate_outputs(lines: list[bytes], decode: Any) -> list[bytes]:
    """Every output of ``evsched simulate`` over ``lines``, its records decoded by ``decode``."""
    import scheduler.simulation.simulate as simulate_module

    original = getattr(simulate_module, "decode_loaded")  # noqa: B009 — imported there, not exported
    setattr(simulate_module, "decode_loaded", decode)  # noqa: B010
    try:
        return [encode_output(event) for event in simulate_module.simulate(lines)]
    finally:
        setattr(simulate_module, "decode_loaded", original)  # noqa: B010


def test_simulate_takes_the_fast_path_with_pydantic_results() -> None:
    """``evsched simulate`` decodes through the fast path: the same outputs, rejections and messages as
    pydantic validation of every line (valid lines, and lines each broken one way)."""
    lines = [orjson.dumps({"type": "node.added", "data": {"node_id": "n-1", "capacity": {"vcore": 10_000}}}),
             orjson.dumps({"type": "app.added", "data": {"app_id": "app-1", "queue": "root.default", "user": "u"}})]
    broken: list[tuple[str, Any]] = [("app_id", "a/b"), ("resources", {"vcore": -1}), ("priority", True),
                                     ("extra", 1), ("tags", None), ("partition", "no.dots")]
    for number, (name, value) in enumerate([("", None), *broken]):
        data: dict[str, Any] = {"app_id": "app-1", "ask_id": f"ask-{number}", "resources": {"vcore": 1000}}
        if name:
            data[name] = value
        lines.append(orjson.dumps({"type": "ask.added", "data": data}))
    lines.append(orjson.dumps({"id": 5, "type": "ask.added", "data": {}}))
    fast = simulate_outputs(lines, decode_loaded)
    slow = simulate_outputs(lines, decode_input_object)
    assert fast == slow
    assert sum(b'"type":"input.rejected"' in out for out in fast) == len(broken) + 1
    assert sum(b'"type":"allocation.decided"' in out for out in fast) == 1
