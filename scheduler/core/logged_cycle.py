"""Run one logged cycle: decode a batch of log records, merge channels, apply, allocate.

The live service, crash recovery and ``replay`` all call ``run_logged_cycle``, so a cycle
re-run from the log is the same code over the same inputs as the original.

Merge order (CONTRACT §4): records of several channels are interleaved by event time,
then channel order, then offset, while each channel keeps its own order — a k-way merge
that always takes the channel head with the smallest ``(time, channel index)``.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from events.codec import decode_input, format_time
from events.log.port import LogRecord
from events.models import OUTPUT_TYPE, CycleStarted, InputEvent, InputRejected, OutputEvent
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
    """Decode each record; unreadable ones keep their append time for ordering."""
    out = []
    for rec in records:
        result = decode_input(rec.value, append_time_us=rec.append_time_us, position=rec.position)
        time_us = result.time_us if isinstance(result, InputEvent) else rec.append_time_us
        out.append(Decoded(rec, time_us, result))
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


def started_event(engine: Engine, cycle: int, now_us: int, inputs_from: Mapping[str, int],
                  inputs_through: Mapping[str, int]) -> OutputEvent:
    """The ``cycle.started`` record that opens a cycle's batch of outputs."""
    data = CycleStarted(
        cycle=cycle, time=format_time(now_us), inputs_from=dict(sorted(inputs_from.items())),
        inputs_through=dict(sorted(inputs_through.items())), rules_version=RULES_VERSION,
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
) -> list[OutputEvent]:
    """Apply the batch and run the next cycle; returns ``cycle.started`` then its outputs.

    ``unreadable``, when given, receives ``(record, "reason: message")`` for every record
    that could not be read as an event at all — its rejection has no ``input_type``: not
    JSON, not an object, too large, no string ``type`` — so the live service can
    dead-letter the raw bytes.
    Replay and recovery leave it out; the outputs are the same either way.
    """
    start = started_event(engine, engine.cycle_number + 1, now_us, inputs_from, inputs_through)
    apply_batch(engine, records, channel_order, unreadable)
    return [start, *engine.cycle(now_us, inputs_through)]


def apply_batch(
    engine: Engine,
    records: Sequence[LogRecord],
    channel_order: Sequence[str],
    unreadable: list[tuple[LogRecord, str]] | None = None,
) -> None:
    """Decode, merge and apply a cycle's input records (their outputs wait in the engine)."""
    for d in merge(decode_records(records), channel_order):
        if isinstance(d.result, InputRejected):
            engine.reject_raw(d.result)
            if unreadable is not None and d.result.input_type is None:
                unreadable.append((d.record, f"{d.result.reason}: {d.result.message}"))
        else:
            engine.apply(d.result)


def advance(positions: Mapping[str, int], records: Sequence[LogRecord]) -> dict[str, int]:
    """Positions after consuming ``records`` (each channel: one past its last offset)."""
    out = dict(positions)
    for rec in records:
        if rec.offset + 1 > out.get(rec.channel, 0):
            out[rec.channel] = rec.offset + 1
    return out
