"""Property tests: caches equal a from-scratch fold; capacity and queue max are never exceeded;
simulate is byte-for-byte deterministic, also under different hash seeds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.resources import Resources, add_into, is_positive
from projections.digest import digest
from projections.policies import AppSortPolicy
from projections.priority import MIN_PRIORITY
from scheduler.config import load_config
from scheduler.core.engine import Engine
from scheduler.core.queues import cached, recompute
from scheduler.core.sorting import leaf_sort_key
from scheduler.core.state_form import state_form
from scheduler.simulation.simulate import Simulation
from scheduler.simulation.workload import WorkloadSpec, config_yaml, events, numbered
from tests.cli import evsched
from tests.oracles.node_order import sorted_node_ids

ROOT = Path(__file__).resolve().parents[2]

CONFIG = """
partitions:
  - name: default
    nodesortpolicy: {type: binpacking}
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: p
            maxapplications: 3
            properties: {priority.offset: '4'}
            resources: {max: {vcore: 6000}}
            queues:
              - name: fifo
                maxapplications: 2
                properties: {priority.offset: '-2'}
              - name: fair
                maxapplications: 3
                properties: {application.sort.policy: fair, priority.policy: fence, priority.offset: '9'}
          - name: sa
            properties: {application.sort.policy: stateaware, application.sort.priority: disabled}
"""
LEAVES = ["root.p.fifo", "root.p.fair", "root.sa"]
APPS = [f"a{i}" for i in range(5)]
NODES = [f"n{i}" for i in range(4)]

# An optional third type, sometimes zero: vectors must drop zero entries everywhere, or the
# incremental digest (which encodes nodes' vectors as they are) would differ from a full one.
resources = st.fixed_dictionaries({"vcore": st.integers(1, 3000), "memory": st.integers(1, 3000)},
                                  optional={"gpu": st.integers(0, 2)})
line = st.one_of(
    st.builds(lambda a, q: {"type": "app.added", "data": {"app_id": a, "queue": q, "user": "u"}},
              st.sampled_from(APPS), st.sampled_from(LEAVES)),
    st.builds(lambda a: {"type": "app.removed", "data": {"app_id": a}}, st.sampled_from(APPS)),
    st.builds(lambda a, k, r, p: {"type": "ask.added", "data": {"app_id": a, "ask_id": k, "resources": r,
                                                               "priority": p}},
              st.sampled_from(APPS), st.sampled_from(["k0", "k1", "k2", "k3"]), resources, st.integers(-3, 3)),
    st.builds(lambda a, k: {"type": "ask.removed", "data": {"app_id": a, "ask_id": k}},
              st.sampled_from(APPS), st.sampled_from(["k0", "k1", "k2", "k3"])),
    st.builds(lambda a, k: {"type": "allocation.released", "data": {"app_id": a, "ask_id": k}},
              st.sampled_from(APPS), st.sampled_from(["k0", "k1", "k2", "k3"])),
    st.builds(lambda n, r: {"type": "node.added", "data": {"node_id": n, "capacity": r}},
              st.sampled_from(NODES), resources),
    st.builds(lambda n, s: {"type": "node.updated", "data": {"node_id": n, "schedulable": s}},
              st.sampled_from(NODES), st.booleans()),
    st.builds(lambda n: {"type": "node.removed", "data": {"node_id": n}}, st.sampled_from(NODES)),
    st.builds(lambda m, t: {"type": "schedule", "data": {"max_allocations": m}, "time": t},
              st.one_of(st.none(), st.integers(0, 3)),
              st.sampled_from([None, "1970-01-01T00:10:00Z", "1970-01-01T01:00:00Z"])),
)


SETUP: list[dict[str, Any]] = [
    *({"type": "node.added", "data": {"node_id": n, "capacity": {"vcore": 4000, "memory": 4000}}} for n in NODES[:3]),
    *({"type": "app.added", "data": {"app_id": a, "queue": LEAVES[i % 3], "user": "u"}} for i, a in enumerate(APPS)),
]


def check_invariants(engine: Engine) -> None:
    assert engine.digest() == digest(state_form(engine.state)), "incremental digest differs from a full one"
    for part in engine.state.partitions.values():
        assert cached(part.root) == recompute(part.root)
        part.index.check()
        schedulable = {  # reserved nodes leave the index (scheduler.core.reservations)
            n.node_id: (n.capacity, n.available()) for n in part.nodes.values()
            if n.schedulable and n.reserved_for is None
        }
        assert list(part.index.ordered()) == sorted_node_ids(part.index.policy, part.index.weights, schedulable)
        for app in part.apps.values():
            pending: Resources = {}
            for a in app.asks.values():
                add_into(pending, a.resources)
            allocated: Resources = {}
            for al in app.allocations.values():
                add_into(allocated, al.resources)
            assert app.pending == pending and app.allocated == allocated
            assert app.priority == max((a.priority for a in app.asks.values()), default=MIN_PRIORITY)
            assert [a.ask_id for a in app.sorted_asks] == [
                a.ask_id for a in sorted(app.asks.values(), key=lambda a: (-a.priority, a.created_us, a.seq))]
        for path, listed in part.candidates.items():  # each leaf's sorted app list, from scratch
            leaf = part.queues[path]
            policy = AppSortPolicy.parse(leaf.app_sort_policy)
            assert listed == sorted((leaf_sort_key(a, policy, leaf.sort_priority), a.app_id)
                                    for a in part.apps.values() if a.queue is leaf and is_positive(a.pending))
        for node in part.nodes.values():
            used: Resources = {}
            for al in node.allocations.values():
                add_into(used, al.resources)
            assert node.allocated == used
            for name, qty in node.allocated.items():
                assert qty + node.occupied.get(name, 0) <= node.capacity.get(name, 0), "node over capacity"
        for q in part.root.walk():
            for name, limit in q.max.items():
                assert q.allocated.get(name, 0) <= limit, f"{q.path} over max"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(line, min_size=1, max_size=60))
def test_caches_match_a_from_scratch_fold(lines: list[dict[str, Any]]) -> None:
    sim = Simulation(load_config(CONFIG))
    for obj in [*SETUP, *lines]:
        if obj.get("time") is None:
            obj.pop("time", None)
        sim.feed(orjson.dumps(obj))
        check_invariants(sim.engine)
    sim.finish()
    check_invariants(sim.engine)


@settings(max_examples=40, deadline=None)
@given(st.lists(line, min_size=1, max_size=40))
def test_simulate_is_deterministic(lines: list[dict[str, Any]]) -> None:
    def once() -> bytes:
        sim = Simulation(load_config(CONFIG))
        out = []
        for obj in [*SETUP, *lines]:
            clean = {k: v for k, v in obj.items() if v is not None}
            out.extend(sim.feed(orjson.dumps(clean)))
        out.extend(sim.finish())
        return b"".join(o.model_dump_json().encode() for o in out) + orjson.dumps(sim.engine.state_form())

    assert once() == once()


def test_simulate_is_identical_under_different_hash_seeds(tmp_path: Path) -> None:
    spec = WorkloadSpec(nodes=40, apps=12, asks=400, leaves=6)
    workload = tmp_path / "w.jsonl"
    lines = [orjson.dumps(e) for e in numbered(events(spec))]
    lines.insert(len(lines) // 2, b'{"type": "schedule"}')
    workload.write_bytes(b"\n".join(lines) + b"\n")
    config = tmp_path / "c.yaml"
    config.write_text(config_yaml(spec))
    results = []
    for seed in ("0", "1", "12345"):
        proc = evsched("simulate", str(workload), "--config", str(config), "--state", env={"PYTHONHASHSEED": seed})
        results.append(proc.stdout)
    assert results[0] == results[1] == results[2]
    assert results[0].count(b'"allocation.decided"') == 400


TWO_PARTITIONS = """
partitions:
  - name: default
    queues: [{name: root, submitacl: '*', queues: [{name: a}]}]
  - name: gpu
    queues: [{name: root, submitacl: '*', queues: [{name: a}]}]
"""


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["default", "gpu"]), line), min_size=1, max_size=40))
def test_incremental_digest_merges_partitions_in_key_order(lines: list[tuple[str, dict[str, Any]]]) -> None:
    # Keys of partition "gpu" are "gpu/<id>": they sort between the default partition's ids
    # ("a0" < "gpu/a0" < "n0"), so the digest must merge the partitions' entries in key order.
    sim = Simulation(load_config(TWO_PARTITIONS))
    for partition in ("default", "gpu"):
        for obj in SETUP:
            data = {**obj["data"], "partition": partition}
            if "queue" in data:
                data["queue"] = "root.a"
            sim.feed(orjson.dumps({**obj, "data": data}))
    assert len(state_form(sim.engine.state)["apps"]) == 2 * len(APPS)  # both partitions hold apps
    for partition, obj in lines:
        obj = {k: v for k, v in obj.items() if not (k == "time" and v is None)}
        if obj["type"] != "schedule":
            data = {**obj["data"], "partition": partition}
            if "queue" in data:
                data["queue"] = "root.a"
            obj["data"] = data
        sim.feed(orjson.dumps(obj))
        assert sim.engine.digest() == digest(state_form(sim.engine.state))
    sim.finish()
    assert sim.engine.digest() == digest(state_form(sim.engine.state))


def test_incremental_digest_sees_timer_state_changes() -> None:
    # A timer moves an app Starting → Running with no other change to it: only the state
    # transition itself marks the app's entry for re-encoding.
    sim = Simulation(load_config(CONFIG))
    for obj in [
        *SETUP,
        {"type": "ask.added", "data": {"app_id": "a0", "ask_id": "k", "resources": {"vcore": 1}}},
        {"type": "schedule"},
    ]:
        sim.feed(orjson.dumps(obj))
    assert sim.engine.digest() == digest(state_form(sim.engine.state))
    assert state_form(sim.engine.state)["apps"]["a0"]["state"] == "Starting"
    sim.feed(orjson.dumps({"type": "schedule", "time": "1970-01-01T01:00:00Z"}))
    assert state_form(sim.engine.state)["apps"]["a0"]["state"] == "Running"
    assert sim.engine.digest() == digest(state_form(sim.engine.state))
