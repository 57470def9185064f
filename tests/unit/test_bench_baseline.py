"""The benchmarks' simple reference scheduler decides exactly as the core does on generated workloads.

Both start from the same input events; the core (``Engine``) runs one cycle, the reference
(``benchmarks.baseline``) re-derives everything per step. The decision sequences — app,
ask and node of every allocation, in order — must be identical, including the point where
the cluster is full and the rest stays pending.
"""

from __future__ import annotations

import pytest

from benchmarks.baseline import ReferenceScheduler, Unsupported, reference_decisions
from events.codec import decode_input
from events.models import AllocationDecided, InputEvent
from scheduler.config import load_config
from scheduler.core.engine import Engine
from scheduler.simulation.workload import WorkloadSpec, config_yaml, events, numbered, records


def core_decisions(spec: WorkloadSpec) -> list[tuple[str, str, str]]:
    engine = Engine(load_config(config_yaml(spec)))
    for raw in records(spec):
        event = decode_input(raw, append_time_us=0)
        assert isinstance(event, InputEvent)
        engine.apply(event)
    outputs = engine.cycle(10**12, {})
    return [(o.data.app_id, o.data.ask_id, o.data.node_id) for o in outputs if isinstance(o.data, AllocationDecided)]


@pytest.mark.parametrize(
    "spec",
    [
        WorkloadSpec(nodes=40, apps=30, asks=1_500, leaves=12, departments=3, node_policy="fair"),
        WorkloadSpec(nodes=40, apps=30, asks=1_500, leaves=12, departments=3, node_policy="binpacking", seed=11),
        WorkloadSpec(nodes=25, apps=24, asks=900, leaves=8, departments=4, department_max_cores=40, seed=3),
        # 8 leaves per department: leaf offsets repeat, so siblings tie and "more pending first" decides
        WorkloadSpec(nodes=30, apps=48, asks=1_200, leaves=24, departments=3, unsorted_department=True, seed=5),
    ],
    ids=["fair", "binpacking", "department-max", "ties-and-unsorted"],
)
def test_reference_gives_the_core_decisions(spec: WorkloadSpec) -> None:
    core = core_decisions(spec)
    reference = reference_decisions(config_yaml(spec), numbered(events(spec)), now_us=10**12)
    assert len(core) > 200
    assert len(core) < spec.asks, "the cluster should fill up, so the 'nothing fits' end is compared too"
    assert reference == core


def test_department_max_binds() -> None:
    spec = WorkloadSpec(nodes=25, apps=24, asks=900, leaves=8, departments=4, department_max_cores=40, seed=3)
    decisions = reference_decisions(config_yaml(spec), numbered(events(spec)))
    ask_cores = {e["data"]["ask_id"]: e["data"]["resources"]["vcore"]
                 for e in events(spec) if e["type"] == "ask.added"}
    dept1_apps = {e["data"]["app_id"] for e in events(spec)
                  if e["type"] == "app.added" and e["data"]["queue"].startswith("root.dept1.")}
    used = sum(ask_cores[ask] for app, ask, _ in decisions if app in dept1_apps)
    assert 0 < used <= 40_000
    assert used > 40_000 - 2_000, "department 1 should be held at its max, not starved"


def test_reference_refuses_what_it_does_not_model() -> None:
    yaml = config_yaml(WorkloadSpec()).replace("application.sort.policy: fair", "application.sort.policy: stateaware")
    with pytest.raises(Unsupported):
        ReferenceScheduler(yaml)
    ref = ReferenceScheduler(config_yaml(WorkloadSpec()))
    with pytest.raises(Unsupported):
        ref.apply({"type": "app.removed", "data": {"app_id": "a"}})
