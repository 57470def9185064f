"""Damage at the embedded log's tail is detected, reported and repaired; damage inside it is refused.

Each kind of damage (``tests.faults.damage``) is applied to a copy of a finished log, and
the service is restarted on it (``evsched run --once``, a real process):

* **outputs** tail: the repair is reported, the bytes before the damage are untouched, the
  cycle the damage cut short is re-run, and the outputs end byte-identical to the undamaged
  log's — nothing before the damage lost, nothing changed;
* **inputs** tail (a ``submit`` torn after the last run): reported and repaired the same way;
  every valid input before it is processed, the decisions are what ``simulate`` gives for
  those inputs and cycles, and when one record was lost, exactly what a log that never had
  it decides;
* a flipped byte *inside* acknowledged data (valid records after it) is not a torn tail: the
  service refuses to start, says why, and changes no byte.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import orjson
import pytest

from events.log.file import FileLog
from scheduler.simulation.workload import WorkloadSpec
from tests.cli import evsched
from tests.faults.damage import DAMAGE, damage, flip_byte, last_segment
from tests.faults.harness import fault_workload, finish_run, judge, run_args, verify_log
from tests.integration.test_service import outputs, simulate_with_recorded_boundaries
from tests.logdrive import write_as_cluster

pytestmark = pytest.mark.faults
SPEC = WorkloadSpec(nodes=30, apps=8, asks=400, leaves=4, seed=11)
UNCONSUMED = 50  # inputs appended after the last run, the last of them torn


def _run_once(log_dir: Path, err: Path) -> str:
    return finish_run(["--log", str(log_dir), *run_args(40)], err)


def _values(log_dir: Path, channel: str) -> list[bytes]:
    with FileLog(log_dir, readonly=True) as log:
        records = log.iter_inputs() if channel == "inputs" else log.iter_outputs()
        return [r.value for r in records]


@pytest.fixture(scope="module")
def base_logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``finished``: every input consumed; ``pending``: the same with ``UNCONSUMED`` more inputs
    appended after the run; ``reference``: ``pending`` without its last input, run to the end."""
    root = tmp_path_factory.mktemp("corruption")
    records = fault_workload(SPEC)
    head, tail = records[:-UNCONSUMED], records[-UNCONSUMED:]
    logs = {name: root / name for name in ("finished", "pending", "reference")}
    with FileLog(logs["finished"]) as log:
        write_as_cluster(log, records)
    _run_once(logs["finished"], root / "finished.err")
    for name, extra in (("pending", tail), ("reference", tail[:-1])):
        with FileLog(logs[name]) as log:
            write_as_cluster(log, head)
        _run_once(logs[name], root / f"{name}.err")
        with FileLog(logs[name]) as log:
            write_as_cluster(log, extra)
    _run_once(logs["reference"], root / "reference-2.err")
    return logs


def _damage_and_restart(src: Path, log_dir: Path, channel: str, kind: str) -> tuple[bytes, int, str]:
    """Copy ``src`` to ``log_dir``, damage ``channel``'s tail, restart the service on it.

    Returns the segment's bytes before the damage, where its valid data ends, and the
    service's stderr, after checking that the damage was reported and repaired there.
    """
    shutil.copytree(src, log_dir, ignore=shutil.ignore_patterns("snapshots"))  # recovery reads the log itself
    segment = last_segment(log_dir, channel)
    before = segment.read_bytes()
    valid_end = damage(segment, kind, random.Random(DAMAGE.index(kind)))
    stderr = _run_once(log_dir, log_dir.parent / "restart.err")
    assert f"{channel}: " in stderr and f"at byte {valid_end} " in stderr, stderr[-2000:]
    assert "torn tail of" in stderr and "truncated to the last valid record" in stderr, stderr[-2000:]
    return before, valid_end, stderr


@pytest.mark.parametrize("kind", DAMAGE)
def test_damaged_output_tail_is_repaired_and_the_cut_cycle_rerun(
    base_logs: dict[str, Path], tmp_path: Path, kind: str
) -> None:
    log_dir = tmp_path / "log"
    before, valid_end, stderr = _damage_and_restart(base_logs["finished"], log_dir, "outputs", kind)
    original = _values(base_logs["finished"], "outputs")
    assert last_segment(log_dir, "outputs").read_bytes()[:valid_end] == before[:valid_end]  # untouched
    repaired = _values(log_dir, "outputs")
    assert repaired == original, "the outputs after the repair differ from the undamaged log's"
    if valid_end < len(before):  # a record was lost: its cycle was re-run and completed again
        assert "was cut short" in stderr, stderr[-2000:]
    judge([orjson.loads(v) for v in repaired], {"inputs": len(fault_workload(SPEC))})
    assert verify_log(["--log", str(log_dir)])["ok"]


# The input side repeats the output side's mechanics; one kind is in the fast subset.
INPUT_CASES = [pytest.param(k, marks=[] if k == "torn-batch" else [pytest.mark.slow]) for k in DAMAGE]


@pytest.mark.parametrize("kind", INPUT_CASES)
def test_damaged_input_tail_is_repaired_and_the_rest_processed(
    base_logs: dict[str, Path], tmp_path: Path, kind: str
) -> None:
    log_dir = tmp_path / "log"
    before, valid_end, _ = _damage_and_restart(base_logs["pending"], log_dir, "inputs", kind)
    kept = _values(log_dir, "inputs")
    assert last_segment(log_dir, "inputs").read_bytes() == before[:valid_end]
    submitted = _values(base_logs["pending"], "inputs")
    assert kept == submitted[: len(kept)]
    got = judge(outputs(log_dir), {"inputs": len(kept)})  # every valid input processed
    assert got.decisions == simulate_with_recorded_boundaries(log_dir)
    if len(kept) == len(submitted) - 1:  # only the torn record was lost: as if it never came
        assert got.decisions == judge(outputs(base_logs["reference"]), {"inputs": len(kept)}).decisions
    assert verify_log(["--log", str(log_dir)])["ok"]


def test_damage_inside_acknowledged_data_is_refused_and_nothing_changed(
    base_logs: dict[str, Path], tmp_path: Path
) -> None:
    log_dir = tmp_path / "log"
    shutil.copytree(base_logs["finished"], log_dir)
    segment = last_segment(log_dir, "outputs")
    flip_byte(segment, 3)
    before = segment.read_bytes()
    proc = evsched("run", "--log", str(log_dir), "--once", check=False, timeout=120)
    stderr = proc.stderr.decode()
    assert proc.returncode == 1, stderr
    assert "outputs@3" in stderr and "valid records follow" in stderr and "refusing to drop them" in stderr
    assert "Traceback" not in stderr
    assert segment.read_bytes() == before
