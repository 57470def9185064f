"""Replay against logs the real service wrote (`evsched run --once`), through the command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from events.codec import dumps
from events.log.file import FileLog
from projections.digest import digest
from scheduler.simulation.workload import WorkloadSpec, config_yaml, events, numbered
from tests.cli import evsched, submit_as_cluster
from tests.logdrive import copy_log

ROOT = Path(__file__).resolve().parents[2]
SPEC = WorkloadSpec(nodes=6, apps=10, asks=400, leaves=4, seed=21)
REPLAY = "import sys; from scheduler.cli.replay import main; sys.exit(main(sys.argv[1:]))"


def replay(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-c", REPLAY, "replay", *args], cwd=ROOT, capture_output=True)


def outputs(log_dir: Path) -> list[dict[str, Any]]:
    with FileLog(log_dir, readonly=True) as log:
        return [orjson.loads(r.value) for r in log.iter_outputs()]


@pytest.fixture(scope="module")
def service_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Config first (a run on the empty log), then the workload in two submits, each run --once."""
    base = tmp_path_factory.mktemp("svc")
    log = base / "log"
    (base / "cfg.yaml").write_text(config_yaml(SPEC))
    evsched("run", "--log", str(log), "--once", "--config", str(base / "cfg.yaml"))
    lines = [orjson.dumps(e) for e in numbered(events(SPEC))]
    half = len(lines) // 2
    for i, chunk in enumerate((lines[:half], lines[half:])):
        (base / f"in{i}.jsonl").write_bytes(b"".join(line + b"\n" for line in chunk))
        submit_as_cluster(["--log", str(log)], base / f"in{i}.jsonl")
        evsched("run", "--log", str(log), "--once", "--batch", "60")
    return log


def test_service_log_verifies(service_log: Path) -> None:
    done = replay("verify", "--log", str(service_log))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(b"ok: ") and done.stderr == b""
    assert any(o["type"] == "allocation.decided" for o in outputs(service_log))


def test_tampered_service_log_fails(service_log: Path, tmp_path: Path) -> None:
    values = [r["type"] for r in outputs(service_log)]
    target = values.index("allocation.decided", len(values) // 2)

    def change(vals: list[bytes]) -> list[bytes]:
        obj = orjson.loads(vals[target])
        obj["data"]["ask_id"] = "ask-forged"
        return [*vals[:target], dumps(obj), *vals[target + 1 :]]

    with FileLog(service_log, readonly=True) as log:
        copy_log(log, tmp_path / "t", outputs=change).close_sync()
    done = replay("verify", "--log", str(tmp_path / "t"))
    assert done.returncode == 2
    assert f"output log offset {target}".encode() in done.stdout and b"ask-forged" in done.stdout


def test_export_then_simulate_reproduces_decisions(service_log: Path, tmp_path: Path) -> None:
    exported = replay("export", "--log", str(service_log), "-o", str(tmp_path / "run.jsonl"))
    assert exported.returncode == 0, exported.stderr
    simulated = evsched("simulate", str(tmp_path / "run.jsonl")).stdout.splitlines()
    decided = [o for o in outputs(service_log) if o["type"] == "allocation.decided"]
    assert decided
    assert [orjson.loads(v) for v in simulated if b'"allocation.decided"' in v] == decided


def test_state_matches_the_recorded_digest(service_log: Path) -> None:
    completed = [o["data"] for o in outputs(service_log) if o["type"] == "cycle.completed"]
    last = completed[-1]
    done = replay("state", "--cycle", str(last["cycle"]), "--log", str(service_log))
    assert done.returncode == 0, done.stderr
    assert digest(orjson.loads(done.stdout)) == last["state_digest"]
