"""Quantities in input events in a config's units ("4Gi", "500m"): decoded to the exact integers a config gives,
on both decode paths, with errors that name the field, the resource and its unit (events.models)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from events.codec import decode_input, decode_input_object, decode_loaded
from events.fast_decode import fast_input
from events.models import AskAdded, InputEvent, InputRejected, NodeAdded, NodeUpdated
from events.quantities import parse_quantity


def _record(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"id": "e1", "source": "rm", "type": kind, "data": data}


def _decode(kind: str, data: dict[str, Any]) -> InputEvent | InputRejected:
    return decode_input(orjson.dumps(_record(kind, data)), append_time_us=1, position="inputs@0")


@pytest.mark.parametrize(("name", "text", "expected"), [
    ("memory", "4Gi", 4 << 30),
    ("memory", "500M", 500_000_000),
    ("memory", "2k", 2000),
    ("vcore", "500m", 500),
    ("vcore", "2", 2000),  # a string counts cores, as in a config
    ("nvidia.com/gpu", "4", 4),
    ("ephemeral-storage", " 1 Ti ", 1 << 40),  # Go's TrimSpace and the space before a suffix, as a config
])
def test_a_quantity_string_decodes_to_the_integer_a_config_gives(name: str, text: str, expected: int) -> None:
    assert parse_quantity(name, text) == expected
    event = _decode("ask.added", {"app_id": "a", "ask_id": "k", "resources": {name: text}})
    assert isinstance(event, InputEvent) and isinstance(event.data, AskAdded)
    assert event.data.resources == {name: expected}
    assert type(event.data.resources[name]) is int


def test_strings_and_integers_give_equal_events_on_both_decode_paths() -> None:
    as_text = {"node_id": "n1", "capacity": {"vcore": "8", "memory": "16Gi"}, "occupied": {"memory": "1Gi"}}
    as_ints = {"node_id": "n1", "capacity": {"vcore": 8000, "memory": 16 << 30}, "occupied": {"memory": 1 << 30}}
    texts, ints = _record("node.added", as_text), _record("node.added", as_ints)
    assert fast_input(texts) is None  # not the fast path's to judge: pydantic normalises
    from_text = decode_loaded(texts, append_time_us=1)
    from_ints = decode_loaded(ints, append_time_us=1)
    assert from_text == from_ints == decode_input_object(ints, append_time_us=1)
    assert isinstance(from_text, InputEvent) and isinstance(from_text.data, NodeAdded)
    assert from_text.data.capacity == {"vcore": 8000, "memory": 16 << 30}
    updated = _decode("node.updated", {"node_id": "n1", "capacity": {"memory": "2Gi"}})
    assert isinstance(updated, InputEvent) and isinstance(updated.data, NodeUpdated)
    assert updated.data.capacity == {"memory": 2 << 30}


@pytest.mark.parametrize(("resources", "words"), [
    ({"memory": "4Gx"}, ["resources: ", "invalid quantity '4Gx' for 'memory'", "an integer in bytes", '"4Gi"']),
    ({"memory": "500m"}, ["invalid suffix 'm'", "an integer in bytes"]),  # milli only for vcore
    ({"vcore": "1.5"}, ["invalid quantity '1.5' for 'vcore'", "milli-cores", '"500m"']),
    ({"vcore": 1.5}, ["vcore: 1.5 is not a quantity", "an integer in milli-cores"]),
    ({"pods": True}, ["pods: True is not a quantity", "an integer count"]),
    ({"memory": "-1Gi"}, ["invalid quantity '-1Gi' for 'memory'"]),
    ({"memory": "9Ei"}, ["overflow"]),
    ({"memory": -1}, ["resources.memory", "greater than or equal to 0"]),
])
def test_a_bad_quantity_is_rejected_naming_the_field_and_the_unit(resources: dict[str, Any], words: list[str]) -> None:
    rejected = _decode("ask.added", {"app_id": "a", "ask_id": "k", "resources": resources})
    assert isinstance(rejected, InputRejected)
    assert rejected.reason == "invalid"
    for word in words:
        assert word in rejected.message, (word, rejected.message)


def test_integers_decode_as_before() -> None:
    """Old logs hold integers only: the fast path still takes them, to the same event as pydantic."""
    record = _record("ask.added", {"app_id": "a", "ask_id": "k", "resources": {"vcore": 1500, "memory": 7}})
    assert fast_input(record) is not None
    fast = decode_loaded(record, append_time_us=1)
    assert fast == decode_input_object(record, append_time_us=1)
    assert isinstance(fast, InputEvent) and isinstance(fast.data, AskAdded)
    assert fast.data.resources == {"vcore": 1500, "memory": 7}
