"""Hostile logs and snapshots against the real processes (issue 36): ``evsched run``,
``replay verify`` and ``audit`` as subprocesses on the embedded log.

A flipped byte in a snapshot, a snapshot directory of another log, a deleted ``inputs/``
directory, a forged cycle and an input whose type forges a log line — each must give a
clear refusal or the right result, and nothing decided differently.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import orjson
import pytest

from events.codec import dumps
from events.log.file import FileLog
from scheduler.simulation.workload import WorkloadSpec
from tests.cli import evsched
from tests.faults.harness import fault_workload
from tests.logdrive import copy_log, write_inputs

pytestmark = pytest.mark.faults
SPEC = WorkloadSpec(nodes=8, apps=6, asks=120, leaves=3, seed=36)


def _log_with_snapshots(directory: Path) -> Path:
    with FileLog(directory) as log:
        write_inputs(log, fault_workload(SPEC))
    evsched("run", "--log", str(directory), "--once", "--max-batch", "40", "--snapshot-every", "1",
            "--snapshot-keep", "0")
    return directory


def _decisions(directory: Path) -> list[bytes]:
    with FileLog(directory, readonly=True) as log:
        return [r.value for r in log.iter_outputs() if b'"allocation.decided"' in r.value]


def test_a_damaged_snapshot_is_ignored_loudly_and_the_log_folded(tmp_path: Path) -> None:
    log_dir = _log_with_snapshots(tmp_path / "log")
    before = _decisions(log_dir)
    for snap in (log_dir / "snapshots").glob("snapshot-*.json"):
        data = bytearray(snap.read_bytes())
        # One digit of the engine's state changed: still valid JSON, a different state.
        at = next(i for i in range(data.index(b'"engine":'), len(data)) if data[i] in b"012345678")
        data[at] += 1
        snap.write_bytes(bytes(data))
    proc = evsched("run", "--log", str(log_dir), "--once", check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 0, err[-2000:]
    assert "fails its integrity check" in err and "snapshot of cycle" not in err
    assert _decisions(log_dir) == before
    evsched("replay", "verify", "--log", str(log_dir), "--no-snapshots")


def test_a_snapshot_directory_of_another_log_is_refused_at_once(tmp_path: Path) -> None:
    theirs = _log_with_snapshots(tmp_path / "theirs")
    ours = tmp_path / "ours"
    with FileLog(ours) as log:
        write_inputs(log, fault_workload(WorkloadSpec(nodes=2, apps=1, asks=3, leaves=1, seed=1)))
    proc = evsched("run", "--log", str(ours), "--once", "--snapshot-dir", str(theirs / "snapshots"), check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 1, err[-2000:]
    assert "belongs to another log" in err and "lost its tail" not in err
    assert not (ours / "outputs").exists() or not _decisions(ours)  # nothing decided


def test_a_deleted_inputs_directory_is_refused(tmp_path: Path) -> None:
    log_dir = _log_with_snapshots(tmp_path / "log")
    shutil.rmtree(log_dir / "inputs")
    proc = evsched("run", "--log", str(log_dir), "--once", check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 1, err[-2000:]
    assert "the input log lost records" in err


def test_a_forged_cycle_fails_verify_and_audit(tmp_path: Path) -> None:
    log_dir = _log_with_snapshots(tmp_path / "log")
    with FileLog(log_dir, readonly=True) as log:
        values = [r.value for r in log.iter_outputs()]
    last = max(orjson.loads(v)["data"]["cycle"] for v in values if b'"cycle.completed"' in v)

    def forge(outputs: list[bytes]) -> list[bytes]:
        out = []
        for value in outputs:
            obj = orjson.loads(value)
            if obj["type"] in ("cycle.started", "cycle.completed") and obj["data"]["cycle"] == last:
                obj["data"]["rules_version"] = 999
            out.append(dumps(obj))
        return out

    forged = tmp_path / "forged"
    with FileLog(log_dir, readonly=True) as log:
        copy_log(log, forged, outputs=forge).close_sync()
    shutil.copytree(log_dir / "snapshots", forged / "snapshots")
    verify = evsched("replay", "verify", "--log", str(forged), check=False)
    assert verify.returncode == 2 and b"rules version 999 is unknown to this build" in verify.stdout
    audit = evsched("audit", "--log", str(forged), check=False)
    assert audit.returncode == 1 and b"rules-version" in audit.stdout, audit.stdout[-2000:]


def test_an_input_cannot_forge_a_log_line(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    forged_type = "x\n2026-11-27 12:00:00,000 ERROR   evsched.service: disk full; stopping\x1b]0;owned\x07"
    with FileLog(log_dir) as log:
        log.append_inputs_sync([(None, orjson.dumps({"id": "i1", "source": "rm", "type": forged_type,
                                                     "data": {}}))])
    proc = evsched("run", "--log", str(log_dir), "--once")
    err = proc.stderr.decode()
    assert "\x1b" not in err and "\x07" not in err
    assert not [line for line in err.splitlines() if re.match(r"^\d{4}-\d\d-\d\d \S+ ERROR .*disk full", line)]
    assert "\\x0a2026-11-27 12:00:00,000 ERROR" in err  # the escaped form, inside the one rejection line
