"""The HTTP surface's pure parts: YuniKorn-shaped views, Prometheus rendering, the observer's counters."""

from __future__ import annotations

from collections import deque
from typing import Any

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from scheduler.config import load_config
from scheduler.core.engine import Engine
from scheduler.http import views
from scheduler.http.metrics import Metrics, ScrapeInputs
from scheduler.http.observer import CYCLE_BUCKETS, ServiceObserver
from scheduler.simulation.simulate import Simulation
from tests.sim import app, ask, node, root_queues

CONFIG = root_queues("""
          - name: a
            resources:
              guaranteed: {vcore: 2}
              max: {vcore: 6}
            properties:
              priority.policy: fence
              priority.offset: "5"
          - name: b
""")


def _engine_and_outputs() -> tuple[Engine, list[Any]]:
    sim = Simulation(load_config(CONFIG))
    lines: list[dict[str, Any]] = [
        node("n1", vcore=4000), node("n2", vcore=4000),
        app("app-1", queue="root.a"), app("app-2", queue="root.b"),
        ask("app-1", "k1", vcore=3000), ask("app-2", "k2", vcore=3000), ask("app-2", "k3", vcore=9000),
        {"type": "schedule"},
    ]
    outputs = []
    for line in lines:
        outputs += sim.feed(orjson.dumps(line))
    return sim.engine, outputs


def test_queue_tree_carries_the_config_and_the_rollups() -> None:
    engine, _ = _engine_and_outputs()
    root = views.queues_view(engine, "default")
    assert root["queuename"] == "root" and not root["isLeaf"]
    by_name = {c["queuename"]: c for c in root["children"]}
    a = by_name["root.a"]
    assert a["isLeaf"] and a["guaranteedResource"] == {"vcore": 2000} and a["maxResource"] == {"vcore": 6000}
    assert a["properties"]["priority.policy"] == "fence" and a["properties"]["priority.offset"] == "5"
    assert a["allocatedResource"]["vcore"] == 3000
    assert by_name["root.b"]["pendingResource"]["vcore"] == 9000  # k3 fits no node
    assert root["allocatedResource"]["vcore"] == 6000


def test_apps_and_nodes_views_agree_with_the_state_form() -> None:
    engine, _ = _engine_and_outputs()
    form: dict[str, Any] = engine.state_form()
    apps = views.applications_view(engine, "default")
    assert [a["applicationID"] for a in apps] == ["app-1", "app-2"]
    for a in apps:
        assert a["allocatedResource"] == form["apps"][a["applicationID"]]["allocated"]
        assert a["applicationState"] == form["apps"][a["applicationID"]]["state"]
    assert [r["allocationKey"] for r in apps[1]["requests"]] == ["k3"]
    assert views.applications_view(engine, "default", "root.a")[0]["applicationID"] == "app-1"
    nodes = views.nodes_view(engine, "default")
    assert {n["nodeID"]: n["allocated"] for n in nodes} == {k: v["allocated"] for k, v in form["nodes"].items()}


def test_unknown_partition_is_its_own_error() -> None:
    engine, _ = _engine_and_outputs()
    with pytest.raises(views.UnknownPartition):
        views.nodes_view(engine, "nope")


def _families(text: bytes) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text.decode())}


def test_metrics_render_queue_gauges_and_service_counters() -> None:
    engine, outputs = _engine_and_outputs()
    observer = ServiceObserver()
    observer.cycle_done(engine, outputs)
    observer.observe(0.003)
    inputs = ScrapeInputs(engines=[(engine, None)], observer=observer, lag={"inputs/0": 4}, recovery_s=0.5)
    text = Metrics().render(inputs)
    fams = _families(text)
    pending_samples = fams["evsched_queue_pending_resource"].samples
    pending = {(s.labels["queue"], s.labels["resource"]): s.value for s in pending_samples}
    assert pending[("root.b", "vcore")] == 9000
    decided = {s.labels["type"]: s.value for s in fams["evsched_outputs"].samples if s.name == "evsched_outputs_total"}
    assert decided["allocation.decided"] == 2
    lag = fams["evsched_consumer_lag"].samples[0]
    assert lag.labels == {"channel": "inputs/0"} and lag.value == 4
    buckets = [s for s in fams["evsched_cycle_duration_seconds"].samples if s.name.endswith("_bucket")]
    assert len(buckets) == len(CYCLE_BUCKETS) + 1 and buckets[-1].value == 1
    assert fams["evsched_recovery_duration_seconds"].samples[0].value == 0.5


def test_rejections_are_counted_by_reason() -> None:
    sim = Simulation(None)
    outs = sim.feed(orjson.dumps(ask("ghost", "k")))
    outs += sim.feed(b'{"type": "schedule"}')
    observer = ServiceObserver()
    observer.cycle_done(sim.engine, outs)
    assert sum(observer.rejections_by_reason.values()) == 1


def test_histogram_buckets_are_cumulative_upper_bounds() -> None:
    observer = ServiceObserver()
    for seconds in (0.0005, 0.001, 0.3, 100.0):
        observer.observe(seconds)
    assert observer.bucket_counts[0] == 2  # <= 1 ms: both the 0.5 ms and the 1 ms cycle
    assert observer.bucket_counts[CYCLE_BUCKETS.index(0.5)] == 1
    assert observer.bucket_counts[-1] == 1  # beyond the last bound: +Inf


def test_the_observer_puts_the_logs_history_behind_what_it_saw() -> None:
    from replay.history import CycleSample, History

    def row(cycle: int, n: int) -> dict[str, Any]:
        return {"decisionId": f"default-{cycle}-{n}", "cycle": cycle}

    def sample(cycle: int) -> CycleSample:
        return CycleSample(cycle, "", 1, 0.01, {"vcore": cycle}, {})

    obs = ServiceObserver()
    obs.recent.extend([row(7, 1), row(7, 2)])
    obs.samples["default"] = deque([sample(7)])
    obs.last_cycle_unix = 123.0
    # the history read while cycle 7 ran live: it holds cycle 7 too, and older cycles
    history = History(decisions=[row(7, 2), row(7, 1), row(6, 1), row(5, 1)],
                      samples={"default": [sample(5), sample(6), sample(7)]}, last_cycle=7, last_cycle_unix=99.0)
    obs.seed(history)
    assert [d["decisionId"] for d in obs.decisions(10)] == ["default-7-2", "default-7-1", "default-6-1", "default-5-1"]
    assert [s.cycle for s in obs.series("default", 10)] == [5, 6, 7]
    assert [s.cycle for s in obs.series("default", 2)] == [6, 7]
    assert obs.last_cycle_unix == 123.0  # what it saw itself wins
    fresh = ServiceObserver()
    fresh.seed(history)
    assert fresh.last_cycle_unix == 99.0 and len(fresh.decisions(1000)) == 4
