"""Crash recovery: rebuild the engine from the log's cycle records and finish a torn cycle.

The output log holds, per cycle, ``cycle.started`` (positions and time), the cycle's
outputs, then ``cycle.completed``. Recovery re-runs every complete cycle from its recorded
inputs and time (the same code as the live loop), checks each re-derived state digest
against the recorded one, and re-runs a cycle that has a start but no completion, writing
only the outputs that are missing. Output ids are deterministic, so what was already
written is byte-identical to what the re-run produces.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

import orjson

from events.codec import encode_output, parse_time
from events.log.port import EventLog, LogError, LogRecord
from scheduler.core.engine import Engine
from scheduler.cycle_runner import run_logged_cycle
from scheduler.snapshots import Restored, SnapshotStore

LOG = logging.getLogger("evsched.recovery")
READ_BATCH = 10_000


@dataclass
class CycleRecord:
    """One cycle as found in the output log."""

    cycle: int
    time_us: int
    inputs_from: dict[str, int]
    inputs_through: dict[str, int]
    source: str
    written: list[bytes] = field(default_factory=list)  # records after cycle.started
    digest: str | None = None  # from cycle.completed; None when the cycle is torn


@dataclass
class Recovered:
    """What recovery found and rebuilt."""

    engine: Engine
    positions: dict[str, int]
    cycles: int
    repaired_outputs: int = 0
    from_snapshot: int | None = None
    digest_mismatches: list[int] = field(default_factory=list)


def scan_cycles(records: list[LogRecord]) -> list[CycleRecord]:
    """Group output records into cycles (records outside a started cycle are ignored)."""
    cycles: list[CycleRecord] = []
    current: CycleRecord | None = None
    for rec in records:
        obj = orjson.loads(rec.value)
        kind = obj.get("type")
        if kind == "cycle.started":
            data = obj["data"]
            current = CycleRecord(
                data["cycle"], parse_time(data["time"]), data["inputs_from"], data["inputs_through"], obj["source"]
            )
            cycles.append(current)
        elif current is not None:
            current.written.append(rec.value)
            if kind == "cycle.completed":
                current.digest = obj["data"]["state_digest"]
                current = None
    return cycles


async def read_range(log: EventLog, start: Mapping[str, int], end: Mapping[str, int]) -> list[LogRecord]:
    """Input records with ``start[ch] <= offset < end[ch]`` for every channel."""
    positions = dict(start)
    out: list[LogRecord] = []
    while any(positions.get(ch, 0) < stop for ch, stop in end.items()):
        batch = await log.read_inputs(positions, READ_BATCH)
        progressed = False
        for rec in batch:
            if rec.offset < end.get(rec.channel, 0) and rec.offset >= positions.get(rec.channel, 0):
                out.append(rec)
                positions[rec.channel] = rec.offset + 1
                progressed = True
        if not progressed:
            missing = {ch: (positions.get(ch, 0), stop) for ch, stop in end.items() if positions.get(ch, 0) < stop}
            raise LogError(f"input log is missing records the output log says were consumed: {missing}")
    return out


async def _from_snapshot(log: EventLog, store: SnapshotStore) -> Restored | None:
    end = await log.output_end()
    for path in store.candidates():
        body = store.read(path)
        if body is None:
            continue
        offset = body["output_offset"]
        recorded = None
        if 0 < offset <= end:
            last = await log.read_outputs(offset - 1, 1)
            obj = orjson.loads(last[0].value) if last else {}
            if obj.get("type") == "cycle.completed" and obj["data"]["cycle"] == body["cycle"]:
                recorded = obj["data"]["state_digest"]
        restored = store.restore(path, body, recorded)
        if restored is not None:
            return restored
    return None


async def recover(
    log: EventLog, *, source: str, engine: Engine | None = None, snapshots: SnapshotStore | None = None
) -> Recovered:
    """Rebuild the engine (from the newest trustworthy snapshot, then the log) and complete a
    torn last cycle."""
    channels = await log.input_channels()
    positions: dict[str, int] = {}
    output_start = 0
    restored = await _from_snapshot(log, snapshots) if snapshots is not None else None
    if restored is not None:
        engine = restored.engine
        positions = dict(restored.positions)
        output_start = restored.output_offset
        LOG.info("restored cycle %d from %s", restored.cycle, restored.path)
    engine = engine or Engine(source=source)
    cycles = scan_cycles(await log.read_outputs(output_start))
    result = Recovered(engine, positions, 0, from_snapshot=restored.cycle if restored else None)
    for rec in cycles:
        if rec.cycle <= engine.cycle_number:
            continue  # already in the engine (restored from a snapshot)
        records = await read_range(log, rec.inputs_from, rec.inputs_through)
        outputs = run_logged_cycle(engine, records, channels, rec.time_us, rec.inputs_from, rec.inputs_through)
        encoded = [encode_output(o) for o in outputs[1:]]
        if rec.digest is None:
            if encoded[: len(rec.written)] != rec.written:
                LOG.error("cycle %d: the outputs already written differ from the re-run", rec.cycle)
            missing = encoded[len(rec.written) :]
            await log.append_outputs(missing)
            result.repaired_outputs = len(missing)
            LOG.warning("cycle %d was cut short: re-ran it and wrote the %d missing outputs", rec.cycle, len(missing))
        elif engine.digest() != rec.digest:
            result.digest_mismatches.append(rec.cycle)
            LOG.error("cycle %d: re-derived state digest differs from the recorded one", rec.cycle)
        positions = dict(rec.inputs_through)
        result.cycles += 1
    result.positions = positions or dict.fromkeys(channels, 0)
    return result
