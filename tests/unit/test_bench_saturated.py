"""The full-cluster benchmark (benchmarks/saturated.py) at its tiny sizes: it runs, and both sides decide alike.

No timing is asserted. What is: every shape runs through evsched and (with Go on the PATH;
under CI=true it must be) through yunikorn-core's harness, both make the same allocations and
preemptions in the timed cycle, nothing is decided in the steady cycles after it (the
cluster is full), and the script prints a row per shape and size and every target's verdict.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.saturated import SHAPES, TINY_BUILD, run_evsched, window_rates

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "conformance" / ".build" / "yunikorn-harness"


@pytest.fixture(scope="module")
def yunikorn_harness() -> Path:
    if shutil.which("go") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI needs Go for the saturated benchmark's yunikorn-core side (no `go` on the PATH)")
        pytest.skip("no Go toolchain on the PATH: the yunikorn-core side needs it")
    subprocess.run(["make", "--no-print-directory", "conformance-harness"], cwd=ROOT, check=True, timeout=280,
                   capture_output=True)
    return HARNESS


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_each_shape_is_full_after_its_first_cycle(name: str) -> None:
    shape = SHAPES[name]
    work = TINY_BUILD.get(name, shape.build)(shape.tiny)
    timing = run_evsched(work, steady=2)
    assert timing.steady_decisions == 0 and len(timing.steady_cpu) == 2
    asks = sum(1 for line in work.lines if line["type"] == "ask.added")
    if name in ("reserve", "distinct"):  # nothing ever fits
        assert timing.decisions == 0
    elif name == "preempt":  # the timed cycle preempts one victim per priority ask
        assert (timing.decisions, timing.preemptions) == (0, 2 * shape.tiny)
    elif name == "release":  # the reserved asks take the released nodes
        assert timing.decisions == shape.tiny
    else:  # some asks fit, the rest never do
        assert 0 < timing.decisions < asks


def test_the_script_runs_both_sides_alike_and_prints_every_target(yunikorn_harness: Path) -> None:
    proc = subprocess.run([sys.executable, "benchmarks/saturated.py", "--tiny", "--harness", str(yunikorn_harness)],
                          cwd=ROOT, capture_output=True, text=True, check=True, timeout=600)
    rows = [line for line in proc.stdout.splitlines() if line.split(" ", 1)[0] in SHAPES]
    assert len(rows) == 2 * len(SHAPES), proc.stdout
    for row in rows:  # the last column: evsched's allocations(+preemptions) / yunikorn-core's
        decided = re.search(r"\| +(\S+)/(\S+)(?: \||$)", row)
        assert decided is not None and decided.group(1) == decided.group(2), row
    for name in SHAPES:
        assert f"{name}: growth exponent" in proc.stdout
        assert f"{name}: every cycle ≤ 0.5× yunikorn-core's" in proc.stdout
    assert "window: ≥ 0.9× the first million's events/s" in proc.stdout


def test_window_rates_cover_every_event() -> None:
    assert [done for done, _ in window_rates(300, 100)] == [100, 200, 300]
