"""``--log-format json`` and ``--log-level``: every stderr line is one JSON object; rejected inputs are logged."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

from tests.sim import app, ask, node

ROOT = Path(__file__).resolve().parents[2]


def _evsched(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "scheduler", *args], cwd=ROOT, capture_output=True, check=True)


def _submit(tmp: Path) -> Path:
    lines = [node("n1"), app("a1"), ask("a1", "k1"), ask("ghost", "k2")]  # the last names an unknown app
    path = tmp / "in.jsonl"
    path.write_bytes(b"".join(orjson.dumps({"id": f"e{i}", **line}) + b"\n" for i, line in enumerate(lines)))
    log = tmp / "log"
    _evsched("submit", "--log", str(log), str(path))
    return log


def test_json_lines_carry_the_rejection_with_its_reason(tmp_path: Path) -> None:
    log = _submit(tmp_path)
    done = _evsched("run", "--log", str(log), "--once", "--log-format", "json")
    entries = [orjson.loads(line) for line in done.stderr.splitlines() if line.strip()]
    assert entries and all({"time", "level", "logger", "message"} <= e.keys() for e in entries)
    rejected = [e for e in entries if e["logger"] == "evsched.inputs"]
    assert len(rejected) == 1 and rejected[0]["level"] == "info"
    assert "id=e3" in rejected[0]["message"] and "reason=unknown-app" in rejected[0]["message"]


def test_log_level_warning_keeps_info_out(tmp_path: Path) -> None:
    log = _submit(tmp_path)
    done = _evsched("run", "--log", str(log), "--once", "--log-level", "warning")
    assert b"input rejected" not in done.stderr and b"INFO" not in done.stderr
