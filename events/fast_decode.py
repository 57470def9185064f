"""A validation fast path for input records: plain checks that accept a subset of what the
pydantic models accept, and build models equal to the ones pydantic would build.

Why: validating the envelope and the data with pydantic, then constructing the event, costs
about 8 µs of CPU per record, close to the cost of folding the event into the state. Here
the common records are checked with plain comparisons and the models are built without a
second validation. Anything this module is not sure of (a wrong type, an unknown key, a value out of
range, an unusual string) returns ``None`` and the caller validates with pydantic, so a
rejection always has exactly the pydantic reason and message. Tests compare both paths on
generated valid and invalid records.

Only for values produced by ``orjson.loads``: every string is then an exact ``str`` of valid
Unicode and every integer fits 64 bits.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

from events.model_construct import construct
from events.models import (
    IDENTIFIER_CHARS,
    INPUT_DATA,
    MAX_LABEL_KEY,
    MAX_LABEL_VALUE,
    MAX_LABELS,
    MAX_PLACEHOLDER_TIMEOUT_MS,
    PARTITION_CHARS,
    AllocationReleased,
    AppAdded,
    AppRemoved,
    AskAdded,
    AskRemoved,
    Constraints,
    Frozen,
    InputEnvelope,
    InputEvent,
    NodeAdded,
    NodeRemoved,
    NodeUpdated,
)
from events.resources import MAX_QUANTITY
from events.times import TimeFormatError, event_time_us

_BAD: Final[Any] = object()  # a checker's answer for "not sure: let pydantic decide"
_REQUIRED: Final[Any] = object()

_IDENTIFIER: Final = re.compile(IDENTIFIER_CHARS).fullmatch  # models.Identifier's pattern
_PARTITION: Final = re.compile(PARTITION_CHARS).fullmatch  # models.PartitionName's pattern
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1

Checker = Callable[[Any], Any]


# ---------------------------------------------------------------- field checkers


def _identifier(v: Any) -> Any:
    if type(v) is str and len(v) <= 253 and _IDENTIFIER(v) is not None:
        return v
    return _BAD


def _partition(v: Any) -> Any:
    if type(v) is str and len(v) <= 64 and _PARTITION(v) is not None:
        return v
    return _BAD


def _text(max_length: int, min_length: int = 0) -> Checker:
    def check(v: Any) -> Any:
        return v if type(v) is str and min_length <= len(v) <= max_length else _BAD

    return check


def _resource_map(v: Any) -> Any:
    if type(v) is not dict:
        return _BAD
    for name, qty in v.items():
        if type(name) is not str or not 1 <= len(name) <= 253 or type(qty) is not int or not 0 <= qty <= MAX_QUANTITY:
            return _BAD
    return dict(v)


def _tags(v: Any) -> Any:
    if type(v) is not dict:
        return _BAD
    for name, text in v.items():
        if type(name) is not str or len(name) > 253 or type(text) is not str or len(text) > 4096:
            return _BAD
    return dict(v)


def _labels(v: Any) -> Any:
    if type(v) is not dict or len(v) > MAX_LABELS:
        return _BAD
    for key, value in v.items():
        if type(key) is not str or not 1 <= len(key) <= MAX_LABEL_KEY or type(value) is not str \
                or len(value) > MAX_LABEL_VALUE:
            return _BAD
    return dict(v)


def _no_taints(v: Any) -> Any:
    """Only an empty list: taints (objects, rare: node events) are left to pydantic."""
    return [] if type(v) is list and not v else _BAD


def _no_constraints(v: Any) -> Any:
    """Only an empty object: an ask's constraints (nested objects) are left to pydantic."""
    return Constraints() if type(v) is dict and not v else _BAD


def _groups(v: Any) -> Any:
    if type(v) is not list:
        return _BAD
    for g in v:
        if type(g) is not str or len(g) > 253:
            return _BAD
    return list(v)


def _task_group(v: Any) -> Any:
    if type(v) is str and (not v or (len(v) <= 253 and _IDENTIFIER(v) is not None)):
        return v
    return _BAD


def _gang_style(v: Any) -> Any:
    return v if v == "Soft" or v == "Hard" else _BAD


def _placeholder_timeout(v: Any) -> Any:
    return v if type(v) is int and 0 <= v <= MAX_PLACEHOLDER_TIMEOUT_MS else _BAD


def _int64(v: Any) -> Any:
    return v if type(v) is int and _INT64_MIN <= v <= _INT64_MAX else _BAD


def _bool(v: Any) -> Any:
    return v if type(v) is bool else _BAD


def _optional(check: Checker) -> Checker:
    def optional(v: Any) -> Any:
        return None if v is None else check(v)

    return optional


# ---------------------------------------------------------------- per-type field tables

FieldSpec = tuple[str, Checker, Any]  # name, checker, default factory or _REQUIRED

_FIELDS: dict[type[Frozen], tuple[FieldSpec, ...]] = {
    AppAdded: (
        ("app_id", _identifier, _REQUIRED),
        ("queue", _text(1024), lambda: ""),
        ("user", _text(253), _REQUIRED),
        ("groups", _groups, list),
        ("tags", _tags, dict),
        ("partition", _partition, lambda: "default"),
        ("placeholder_ask", _resource_map, dict),
        ("gang_scheduling_style", _gang_style, lambda: "Soft"),
        ("placeholder_timeout_ms", _placeholder_timeout, lambda: 0),
    ),
    AppRemoved: (("app_id", _identifier, _REQUIRED), ("partition", _partition, lambda: "default")),
    AskAdded: (
        ("app_id", _identifier, _REQUIRED),
        ("ask_id", _identifier, _REQUIRED),
        ("resources", _resource_map, _REQUIRED),
        ("priority", _optional(_int64), lambda: None),
        ("priority_class", _optional(_text(253)), lambda: None),
        ("required_node", _optional(_identifier), lambda: None),
        ("tags", _tags, dict),
        ("partition", _partition, lambda: "default"),
        ("preempt_other", _optional(_bool), lambda: None),
        ("allow_preemption", _bool, lambda: True),
        ("placeholder", _bool, lambda: False),
        ("task_group", _task_group, lambda: ""),
        ("constraints", _optional(_no_constraints), lambda: None),
    ),
    AskRemoved: (
        ("app_id", _identifier, _REQUIRED),
        ("ask_id", _identifier, _REQUIRED),
        ("partition", _partition, lambda: "default"),
    ),
    AllocationReleased: (
        ("app_id", _identifier, _REQUIRED),
        ("ask_id", _identifier, _REQUIRED),
        ("partition", _partition, lambda: "default"),
    ),
    NodeAdded: (
        ("node_id", _identifier, _REQUIRED),
        ("capacity", _resource_map, _REQUIRED),
        ("occupied", _resource_map, dict),
        ("schedulable", _bool, lambda: True),
        ("attributes", _tags, dict),
        ("partition", _partition, lambda: "default"),
        ("labels", _optional(_labels), lambda: None),
        ("taints", _optional(_no_taints), lambda: None),
    ),
    NodeUpdated: (
        ("node_id", _identifier, _REQUIRED),
        ("capacity", _optional(_resource_map), lambda: None),
        ("occupied", _optional(_resource_map), lambda: None),
        ("schedulable", _optional(_bool), lambda: None),
        ("partition", _partition, lambda: "default"),
        ("labels", _optional(_labels), lambda: None),
        ("taints", _optional(_no_taints), lambda: None),
    ),
    NodeRemoved: (("node_id", _identifier, _REQUIRED), ("partition", _partition, lambda: "default")),
}

_FAST: Final[dict[str, tuple[type[Frozen], tuple[FieldSpec, ...], frozenset[str]]]] = {
    name: (model, _FIELDS[model], frozenset(f[0] for f in _FIELDS[model]))
    for name, model in INPUT_DATA.items()
    if model in _FIELDS
}

_ENVELOPE_KEYS: Final = frozenset(InputEnvelope.model_fields)
_ASK_ADDED_KEYS: Final = _FAST["ask.added"][2]


def _ask_added(data: dict[str, Any]) -> Any:
    """``ask.added``, most records of a busy log: the table's checks, unrolled (2x faster)."""
    if not _ASK_ADDED_KEYS.issuperset(data):
        return None
    app_id = _identifier(data.get("app_id"))
    ask_id = _identifier(data.get("ask_id"))
    resources = _resource_map(data.get("resources"))
    if app_id is _BAD or ask_id is _BAD or resources is _BAD:
        return None
    priority = data.get("priority")
    if priority is not None and (type(priority) is not int or not _INT64_MIN <= priority <= _INT64_MAX):
        return None
    priority_class = data.get("priority_class")
    if priority_class is not None and (type(priority_class) is not str or len(priority_class) > 253):
        return None
    required_node = data.get("required_node")
    if required_node is not None and _identifier(required_node) is _BAD:
        return None
    tags = _tags(data["tags"]) if "tags" in data else {}
    partition = data.get("partition", "default")
    if tags is _BAD or (partition != "default" and _partition(partition) is _BAD):
        return None
    preempt_other = data.get("preempt_other")
    allow_preemption = data.get("allow_preemption", True)
    if (preempt_other is not None and type(preempt_other) is not bool) or type(allow_preemption) is not bool:
        return None
    placeholder = data.get("placeholder", False)
    task_group = data.get("task_group", "")
    if type(placeholder) is not bool or (task_group != "" and _task_group(task_group) is _BAD):
        return None
    constraints = data.get("constraints")
    if constraints is not None:
        constraints = _no_constraints(constraints)
        if constraints is _BAD:
            return None
    values = {
        "app_id": app_id,
        "ask_id": ask_id,
        "resources": resources,
        "priority": priority,
        "priority_class": priority_class,
        "required_node": required_node,
        "tags": tags,
        "partition": partition,
        "preempt_other": preempt_other,
        "allow_preemption": allow_preemption,
        "placeholder": placeholder,
        "task_group": task_group,
        "constraints": constraints,
    }
    return construct(AskAdded, values, set(data))


def fast_data(model: type[Frozen], fields: tuple[FieldSpec, ...], allowed: frozenset[str], data: Any) -> Any:
    """The data model for ``data``, or None when pydantic must decide."""
    if type(data) is not dict or not allowed.issuperset(data):
        return None
    values: dict[str, Any] = {}
    for name, check, default in fields:
        raw = data.get(name, _BAD)
        if raw is _BAD:
            if default is _REQUIRED:
                return None
            values[name] = default()
        else:
            value = check(raw)
            if value is _BAD:
                return None
            values[name] = value
    return construct(model, values, set(data))


def fast_input(obj: Any) -> tuple[str, str, str, str | None, Frozen] | None:
    """``(id, source, type, time text or None, data model)`` of a valid record, or None.

    None means only "not decided here": the record may still be valid.
    """
    if type(obj) is not dict or not _ENVELOPE_KEYS.issuperset(obj):
        return None
    input_type = obj.get("type")
    if type(input_type) is not str:
        return None
    entry = _FAST.get(input_type)
    if entry is None:
        return None
    if "specversion" in obj and obj["specversion"] != "1.0":
        return None
    input_id = obj.get("id")
    source = obj.get("source")
    time = obj.get("time")
    if (
        type(input_id) is not str
        or not 1 <= len(input_id) <= 253
        or type(source) is not str
        or not 1 <= len(source) <= 253
        or (time is not None and type(time) is not str)
    ):
        return None
    raw_data = obj.get("data")
    if input_type == "ask.added":
        data = _ask_added(raw_data) if type(raw_data) is dict else None
    else:
        data = fast_data(*entry, raw_data)
    if data is None:
        return None
    return input_id, source, input_type, time, data


_EVENT_FIELDS: Final = frozenset(InputEvent.model_fields)


def input_event(event_id: str, source: str, event_type: str, time_us: int, data: Frozen) -> InputEvent:
    """The event from validated parts (as ``model_construct``, at a quarter of its cost)."""
    values = {"id": event_id, "source": source, "type": event_type, "time_us": time_us, "data": data}
    return construct(InputEvent, values, set(_EVENT_FIELDS))


def fast_event(obj: Any, append_time_us: int) -> InputEvent | None:
    """The ``InputEvent`` of a common, valid record (a value from ``orjson.loads``), as
    ``codec.decode_loaded`` gives it; None when that must decide (unusual or invalid: its
    rejection is made there). Checks, time and model in one compiled call: replay decodes
    every input of the log.
    """
    checked = fast_input(obj)
    if checked is None:
        return None
    event_id, source, event_type, time, data = checked
    try:
        time_us = event_time_us(time, append_time_us)
    except TimeFormatError:
        return None  # no usable time: the rejection says why
    return input_event(event_id, source, event_type, time_us, data)
