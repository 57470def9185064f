"""Every benchmark script runs at a tiny size and produces decisions (``make bench-smoke``, benchmarks/smoke.py).

No timing is judged: a run fails when the script errors, or prints no count (decisions, or what it
measures) or a count of 0 — the way ``e2e.py`` went on reporting "0 decisions" unnoticed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks import smoke
from tests.go_harness import built_harness

ROOT = Path(__file__).resolve().parents[2]


def test_every_benchmark_script_is_registered() -> None:
    assert smoke.unregistered() == [], "add each new benchmarks/*.py to benchmarks/smoke.py SMOKE"
    assert {entry.script or name for name, entry in smoke.SMOKE.items()} <= set(smoke.scripts()), \
        "SMOKE names a script that is gone"


@pytest.fixture(scope="module")
def go_harness() -> Path:
    """The yunikorn-core harness (built as tests/unit/test_conformance.py builds it: patched clock and all)."""
    return built_harness("the vs_yunikorn benchmark's smoke run")


@pytest.fixture(scope="module")
def go_harness_19() -> Path:
    """The harness built against yunikorn-core v1.9.0 (the yunikorn-1.9 benchmarks' smoke runs)."""
    return built_harness("the saturated benchmark's yunikorn-1.9 smoke run", profile="yunikorn-1.9")


@pytest.mark.parametrize("name", sorted(smoke.SMOKE))
def test_benchmark_runs_tiny_and_produces(name: str, request: pytest.FixtureRequest) -> None:
    needs = smoke.SMOKE[name].needs
    env = dict(os.environ)
    if needs == "kafka":  # the session's broker, not one more started by the script
        env["KAFKA_BOOTSTRAP_SERVERS"] = request.getfixturevalue("kafka_bootstrap")
    harness = (request.getfixturevalue("go_harness") if needs == "go" else
               request.getfixturevalue("go_harness_19") if needs == "go-1.9" else None)
    if needs == "k8s":
        from tests.kube_cluster import build
        from tests.procs import broker_unavailable

        try:
            build()
        except RuntimeError as exc:
            broker_unavailable(f"the Kubernetes binaries cannot be built: {exc}")
    outcome = smoke.run(name, harness, env)
    assert outcome.failure is None, f"benchmarks/{name}.py: {outcome.failure}\n{outcome.output[-4000:]}"
