"""yunikorn-1.9's quota preemption through the engine: a lowered max takes allocations back after
``quota.preemption.delay`` in log time (``allocation.revoked`` ``quota-preempted``), never before
and never under yunikorn-1.5; recovery folds the revocations and the timers as fact."""

from __future__ import annotations

from typing import Any

import orjson

from events.times import parse_time
from scheduler.config import load_config
from scheduler.core import quota_preemption, snapshot
from scheduler.simulation.simulate import Simulation
from tests.sim import app, ask, node, root_queues
from tests.unit.test_fact_fold import _live_and_recovered, _next_cycle
from tests.unit.test_fact_fold_preemption import _records

STEP_US = 20_000_000  # one record per cycle, 20 s of log time apart


def config(max_units: int, *, rules: str = "yunikorn-1.9") -> str:
    partition = "rules: yunikorn-1.9\npreemption: {quotapreemptionenabled: true}" if rules == "yunikorn-1.9" else ""
    return root_queues(f"""
        - name: a
          resources: {{max: {{vcore: {max_units}, memory: {max_units}}}}}
          properties: {{quota.preemption.delay: 60s}}
        - name: b
    """, partition=partition)


TICK = {"type": "node.updated", "data": {"node_id": "n1", "schedulable": True}}


def lines(rules: str) -> list[dict[str, Any]]:
    """Four 2000-unit allocations in root.a (max 8000), then the max lowered to 4000 (record 7),
    then ticks every 20 s of log time."""
    out = [node("n1", vcore=10000, memory=10000), app("A", "root.a")]
    out += [ask("A", f"a{i}", vcore=2000, memory=2000) for i in range(1, 5)]
    out += [TICK, {"type": "config.updated", "data": {"yaml": config(4000, rules=rules)}}]
    return out + [TICK] * 6


def revoked(log: Any) -> list[tuple[int, dict[str, Any]]]:
    """(log time of its cycle, data) of every allocation.revoked."""
    out = []
    cycle_us = 0
    for record in log.iter_outputs():
        obj = orjson.loads(record.value)
        if obj["type"] == "cycle.started":
            cycle_us = parse_time(obj["time"])
        if obj["type"] == "allocation.revoked":
            out.append((cycle_us, obj["data"]))
    return out


def cycle_times(log: Any) -> list[int]:
    return [parse_time(obj["time"]) for record in log.iter_outputs()
            if (obj := orjson.loads(record.value))["type"] == "cycle.started"]


def test_a_lowered_max_is_taken_back_after_the_delay_and_recovery_folds_it() -> None:
    records = _records(lines("yunikorn-1.9"), 1, STEP_US)
    assert records[7]["type"] == "config.updated"
    live, recovered, log = _live_and_recovered(records, 1, STEP_US, config(8000))
    taken = revoked(log)
    # 4000 over the new max: two 2000-unit allocations, both at one cycle, none before the delay
    assert [data["reason"] for _, data in taken] == ["quota-preempted", "quota-preempted"]
    assert all("preemptor" not in data for _, data in taken)
    assert len({cycle for cycle, _ in taken}) == 1
    config_us = records[7]["time"]
    due_us = parse_time(config_us) + 60_000_000  # the config change's log time + the delay
    assert taken[0][0] == min(t for t in cycle_times(log) if t >= due_us)
    part = live.state.partitions["default"]
    assert sum(alloc.preempted for alloc in part.apps["A"].allocations.values()) == 2
    assert part.preempting["root.a"] == {"vcore": 4000, "memory": 4000}
    assert recovered.digest_mismatches == []
    assert snapshot.dump(recovered.engine) == snapshot.dump(live)
    assert _next_cycle(recovered.engine) == _next_cycle(live)


def test_the_timer_is_kept_in_snapshots() -> None:
    records = _records(lines("yunikorn-1.9")[:9], 1, STEP_US)  # the config applied, the delay not yet over
    live, recovered, log = _live_and_recovered(records, 1, STEP_US, config(8000))
    assert revoked(log) == []
    dumped = snapshot.dump(live)
    assert list(dumped["partitions"]["default"]["quota_starts"]) == ["root.a"]
    assert snapshot.dump(snapshot.load(dumped)) == dumped
    assert snapshot.dump(recovered.engine) == dumped


def test_nothing_is_taken_under_yunikorn_1_5() -> None:
    live, recovered, log = _live_and_recovered(_records(lines("yunikorn-1.5"), 1, STEP_US), 1, STEP_US,
                                               config(8000, rules="yunikorn-1.5"))
    assert revoked(log) == []
    assert not live.state.partitions["default"].quota_clocks
    assert "quota_starts" not in snapshot.dump(live)["partitions"]["default"]
    assert snapshot.dump(recovered.engine) == snapshot.dump(live)


def test_explain_revoked_names_quota_preemption() -> None:
    from replay.explain.decision import ExplainError
    from replay.explain.revocation import explain_revocation_from_log

    _, _, log = _live_and_recovered(_records(lines("yunikorn-1.9"), 1, STEP_US), 1, STEP_US, config(8000))
    (_, victim), *_ = revoked(log)
    try:
        explain_revocation_from_log(log, victim["app_id"], victim["ask_id"])
    except ExplainError as exc:
        assert "quota-preempted" in str(exc) and "quota.preemption.delay" in str(exc)
    else:
        raise AssertionError("explain --revoked of a quota-preempted allocation explained a preemptor")


def test_a_dynamic_queue_gets_no_timer_though_its_template_sets_a_delay() -> None:
    text = root_queues("""
        - name: p
          parent: true
          childtemplate: {properties: {quota.preemption.delay: 60s}}
        - name: m
          resources: {max: {vcore: 1000}}
          properties: {quota.preemption.delay: 60s}
    """, rules="- name: provided\n  create: true",
        partition="rules: yunikorn-1.9\npreemption: {quotapreemptionenabled: true}")
    sim = Simulation(load_config(text))
    for line in [node("n1"), app("A", "root.p.dyn"), {"type": "config.updated", "data": {"yaml": text}}]:
        sim.feed(orjson.dumps(line))
    sim.finish()
    part = sim.engine.state.partitions["default"]
    assert "root.p.dyn" in part.queues and quota_preemption.delay_us(part, "root.p.dyn") == 60_000_000
    # YuniKorn's ``IsManaged`` guard: only configured queues are quota-preempted (QuotaClock's docstring)
    assert sorted(part.quota_clocks) == ["root.m"]
