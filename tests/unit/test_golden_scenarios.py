"""Golden scenarios: each tests/golden/scenarios/X.jsonl must simulate to X.expected.jsonl, byte for byte.

Regenerate after an intended change with EVSCHED_UPDATE_GOLDEN=1 and review the diff.

``preemption.jsonl`` mirrors YuniKorn v1.5.2 ``preemption_test.go`` ``TestTryPreemption``
at the scheduler level: best-effort work fills two nodes, a ``PreemptLowerPriority`` ask of
an under-guarantee sibling preempts exactly one allocation (the newest on the lowest-id
node), is reserved there and allocated once the victim is released. yunikorn-core itself
decides the same (``python -m conformance.run --scenario``; docs/conformance.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli import evsched

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "tests" / "golden" / "scenarios").glob("*.jsonl"))
SCENARIOS = [p for p in SCENARIOS if not p.name.endswith(".expected.jsonl")]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.stem)
def test_scenario_matches_golden(scenario: Path) -> None:
    proc = evsched("simulate", str(scenario), "--state")
    expected = scenario.with_name(scenario.stem + ".expected.jsonl")
    if os.environ.get("EVSCHED_UPDATE_GOLDEN"):
        expected.write_bytes(proc.stdout)
    assert proc.stdout == expected.read_bytes()


def test_there_are_golden_scenarios() -> None:
    assert len(SCENARIOS) >= 2
