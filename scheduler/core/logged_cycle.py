"""Run one logged cycle: decode a batch of log records, merge channels, apply, allocate.

The live service, crash recovery and ``replay`` all call ``run_logged_cycle``, so a cycle
re-run from the log is the same code over the same inputs as the original.

Merge order (docs/contract.md §4): records of several channels are interleaved by event time,
then channel order, then offset, while each channel keeps its own order — a k-way merge
that always takes the channel head with the smallest ``(time, channel index)``.

Who may change the rules: in a cycle that names its admin channels (``cycle.started``'s
``admin_channels``), an event of ``ADMIN_TYPES`` read from any other channel is rejected
``not-authorized`` and changes nothing (``admit``).
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Mapping, Sequence
from typing import NamedTuple

import orjson

from events.codec import decode_input, decode_input_object, reject
from events.fast_decode import fast_event
from events.log.port import LogRecord
from events.models import (
    ADMIN_TYPES,
    MAX_RECORD_BYTES,
    OUTPUT_TYPE,
    CycleStarted,
    InputEvent,
    InputRejected,
    OutputEvent,
)
from events.times import format_time
from scheduler.core.engine import Engine
from scheduler.core.rules_version import RULES_VERSION


class Decoded(NamedTuple):
    """One input record after decoding: its event (or rejection) and its merge key.

    A named tuple: one is made per input record, at a third of a frozen dataclass's cost.
    """

    record: LogRecord
    time_us: int
    result: InputEvent | InputRejected


def decode_records(records: Sequence[LogRecord]) -> list[Decoded]:
    """Decode each record; unreadable ones keep their append time for ordering.

    ``decode_input`` of each record, its steps inlined (this module is compiled): the size
    check, one JSON parse, the common record in one compiled call (``fast_event``), and
    ``decode_input_object`` on the parsed value for the rest; a record too large or not JSON
    goes to ``decode_input`` whole, for its rejection.
    """
    out: list[Decoded] = []
    loads = orjson.loads
    new_decoded = tuple.__new__  # Decoded(...) runs a Python-level __new__; the tuple is the same
    for rec in records:
        raw = rec.value
        result: InputEvent | InputRejected | None = None
        if len(raw) <= MAX_RECORD_BYTES:
            try:
                obj = loads(raw)
            except orjson.JSONDecodeError:
                pass
            else:
                result = fast_event(obj, rec.append_time_us)
                if result is None:
                    result = decode_input_object(obj, append_time_us=rec.append_time_us, position=rec.position)
        if result is None:
            result = decode_input(raw, append_time_us=rec.append_time_us, position=rec.position)
        time_us = result.time_us if isinstance(result, InputEvent) else rec.append_time_us
        out.append(new_decoded(Decoded, (rec, time_us, result)))
    return out


def merge(decoded: Sequence[Decoded], channel_order: Sequence[str]) -> list[Decoded]:
    """Interleave channels by (event time, channel order), keeping each channel's order."""
    by_channel: dict[str, list[Decoded]] = {}
    for d in decoded:
        by_channel.setdefault(d.record.channel, []).append(d)
    if len(by_channel) <= 1:
        return sorted(decoded, key=lambda d: d.record.offset)
    rank = {name: i for i, name in enumerate(channel_order)}
    queues = {
        name: sorted(items, key=lambda d: d.record.offset) for name, items in by_channel.items()
    }
    heap: list[tuple[int, int, int, str]] = []
    cursor = dict.fromkeys(queues, 0)
    for name, items in queues.items():
        heap.append((items[0].time_us, rank.get(name, len(rank)), items[0].record.offset, name))
    heapq.heapify(heap)
    out = []
    while heap:
        _, r, _, name = heapq.heappop(heap)
        items = queues[name]
        out.append(items[cursor[name]])
        cursor[name] += 1
        if cursor[name] < len(items):
            nxt = items[cursor[name]]
            heapq.heappush(heap, (nxt.time_us, r, nxt.record.offset, name))
    return out


def admit(d: Decoded, admin_channels: Collection[str] | None) -> InputEvent | InputRejected:
    """The decoded record's event, or its rejection: ``not-authorized`` for a rules change
    (``ADMIN_TYPES``) from a channel outside ``admin_channels`` (``None``: any channel may)."""
    result = d.result
    if admin_channels is None or isinstance(result, InputRejected) or result.type not in ADMIN_TYPES:
        return result
    if d.record.channel in admin_channels:
        return result
    return reject(result.id, result.type, "not-authorized",
                  f"{result.type} is accepted only from the admin channel "
                  f"({', '.join(sorted(admin_channels)) or 'none'}), not from {d.record.channel}")


def started_event(engine: Engine, cycle: int, now_us: int, inputs_from: Mapping[str, int],
                  inputs_through: Mapping[str, int],
                  admin_channels: Collection[str] | None = None) -> OutputEvent:
    """The ``cycle.started`` record that opens a cycle's batch of outputs."""
    data = CycleStarted(
        cycle=cycle, time=format_time(now_us), inputs_from=dict(sorted(inputs_from.items())),
        inputs_through=dict(sorted(inputs_through.items())), rules_version=RULES_VERSION,
        admin_channels=None if admin_channels is None else sorted(admin_channels),
    )
    return OutputEvent.model_construct(
        specversion="1.0", id=f"{cycle}-start", source=engine.source, type=OUTPUT_TYPE[CycleStarted],
        time=data.time, data=data,
    )


def run_logged_cycle(
    engine: Engine,
    records: Sequence[LogRecord],
    channel_order: Sequence[str],
    now_us: int,
    inputs_from: Mapping[str, int],
    inputs_through: Mapping[str, int],
    unreadable: list[tuple[LogRecord, str]] | None = None,
    admin_channels: Collection[str] | None = None,
) -> list[OutputEvent]:
    """Apply the batch and run the next cycle; returns ``cycle.started`` then its outputs.

    ``unreadable``, when given, receives ``(record, "reason: message")`` for every record
    that could not be read as an event at all — its rejection has no ``input_type``: not
    JSON, not an object, too large, no string ``type`` — so the live service can
    dead-letter the raw bytes.
    Replay and recovery leave it out; the outputs are the same either way.
    ``admin_channels`` (recorded in ``cycle.started``; ``None`` in logs before it): see ``admit``.
    """
    start = started_event(engine, engine.cycle_number + 1, now_us, inputs_from, inputs_through, admin_channels)
    apply_batch(engine, records, channel_order, unreadable, admin_channels)
    return [start, *engine.cycle(now_us, inputs_through)]


def apply_batch(
    engine: Engine,
    records: Sequence[LogRecord],
    channel_order: Sequence[str],
    unreadable: list[tuple[LogRecord, str]] | None = None,
    admin_channels: Collection[str] | None = None,
) -> None:
    """Decode, merge and apply a cycle's input records (their outputs wait in the engine);
    rules changes from outside ``admin_channels`` are rejected (``admit``)."""
    for d in merge(decode_records(records), channel_order):
        result = admit(d, admin_channels)
        if isinstance(result, InputRejected):
            engine.reject_raw(result)
            if unreadable is not None and result.input_type is None:
                unreadable.append((d.record, f"{result.reason}: {result.message}"))
        else:
            engine.apply(result)


def advance(positions: Mapping[str, int], records: Sequence[LogRecord]) -> dict[str, int]:
    """Positions after consuming ``records`` (each channel: one past its last offset)."""
    out = dict(positions)
    for rec in records:
        if rec.offset + 1 > out.get(rec.channel, 0):
            out[rec.channel] = rec.offset + 1
    return out
