"""The README's first hour, on a fresh clone: three teams' queues → submit with config → run → log cat → explain →
whatif. The commands are read from the README (between its ``first-hour`` markers) and run as a user runs them,
in a clone of the repository's committed tree, so the README, the example files and the code cannot drift apart.
Also: the demo's summary over the same log, in human units."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.cli import ROOT, evsched_env

MARKERS = re.compile(r"<!-- first-hour:.*?-->(.*?)<!-- /first-hour -->", re.S)


def readme_commands(readme: str) -> list[list[str]]:
    """The ``evsched …`` lines of the README's first-hour block."""
    found = MARKERS.search(readme)
    assert found, "README has no first-hour block"
    return [shlex.split(line.strip()) for line in found.group(1).splitlines() if line.strip().startswith("evsched ")]


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing to clone")
    target = tmp_path_factory.mktemp("fresh") / "evsched"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(target)], check=True, timeout=300)
    return target


def run_in(clone: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    assert argv[0] == "evsched"
    proc = subprocess.run([sys.executable, "-m", "scheduler", *argv[1:]], cwd=clone, capture_output=True, text=True,
                          env=evsched_env({"PYTHONPATH": str(clone)}), timeout=300)
    assert proc.returncode == 0, f"{shlex.join(argv)} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return proc


def test_the_readme_first_hour_on_a_fresh_clone(clone: Path, capsys: pytest.CaptureFixture[str]) -> None:
    steps = readme_commands((clone / "README.md").read_text())
    assert [s[1:3] for s in steps] == [["config", "check"], ["submit", "--config"], ["run", "--log"],
                                       ["log", "cat"], ["replay", "explain"], ["replay", "explain"],
                                       ["pending", "--ask"], ["replay", "whatif"]]
    out = [run_in(clone, step) for step in steps]
    check, submit, _run, cat, explain, pending, in_line, whatif = out

    assert check.stdout.startswith("config OK: 1 partitions, 4 queues")
    assert "skipped 3 'schedule' lines" in submit.stderr and "appended 37 events" in submit.stderr
    assert submit.stderr.count("the service decides when cycles run") == 1

    decided = [json.loads(line) for line in cat.stdout.splitlines()]
    assert {d["type"] for d in decided} == {"allocation.decided"}
    assert Counter(d["data"]["queue"] for d in decided) == {"root.ml": 6, "root.search": 4, "root.analytics": 2}
    assert decided[0]["data"]["resources"] == {"memory": 32 << 30, "vcore": 8000}  # JSON stays exact

    text = explain.stdout
    assert "ask ml-0-t0 of app ml-0 → node node-0 [verified against the scheduler core and the log]" in text
    assert "root.ml  priority 10 = offset 10 + 0" in text and "pending memory 192 GiB, vcore 48 cores" in text
    assert "available memory 64 GiB, vcore 16 cores" in text and str(32 << 30) not in text

    assert "root: memory 256 GiB allocated + 8 GiB asked exceeds the cluster's capacity 256 GiB" in pending.stdout
    assert "asking memory 8 GiB, vcore 2 cores" in pending.stdout

    assert "Pending in root (partition default) after cycle 1: 12 asks" in in_line.stdout
    assert "12. srch-2/srch-2-t2  queue root.search" in in_line.stdout
    assert "(#5 in its leaf, #12 in the partition)" in in_line.stdout
    assert "to run: add nodes with memory 8 GiB, vcore 2 cores more capacity" in in_line.stdout

    assert "decisions: 12 before, 17 after" in whatif.stdout
    assert re.search(r"root\.ml\s+6\s+3\s+-3", whatif.stdout)
    assert re.search(r"root\.search\s+4\s+9\s+\+5", whatif.stdout)

    raw = run_in(clone, [*steps[4], "--raw"]).stdout
    assert "available memory 68719476736, vcore 16000" in raw

    state = run_in(clone, ["evsched", "replay", "state", "--cycle", "latest", "--log", "first-hour"])
    latest = json.loads(state.stdout)
    assert latest["queues"]["root.ml"]["allocated"] == {"memory": 192 << 30, "vcore": 48000}

    from scheduler.cli.demo import summarize

    summarize(clone / "first-hour")
    demo = capsys.readouterr().out
    assert "memory 32 GiB, vcore 8 cores" in demo and "vcore=" not in demo and "1492" not in demo
