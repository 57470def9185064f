"""Crash recovery: rebuild the engine from the log's recorded cycles and finish a torn cycle.

The output log holds, per cycle, ``cycle.started`` (positions and time), the cycle's
outputs, then ``cycle.completed``. What a complete cycle recorded is fact: recovery applies
its inputs and folds its recorded outputs (``scheduler.core.fact_fold``) — it never re-runs
the allocation search, so code with other scheduling rules resumes from exactly the
decisions the resource managers acted on. The folded state digest is checked against the
recorded one. A cycle that has a start but no completion is re-run with the current code,
writing only the outputs that are missing; output ids are deterministic, so what was
already written is byte-identical to what the re-run produces (under the same rules).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from events.codec import decode_input, encode_output
from events.log.port import EventLog, LogError, LogMismatch, LogRecord
from events.log.source import read_range_async
from events.models import CycleStarted, InputEvent
from events.times import parse_time
from scheduler.core.engine import Engine
from scheduler.core.fact_fold import FoldError, fold_recorded_cycle
from scheduler.core.logged_cycle import run_logged_cycle
from scheduler.core.recorded_cycles import (
    LogStructureError,
    RecordedCycle,
    parse_record,
    recorded_cycles,
)
from scheduler.core.rules_version import KNOWN, RULES_VERSION, rules_version_problem
from scheduler.storage.snapshot_files import VOUCH_LOOK_BACK, Restored, SnapshotStore, log_identity, vouched_digest

LOG = logging.getLogger("evsched.recovery")
LOOK_BACK = 64  # input records before a position searched for one with an id (inputs_continue)


@dataclass
class Recovered:
    """What recovery found and rebuilt."""

    engine: Engine
    positions: dict[str, int]
    cycles: int
    repaired_outputs: int = 0
    from_snapshot: int | None = None
    digest_mismatches: list[int] = field(default_factory=list)
    forged_versions: list[int] = field(default_factory=list)  # cycles whose rules_version fails rules_version_problem


async def _from_snapshot(log: EventLog, store: SnapshotStore) -> Restored | None:
    end = await log.output_end()
    first = await log.read_outputs(0, 1) if end > 0 else []
    # A log whose first output is gone (a Kafka topic given a retention, against the docs)
    # cannot say who it is: its snapshots are judged by the checks after identity.
    known = not first or first[0].offset == 0
    store.log_identity = log_identity(first[0].value) if first and known else None
    for path in store.candidates():
        body = await asyncio.to_thread(store.read, path)  # CPU work (decode, checks): off the event loop
        if body is None:
            continue
        if known:
            _check_identity(store, path, body, end)
        elif isinstance(body.get("log_identity"), str):
            store.log_identity = body["log_identity"]  # carried on to the snapshots written next
        offset = body["output_offset"]
        if isinstance(offset, int) and offset > end:
            # A snapshot written by this code after more outputs than the log now holds: the
            # output log lost its tail (restored from an older backup, a re-created topic).
            # Re-running would decide those cycles again under the same decision ids, which
            # consumers drop as copies — so this is an error, not a snapshot to skip.
            raise LogError(
                f"the output log lost its tail: snapshot {path.name} (cycle {body.get('cycle')}) was written "
                f"after {offset} outputs, but the output log holds {end}; refusing to decide those cycles again "
                "— restore the output log, or move the snapshots aside deliberately to start from what is left"
            )
        recorded = None
        if 0 < offset <= end:
            before = await log.read_outputs(max(0, offset - VOUCH_LOOK_BACK), VOUCH_LOOK_BACK)
            recorded = vouched_digest(body, before)
        restored = await asyncio.to_thread(store.restore, path, body, recorded)
        if restored is not None:
            return restored
    return None


def _check_identity(store: SnapshotStore, path: Path, body: dict[str, Any], end: int) -> None:
    """Stop at once when a snapshot names another log than this one (``log_identity``).

    Not a snapshot to skip: the snapshot directory and the log were paired by mistake (a
    directory left from another cluster, the wrong ``--log``), and whichever is wrong, writing
    this log's snapshots beside the other's would mix them. A snapshot without an identity
    (written before it existed) is judged by the checks after this one, as before.
    """
    theirs = body.get("log_identity")
    if not isinstance(theirs, str) or theirs == store.log_identity:
        return
    mine = "is empty" if end == 0 else f"starts with a record of sha256 {str(store.log_identity)[:16]}…"
    raise LogMismatch(
        f"snapshot {path} (cycle {body.get('cycle')}) belongs to another log: it was written for a log whose "
        f"first output record has sha256 {theirs[:16]}…, and this output log {mine}. Point --snapshot-dir at "
        f"this log's snapshots, or move {store.directory} aside to recover from the log alone"
    )


def fold_cycle(engine: Engine, rec: RecordedCycle, records: list[LogRecord], channels: list[str], now_us: int) -> str:
    """Fold one complete recorded cycle into the engine; its state digest after."""
    outputs = []
    for out in rec.records[1:-1]:
        obj = parse_record(out)
        if obj is None or not isinstance(obj.get("data"), dict):
            raise LogError(f"cycle {rec.number}: unreadable output record at offset {out.offset}")
        outputs.append(obj)
    try:
        folded = fold_recorded_cycle(engine, records, channels, now_us, outputs, rec.started.rules_version,
                                     rec.started.admin_channels)
    except (FoldError, KeyError, TypeError) as exc:
        raise LogError(f"cycle {rec.number}: cannot fold its recorded outputs: {exc}") from None
    if folded.input_outputs != folded.recorded_input_outputs:
        LOG.warning(
            "cycle %d: applying its inputs made %d outputs, the record has %d (the input rules changed)",
            rec.number, folded.input_outputs, folded.recorded_input_outputs,
        )
    return folded.digest


def _rerun_cycle(
    engine: Engine, records: list[LogRecord], channels: list[str], now_us: int, started: CycleStarted
) -> list[bytes]:
    """Re-run a torn cycle with the current code; its encoded outputs after ``cycle.started``."""
    outputs = run_logged_cycle(engine, records, channels, now_us, started.inputs_from, started.inputs_through,
                               admin_channels=started.admin_channels)
    return [encode_output(o) for o in outputs[1:]]


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
    try:
        outputs_read = await log.read_outputs(output_start)
        cycles = await asyncio.to_thread(lambda: list(recorded_cycles(outputs_read)))
    except LogStructureError as exc:
        raise LogError(f"the output log is not a sequence of cycles: {exc.message}") from None
    result = Recovered(engine, positions, 0, from_snapshot=restored.cycle if restored else None)
    previous_version: int | None = None
    for rec in cycles:
        started = rec.started
        problem = rules_version_problem(started.rules_version, previous_version)
        if problem is not None:  # folded as recorded (the log is the truth), but said loudly
            result.forged_versions.append(rec.number)
            LOG.error("cycle %d: %s — `evsched replay verify` and `evsched audit` report it", rec.number, problem)
        if started.rules_version in KNOWN:  # an unknown one says nothing of the versions after it
            previous_version = max(previous_version or 0, started.rules_version)
        if rec.number <= engine.cycle_number:
            continue  # already in the engine (restored from a snapshot)
        records = await read_range_async(log, started.inputs_from, started.inputs_through)
        now_us = parse_time(started.time)
        completed = rec.completed_data
        if completed is None:
            if started.rules_version != RULES_VERSION:
                LOG.warning(
                    "cycle %d was started under rules version %d and is finished under version %d: its outputs"
                    " written so far stand, the rest follow the current rules (docs/upgrading.md)",
                    rec.number, started.rules_version, RULES_VERSION,
                )
            encoded = await asyncio.to_thread(_rerun_cycle, engine, records, channels, now_us, started)
            written = [r.value for r in rec.records[1:]]
            if encoded[: len(written)] != written:
                LOG.error("cycle %d: the outputs already written differ from the re-run", rec.number)
            missing = encoded[len(written) :]
            await log.append_outputs(missing)
            result.repaired_outputs = len(missing)
            LOG.warning("cycle %d was cut short: re-ran it and wrote the %d missing outputs", rec.number, len(missing))
        else:
            digest = await asyncio.to_thread(fold_cycle, engine, rec, records, channels, now_us)
            if digest != completed["state_digest"]:
                result.digest_mismatches.append(rec.number)
                LOG.error("cycle %d: the state folded from the record differs from the recorded digest", rec.number)
        positions = dict(started.inputs_through)
        result.cycles += 1
    result.positions = positions or dict.fromkeys(channels, 0)
    await inputs_continue(log, engine, result.positions)
    return result


async def inputs_continue(log: EventLog, engine: Engine, positions: Mapping[str, int]) -> None:
    """The input log still holds what the engine consumed: else stop with a clear error.

    A channel that now ends before the position consumed lost records (an ``inputs/``
    directory deleted beside a snapshot that remembers the position).

    A topic deleted and re-created while the service was away, that already holds more
    records than the old position, would be read on from that position: its first records
    silently skipped. So, per channel, the last event before the position that has an id
    (searched among ``LOOK_BACK`` records) must be one the engine applied (its seen ids).
    A re-created log refilled with the same events passes; a channel with no such record
    close before its position cannot be checked and is not.
    """
    ends = await log.input_end()
    for channel, position in positions.items():
        if position <= 0:
            continue
        if ends.get(channel, 0) < position:
            raise LogMismatch(
                f"input {channel} holds {ends.get(channel, 0)} records, but this state consumed {position} of it: "
                "the input log lost records (its directory or topic deleted, or restored from an older backup); "
                "restore the input log, or reset the output log and snapshots to start over from what is there"
            )
        tail = await _records_before(log, channel, position, ends)
        for rec in reversed(tail):
            event = decode_input(rec.value, append_time_us=rec.append_time_us, position=rec.position)
            if not isinstance(event, InputEvent):
                continue
            if (event.source, event.id) not in engine.seen:
                raise LogMismatch(
                    f"input {channel} is not the log this state consumed: its record at offset {rec.offset}, "
                    f"before the resume position {position}, is event {event.id!r} from {event.source!r}, "
                    "which was never applied — the input topic was deleted and re-created (or replaced); "
                    "resuming would skip its first records. Reset the output log and snapshots to start "
                    "over from the new input, or restore the old input"
                )
            break


async def _records_before(log: EventLog, channel: str, position: int, ends: Mapping[str, int]) -> list[LogRecord]:
    """Up to ``LOOK_BACK`` input records of ``channel`` just before ``position`` (fewer when
    the log does not answer with them; other channels' records are skipped)."""
    start = max(0, position - LOOK_BACK)
    positions = {ch: end for ch, end in ends.items()}
    positions[channel] = start
    out: list[LogRecord] = []
    for _ in range(8):  # other channels may answer first (new records arriving meanwhile)
        batch = await log.read_inputs(positions, LOOK_BACK)
        mine = [r for r in batch if r.channel == channel and positions[channel] <= r.offset < position]
        out.extend(mine)
        for rec in batch:
            positions[rec.channel] = max(positions.get(rec.channel, 0), rec.offset + 1)
        if not batch or positions[channel] >= position:
            break
    return out
