"""A full disk under the embedded log: the service stops with a clear error and writes no partial record.

The log lives on a small tmpfs (``mount -t tmpfs``; skipped with the reason where mounting
is not permitted). After the inputs are written, a filler file leaves only a few KiB free,
so the service runs out of space a few cycles in. Then:

* a snapshot that cannot be written is skipped with a warning (and no partial file stays);
* ``evsched run`` exits 1 naming the cycle and ENOSPC, with no traceback; the output
  segment holds only whole, CRC-valid records ending in a ``cycle.completed`` (the failed
  cycle's batch was rolled back), ``replay verify`` passes, and no repair is needed;
* ``evsched submit`` on the full disk exits 1 the same way and adds no byte;
* a restart while the disk is still full recovers, then stops again at the same place;
* once the filler is deleted, a restart finishes the work, and the decisions equal those of
  the same inputs run on a disk with room.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from events.log.file import FileLog
from scheduler.simulation.workload import WorkloadSpec
from tests.cli import evsched
from tests.faults.damage import frame_positions, last_segment
from tests.faults.harness import fault_workload, finish_run, judge, run_args, verify_log
from tests.integration.test_service import outputs
from tests.logdrive import write_as_cluster

pytestmark = pytest.mark.faults
SPEC = WorkloadSpec(nodes=40, apps=20, asks=2000, leaves=4, seed=9)
DISK = "2m"
LEFT_FREE = 48 << 10  # bytes left after the filler: room for a few cycles, then ENOSPC


@contextlib.contextmanager
def small_disk(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` for the duration; skip when mounting is refused."""
    where.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                           capture_output=True, text=True)
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill ({mount.stderr.strip() or mount.returncode}); "
                    "needs root or CAP_SYS_ADMIN")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill_disk(directory: Path, leave: int) -> Path:
    """A file taking all of the file system's free space but ``leave`` bytes."""
    stat = os.statvfs(directory)
    filler = directory / "filler"
    with open(filler, "wb") as f:
        f.write(bytes(max(0, stat.f_bavail * stat.f_frsize - leave)))
    return filler


def assert_stopped_cleanly(proc: subprocess.CompletedProcess[str], log_dir: Path) -> None:
    """Exit 1 with the ENOSPC reason and no traceback; only whole records, ending on a complete cycle."""
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "disk full (ENOSPC)" in proc.stderr and "rolled back" in proc.stderr, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    for channel in ("inputs", "outputs"):
        frame_positions(last_segment(log_dir, channel))  # asserts: every byte belongs to a valid frame
    with FileLog(log_dir, readonly=True) as log:
        assert log.repairs == []
        last = orjson.loads(list(log.iter_outputs())[-1].value)
    assert last["type"] == "cycle.completed", "the log ends inside a cycle"


def test_full_disk_stops_the_service_without_a_partial_record(tmp_path: Path) -> None:
    records = fault_workload(SPEC)
    args = [*run_args(50), "--snapshot-every", "1"]  # a snapshot per cycle: the first write to fail
    reference = tmp_path / "reference"
    with FileLog(reference) as log:
        write_as_cluster(log, records)
    finish_run(["--log", str(reference), *args], tmp_path / "reference.err")

    with small_disk(tmp_path / "disk", DISK) as disk:
        log_dir = disk / "log"
        with FileLog(log_dir) as log:
            write_as_cluster(log, records)
        filler = fill_disk(disk, LEFT_FREE)

        first = evsched("run", "--log", str(log_dir), *args, check=False, text=True)
        assert_stopped_cleanly(first, log_dir)
        assert "outputs not written" in first.stderr and "a restart re-runs this cycle" in first.stderr
        assert "not written ([Errno 28]" in first.stderr  # a snapshot failed first, and was skipped
        assert not list((log_dir / "snapshots").glob("*.tmp")), "a partial snapshot file was left behind"
        report = verify_log(["--log", str(log_dir)])
        assert report["cycles"] > 0 and report["incomplete_cycle"] is None and report["unconsumed_inputs"] > 0

        inputs_before = last_segment(log_dir, "inputs").read_bytes()
        more = tmp_path / "more.jsonl"
        more.write_bytes(b"\n".join(orjson.dumps({**r, "id": f"more-{i}"}) for i, r in enumerate(records)))
        submitted = evsched("submit", "--log", str(log_dir), str(more), check=False, text=True)
        assert submitted.returncode == 1 and "disk full (ENOSPC)" in submitted.stderr, submitted.stderr[-2000:]
        assert last_segment(log_dir, "inputs").read_bytes() == inputs_before

        again = evsched("run", "--log", str(log_dir), *args, check=False, text=True)
        assert_stopped_cleanly(again, log_dir)
        assert "inputs waiting" in again.stderr  # it recovered first, then met the full disk again

        filler.unlink()
        finish_run(["--log", str(log_dir), *args], tmp_path / "final.err")
        end = {"inputs": len(records)}
        assert judge(outputs(log_dir), end).decisions == judge(outputs(reference), end).decisions
        assert verify_log(["--log", str(log_dir)])["ok"]
