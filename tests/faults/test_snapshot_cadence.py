"""Snapshots after a crash: counted from the snapshot recovery started at, not from multiples of N.

Found by the kill campaign: a service killed while saving the snapshot of cycle 60 (N = 10)
left cycle 60 in the log but no snapshot of it, and every later life recovered from the
snapshot of cycle 50, re-deriving ever more cycles, because no life crossed a multiple of
10 live until cycle 70. Now the first live cycle at least N past the restored snapshot
writes one (and removes what a save cut short left behind).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from events.log.file import FileLog
from scheduler.service.loop import Service
from scheduler.simulation.workload import WorkloadSpec
from scheduler.storage.snapshot_files import SnapshotStore
from tests.faults.harness import fault_workload
from tests.logdrive import write_inputs

pytestmark = pytest.mark.faults
EVERY = 5


async def _life(log_dir: Path, cycles: int) -> int:
    """Start a service (recovering), run ``cycles`` cycles, stop without the clean-stop snapshot
    (as a kill would); returns the last cycle."""
    store = SnapshotStore(log_dir / "snapshots")
    log = FileLog(log_dir)
    try:
        service = Service(log, batch_records=20, snapshots=store, snapshot_every=EVERY)
        await service.start()
        for _ in range(cycles):
            await service.run_cycle_once()
        return service.engine.cycle_number
    finally:
        await log.close()


def _snapshots(log_dir: Path) -> list[int]:
    return sorted(int(p.stem.split("-")[1]) for p in (log_dir / "snapshots").glob("snapshot-*.json"))


def test_a_snapshot_lost_to_a_crash_is_made_up_at_the_first_live_cycle(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    with FileLog(log_dir) as log:
        write_inputs(log, fault_workload(WorkloadSpec(nodes=20, apps=6, asks=600, leaves=4, seed=3)))
    assert asyncio.run(_life(log_dir, 10)) == 10
    assert _snapshots(log_dir) == [5, 10]
    snapshot = log_dir / "snapshots" / "snapshot-000000000010.json"
    snapshot.rename(snapshot.with_suffix(".tmp"))  # as if killed while writing it: a .tmp, no .json

    assert asyncio.run(_life(log_dir, 1)) == 11  # recovers snapshot 5 + cycles 6..10, runs cycle 11
    assert _snapshots(log_dir) == [5, 11], "the next restart would re-derive from cycle 5 again"
    assert not list((log_dir / "snapshots").glob("*.tmp")), "the killed save's partial file is still there"
