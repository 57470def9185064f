"""The orjson codec: the only place where bytes become event models and models become bytes.

``decode_input`` never raises: a record that cannot be read becomes an ``InputRejected``
with a stable reason code (``invalid``, ``too-large``, ``unknown-type``) and a message a
person can act on. Encoding is canonical (sorted keys), so equal events are equal bytes.
"""

from __future__ import annotations

from typing import Any, get_args

import orjson
from pydantic import BaseModel, ValidationError

from events.fast_decode import fast_event, input_event
from events.models import (
    GANG_DECIDED_DEFAULTS,
    INPUT_DATA,
    MAX_RECORD_BYTES,
    OUTPUT_DATA,
    AllocationDecided,
    CycleCompleted,
    CycleStarted,
    Frozen,
    GangDecided,
    InputEnvelope,
    InputEvent,
    InputRejected,
    OutputEvent,
)
from events.times import TimeFormatError, event_time_us

_DUMP_OPTS = orjson.OPT_SORT_KEYS


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    parts = []
    for err in errors[:3]:
        loc = ".".join(str(p) for p in err["loc"]) or "record"
        parts.append(f"{loc}: {err['msg']}")
    more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
    return "; ".join(parts) + more


MAX_ECHOED_ID = 253  # the longest valid id: longer ones are cut when echoed
MAX_MESSAGE = 16 * 1024


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit} more characters)"


def reject(input_id: str | None, input_type: str | None, reason: str, message: str) -> InputRejected:
    """Build the data of an ``input.rejected`` output.

    Echoed input is bounded (``input_id`` and ``input_type`` to 253 characters, ``message``
    to 16 KiB, each cut with a note): a 1 MiB record must not become a 2 MiB output, which
    a Kafka producer refuses (max request 1 MiB) on every retry — a stalled partition.
    """
    if input_id is not None and len(input_id) > MAX_ECHOED_ID:
        input_id = _cut(input_id, MAX_ECHOED_ID)
    if input_type is not None and len(input_type) > MAX_ECHOED_ID:
        input_type = _cut(input_type, MAX_ECHOED_ID)
    return InputRejected(input_id=input_id, input_type=input_type, reason=reason, message=_cut(message, MAX_MESSAGE))


def decode_input(raw: bytes, *, append_time_us: int, position: str = "?") -> InputEvent | InputRejected:
    """Bytes of one input record → a validated ``InputEvent``, or the reason it was rejected.

    ``append_time_us`` stands in for a missing ``time``; ``position`` (e.g. ``inputs@42``)
    names the record in rejections when it has no readable id.
    """
    if len(raw) > MAX_RECORD_BYTES:
        return reject(position, None, "too-large", f"record of {len(raw)} bytes exceeds 1 MiB")
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return reject(position, None, "invalid", f"not valid JSON: {exc}")
    return decode_loaded(obj, append_time_us=append_time_us, position=position)


def decode_loaded(obj: Any, *, append_time_us: int, position: str = "?") -> InputEvent | InputRejected:
    """A value from ``orjson.loads`` → as ``decode_input_object``, the common records without pydantic.

    Only for ``orjson.loads`` values (exact ``str`` and ``int``), where ``fast_event`` gives the
    very models pydantic would; anything it is unsure of goes to ``decode_input_object``.
    """
    event = fast_event(obj, append_time_us)  # the common records, checked without pydantic (same result)
    if event is not None:
        return event
    return decode_input_object(obj, append_time_us=append_time_us, position=position)


def decode_input_object(obj: Any, *, append_time_us: int, position: str = "?") -> InputEvent | InputRejected:
    """A parsed JSON value → ``InputEvent`` or ``InputRejected`` (see ``decode_input``)."""
    if not isinstance(obj, dict):
        return reject(position, None, "invalid", f"record is a JSON {type(obj).__name__}, not an object")
    raw_id = obj.get("id")
    input_id = raw_id if isinstance(raw_id, str) and raw_id else position
    raw_type = obj.get("type")
    input_type = raw_type if isinstance(raw_type, str) else None
    try:
        env = InputEnvelope.model_validate(obj)
    except ValidationError as exc:
        return reject(input_id, input_type, "invalid", _first_error(exc))
    model = INPUT_DATA.get(env.type)
    if model is None:
        return reject(input_id, env.type, "unknown-type", f"unknown event type {env.type!r}")
    try:
        data = model.model_validate(env.data)
    except ValidationError as exc:
        return reject(input_id, env.type, "invalid", _first_error(exc))
    return _input_event(env.id, env.source, env.type, env.time, data, append_time_us=append_time_us)



def _input_event(
    event_id: str, source: str, event_type: str, time: str | None, data: Frozen, *, append_time_us: int
) -> InputEvent | InputRejected:
    """The event from validated parts, its time resolved (no usable time rejects it)."""
    try:
        time_us = event_time_us(time, append_time_us)
    except TimeFormatError as exc:
        return reject(event_id, event_type, "invalid", str(exc))
    return input_event(event_id, source, event_type, time_us, data)


def _is_flat(model: type[Frozen]) -> bool:
    """Whether a model's field values are its JSON form as they are: no alias, no nested model."""
    return all(
        field.alias is None and not any(isinstance(t, type) and issubclass(t, BaseModel)
                                        for t in (field.annotation, *get_args(field.annotation)))
        for field in model.model_fields.values()
    )


# Output data whose ``__dict__`` is already what ``model_dump(by_alias=True)`` returns
# (orjson writes the same bytes for both); dumping costs more than the rest of encoding.
_FLAT_OUTPUTS = frozenset(model for model in OUTPUT_DATA.values() if _is_flat(model))


def output_to_dict(event: OutputEvent) -> dict[str, Any]:
    """An output event as the plain JSON object it is published as (a fresh copy)."""
    return _envelope(event, _omit_unset(event.data, event.data.model_dump(by_alias=True)))


def _omit_unset(data: object, plain: dict[str, Any]) -> dict[str, Any]:
    """``cycle.started`` without ``admin_channels``, ``cycle.completed`` without ``profiles``,
    when unset: as logs before the fields have them."""
    kind = type(data)
    if kind is CycleStarted and plain.get("admin_channels", 0) is None:
        return {k: v for k, v in plain.items() if k != "admin_channels"}
    if kind is CycleCompleted and plain.get("profiles", 0) is None:
        return {k: v for k, v in plain.items() if k != "profiles"}
    return plain


def _envelope(event: OutputEvent, data: Any) -> dict[str, Any]:
    return {"specversion": "1.0", "id": event.id, "source": event.source, "type": event.type, "time": event.time,
            "data": data}


def encode_output(event: OutputEvent) -> bytes:
    """Canonical bytes of an output event (sorted keys, no whitespace).

    Flat data is written from the model's own values (read only, never handed out):
    the bytes equal those of ``output_to_dict``, at a fraction of the cost.
    """
    data = event.data
    plain = data.__dict__ if type(data) in _FLAT_OUTPUTS else data.model_dump(by_alias=True)
    return orjson.dumps(_envelope(event, _omit_unset(data, plain)), option=_DUMP_OPTS)


def decode_output(raw: bytes) -> OutputEvent:
    """Bytes of an output record → ``OutputEvent``. Raises ``ValueError`` when unreadable."""
    obj = orjson.loads(raw)
    if not isinstance(obj, dict):
        raise ValueError("output record is not a JSON object")
    model = OUTPUT_DATA.get(obj.get("type", ""))
    if model is None:
        raise ValueError(f"unknown output type {obj.get('type')!r}")
    raw_data = obj.get("data")
    gang = isinstance(raw_data, dict) and not GANG_DECIDED_DEFAULTS.keys().isdisjoint(raw_data)
    if model is AllocationDecided and gang:
        model = GangDecided  # a gang's decision (additive fields)
    data = model.model_validate(raw_data)
    return OutputEvent(
        id=obj["id"], source=obj["source"], type=obj["type"], time=obj["time"], data=data  # type: ignore[arg-type]
    )


def dumps(obj: Any) -> bytes:
    """Canonical JSON bytes of any plain value (sorted keys)."""
    return orjson.dumps(obj, option=_DUMP_OPTS)
