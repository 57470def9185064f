"""Recovery refuses an input log that is not the one its state consumed (a topic deleted and
re-created while the service was away, already holding more records than the old position):
the last event before the resume position must be one the engine applied.

Real recovery over in-memory logs, from the snapshot the service wrote (as `run` always
has: a snapshot every N cycles and at every clean stop; without one, recovery folds the new
records and reports the cycles whose digest differs). The Kafka case is
tests/faults/test_topic_recreated.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import orjson
import pytest

from events.log.memory import MemoryLog
from events.log.port import LogError
from scheduler.service.loop import Service
from scheduler.service.recovery import recover
from scheduler.storage.snapshot_files import SnapshotStore
from tests.contracts.log_contract import run


def node(i: int) -> tuple[bytes, bytes]:
    event = {"id": f"n{i}", "source": "t", "type": "node.added", "data": {"node_id": f"n{i}", "capacity": {"vcore": 4}}}
    return b"n", orjson.dumps(event)


async def consumed(inputs: Sequence[tuple[bytes | None, bytes]], snapshots: SnapshotStore) -> MemoryLog:
    """A log whose service consumed ``inputs`` in two cycles, a snapshot after each."""
    log = MemoryLog(now_us=lambda: 1_000_000)
    service = Service(log, snapshots=snapshots, snapshot_every=1)
    await service.start()
    half = len(inputs) // 2
    for part in (inputs[:half], inputs[half:]):
        await log.append_inputs(part)
        await service.run_cycle_once()
    return log


async def replaced(log: MemoryLog, inputs: Sequence[tuple[bytes | None, bytes]]) -> MemoryLog:
    """The same output log over other inputs (what a re-created input topic looks like)."""
    other = MemoryLog(now_us=lambda: 1_000_000)
    await other.append_inputs(inputs)
    await other.append_outputs([r.value for r in await log.read_outputs()])
    return other


def test_a_replaced_input_log_with_more_records_than_the_position_stops_recovery(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)

    async def body() -> None:
        log = await consumed([node(i) for i in range(10)], store)
        recreated = await replaced(log, [node(100 + i) for i in range(15)])
        with pytest.raises(LogError, match=r"input inputs is not the log this state consumed: its record at "
                                           r"offset 9, before the resume position 10, is event 'n109'"):
            await recover(recreated, source="evsched", snapshots=store)

    run(body())


def test_the_same_input_log_refilled_or_grown_resumes(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)

    async def body() -> None:
        log = await consumed([node(i) for i in range(10)], store)
        same = await replaced(log, [node(i) for i in range(10)] + [node(100 + i) for i in range(5)])
        rec = await recover(same, source="evsched", snapshots=store)
        assert rec.positions == {"inputs": 10, "admin": 0} and rec.from_snapshot == 2

    run(body())


def test_records_without_an_id_before_the_position_are_looked_past(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)

    async def body() -> None:
        log = await consumed([node(i) for i in range(8)] + [(None, b"not json"), (None, b"{}")], store)
        recreated = await replaced(log, [node(100 + i) for i in range(8)] + [(None, b"x"), (None, b"y"), node(200)])
        with pytest.raises(LogError, match=r"offset 7, before the resume position 10, is event 'n107'"):
            await recover(recreated, source="evsched", snapshots=store)
        same = await replaced(log, [(r.key, r.value) for r in await log.read_inputs({}, 100)])
        assert (await recover(same, source="evsched", snapshots=store)).positions == {"inputs": 10, "admin": 0}

    run(body())
