"""Guarantee-based preemption (YuniKorn v1.5.2 ``objects/preemption.go``, ``queue.go``
``FindEligiblePreemptionVictims``, ``application.go`` ``tryAllocate``/``tryPreemption``).

Each test names the YuniKorn test or code path it mirrors. Victims were derived by hand
from YuniKorn's algorithm (``calculateVictimsByNode``, the no-plugin path of
``checkPreemptionPredicates``) and are asserted exactly.
"""

from __future__ import annotations

from typing import Any

import orjson

from scheduler.config import load_config
from scheduler.core.snapshot import dump, load
from scheduler.simulation.simulate import Simulation
from tests.sim import SCHEDULE, app, ask, node, of_type, placements, root_queues, run
from tests.unit.test_core_reservations import at, release


def qconf(best: str = "{vcore: 2, memory: 2000}", crit_props: str = "{}", best_props: str = "{}",
          extra: str = "") -> str:
    """Two sibling leaves: ``best`` (best-effort work, small guarantee) and ``crit``."""
    return root_queues(f"""
        - name: best
          resources: {{guaranteed: {best}}}
          properties: {best_props}
        - name: crit
          resources: {{guaranteed: {{vcore: 4, memory: 4000}}}}
          properties: {crit_props}
        {extra}
    """)


CLASS = {"type": "priorityclass.upserted", "data": {"name": "critical", "value": 1000,
                                                     "preemption_policy": "PreemptLowerPriority"}}


def filled(times: tuple[float, ...] = (0, 1, 2, 3), **fill: Any) -> list[dict[str, Any]]:
    """Two 4000/4000 nodes filled by four 2000/2000 asks of ``be`` in root.best (created at ``times``):
    node order is fair, so f1, f3 land on n1 and f2, f4 on n2."""
    lines = [at(0, CLASS), at(0, node("n1")), at(0, node("n2")), at(0, app("be", queue="root.best"))]
    for i, t in enumerate(times, 1):
        lines.append(at(t, ask("be", f"f{i}", vcore=2000, memory=2000, **fill)))
    lines.append(at(times[-1], SCHEDULE))
    return lines


def critical(t: float = 10, **extra: Any) -> list[dict[str, Any]]:
    return [at(t, app("c", queue="root.crit")),
            at(t, ask("c", "c1", vcore=2000, memory=2000, priority_class="critical", **extra))]


def revoked(outputs: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(d["ask_id"], d["node_id"], d["reason"]) for d in of_type(outputs, "allocation.revoked")]


# The cluster is full, so the ask fails root's headroom (root's max is the cluster) and never
# reserves a node for no-fit: at 41 s (created at 10 s + the 30 s default delay) it preempts
# from the headroom branch of ``tryAllocate`` (``nodesTried`` false).
TIMELINE = [at(10, SCHEDULE), at(40.5, SCHEDULE), at(41, SCHEDULE)]


def test_an_under_guarantee_ask_takes_the_newest_best_effort_allocation_on_one_node() -> None:
    """The "Done when" scenario, as YuniKorn ``TestTryPreemption``: the ask's queue (crit) is below its
    guarantee, best is above its own; on n1 the victims sorted newest first are [f3, f1] and f3
    alone makes room (start index 0); n2 ties at index 0 and loses on node id. No additional
    victims: crit and root are within their guarantees once f3 goes."""
    outputs, state = run([*filled(), *critical(), *TIMELINE], qconf())
    assert revoked(outputs) == [("f3", "n1", "preempted")]
    rev = of_type(outputs, "allocation.revoked")[0]
    assert rev["preemptor"] == {"app_id": "c", "ask_id": "c1", "queue": "root.crit"}
    assert rev["decision_id"] == "default-1-3"
    assert of_type(outputs, "ask.reserved") == [
        {"app_id": "c", "ask_id": "c1", "node_id": "n1", "reason": "preemption"}]
    assert state["nodes"]["n1"]["allocated"] == {"vcore": 4000, "memory": 4000}  # until the RM releases f3


def test_the_preemptor_is_allocated_on_its_node_when_the_victim_is_released() -> None:
    """YuniKorn ``partition.go:removeAllocation`` (preempting resources drop) then ``tryReservedAllocate``."""
    lines = [*filled(), *critical(), *TIMELINE, at(57, release("be", "f3")), at(57, SCHEDULE)]
    outputs, state = run(lines, qconf())
    assert placements(outputs)[-1] == ("c1", "n1")
    assert state["queues"]["root.crit"]["allocated"] == {"vcore": 2000, "memory": 2000}


def test_an_ask_already_reserved_keeps_its_reservation() -> None:
    """``partition.go:reserve`` refuses a second reservation for an ask: one that reserved a node
    (no-fit: here the cluster has room, so root's headroom passes) preempts on another node and
    keeps the node it holds. n3 has 1000 free (its other 2000 occupied from outside, so the cluster
    has headroom): a 2000 ask fits nowhere and reserves n3, its best fit, at 12.5 s."""
    n3 = node("n3", vcore=3000, memory=3000, occupied={"vcore": 2000, "memory": 2000})
    lines = [*filled(), at(3, n3), *critical(), at(10, SCHEDULE), at(12.5, SCHEDULE), at(41, SCHEDULE)]
    outputs, state = run(lines, qconf())
    assert of_type(outputs, "ask.reserved") == [{"app_id": "c", "ask_id": "c1", "node_id": "n3", "reason": "no-fit"}]
    assert revoked(outputs) == [("f3", "n1", "preempted")]
    assert state["nodes"]["n3"]["reserved_for"] == "c/c1" and "reserved_for" not in state["nodes"]["n1"]


FAST = qconf(crit_props="{preemption.delay: 1s}")
QUICK = [at(10, SCHEDULE), at(11.5, SCHEDULE)]


def test_no_preemption_before_the_delay_nor_twice_for_one_ask() -> None:
    """``CheckPreconditions``: not before create time + ``preemption.delay``; ``HasTriggeredPreemption``."""
    outputs, _ = run([*filled(), *critical(), at(10, SCHEDULE), at(10.9, SCHEDULE)], FAST)
    assert revoked(outputs) == []
    outputs, _ = run([*filled(), *critical(), *QUICK, at(30, SCHEDULE), at(60, SCHEDULE)], FAST)
    assert len(revoked(outputs)) == 1


def test_an_ask_that_may_not_preempt_waits() -> None:
    """``IsAllowPreemptOther``: a Never class, or ``preempt_other: false``, never preempts."""
    outputs, _ = run([*filled(), *critical(preempt_other=False), *QUICK], FAST)
    assert revoked(outputs) == []
    lines = [*filled(), at(10, app("c", queue="root.crit")), at(10, ask("c", "c1", vcore=2000, memory=2000)), *QUICK]
    assert revoked(run(lines, FAST)[0]) == []
    lines = [*filled(), at(10, app("c", queue="root.crit")),
             at(10, ask("c", "c1", vcore=2000, memory=2000, preempt_other=True)), *QUICK]
    assert revoked(run(lines, FAST)[0]) == [("f3", "n1", "preempted")]


def test_victims_of_higher_priority_are_never_taken() -> None:
    """``findEligiblePreemptionVictims``: only allocations with priority <= the ask's."""
    outputs, _ = run([*filled(priority=2000), *critical(), *QUICK], FAST)
    assert revoked(outputs) == []


def test_a_queue_within_its_guarantee_gives_nothing() -> None:
    """``findEligiblePreemptionVictims`` skips a leaf whose allocation fits its guarantee."""
    outputs, _ = run([*filled(), *critical(), *QUICK], qconf(best="{vcore: 8, memory: 8000}",
                                                            crit_props="{preemption.delay: 1s}"))
    assert revoked(outputs) == []


def test_a_victim_queue_is_never_pushed_below_its_guarantee() -> None:
    """``calculateVictimsByNode``: a victim whose removal leaves its queue below its guarantee is put
    back. best guarantees 6000/6000 of its 8000/8000: one victim may go, two may not — so a
    4000/4000 ask cannot be made to fit on a node and nothing is revoked."""
    lines = [*filled(), at(10, app("c", queue="root.crit")),
             at(10, ask("c", "c1", vcore=4000, memory=4000, priority_class="critical")), *QUICK]
    outputs, _ = run(lines, qconf(best="{vcore: 6, memory: 6000}", crit_props="{preemption.delay: 1s}"))
    assert revoked(outputs) == []
    outputs, _ = run(lines, qconf(best="{vcore: 4, memory: 4000}", crit_props="{preemption.delay: 1s}"))
    assert revoked(outputs) == [("f3", "n1", "preempted"), ("f1", "n1", "preempted")]


def test_preemption_policy_disabled_protects_a_queues_allocations() -> None:
    """``findEligiblePreemptionVictims``: a leaf with ``preemption.policy: disabled`` gives no victims."""
    outputs, _ = run([*filled(), *critical(), *QUICK],
                     qconf(crit_props="{preemption.delay: 1s}", best_props="{preemption.policy: disabled}"))
    assert revoked(outputs) == []


def test_a_preemption_fence_bounds_where_the_ask_looks() -> None:
    """``findPreemptionFenceRoot``: the ask's leaf under a ``fence`` parent looks only inside it."""
    conf = root_queues("""
        - name: best
          resources: {guaranteed: {vcore: 2, memory: 2000}}
        - name: team
          properties: {preemption.policy: fence}
          queues:
            - name: crit
              resources: {guaranteed: {vcore: 4, memory: 4000}}
              properties: {preemption.delay: 1s}
    """)
    lines = [*filled(), at(10, app("c", queue="root.team.crit")),
             at(10, ask("c", "c1", vcore=2000, memory=2000, priority_class="critical")), *QUICK]
    outputs, _ = run(lines, conf)
    assert revoked(outputs) == []
    outputs, _ = run(lines, conf.replace("preemption.policy: fence", "preemption.policy: default"))
    assert revoked(outputs) == [("f3", "n1", "preempted")]


def test_allow_preemption_false_goes_last() -> None:
    """``sortVictimsForPreemption``: an allocation whose ask disallows preemption sorts after the
    others (YuniKorn still takes it as a last resort); here f3 is protected, so f1 goes on n1."""
    lines = [*filled(times=(0, 1)), at(2, ask("be", "f3", vcore=2000, memory=2000, allow_preemption=False)),
             at(3, ask("be", "f4", vcore=2000, memory=2000)), at(3, SCHEDULE), *critical(), *QUICK]
    outputs, _ = run(lines, FAST)
    assert revoked(outputs) == [("f1", "n1", "preempted")]


def test_partition_preemption_disabled_turns_it_off() -> None:
    """``partition.go:updatePreemption``: ``preemption: {enabled: false}``."""
    conf = FAST.replace("  - name: default\n", "  - name: default\n    preemption: {enabled: false}\n")
    assert load_config(conf).partitions[0].preemption_enabled is False
    outputs, _ = run([*filled(), *critical(), *QUICK], conf)
    assert revoked(outputs) == []


def test_required_node_allocations_are_never_victims() -> None:
    """``findEligiblePreemptionVictims`` skips allocations with a required node (daemon sets)."""
    lines = [at(0, CLASS), at(0, node("n1")), at(0, app("be", queue="root.best"))]
    lines += [at(i, ask("be", f"f{i}", vcore=2000, memory=2000, required_node="n1")) for i in (1, 2)]
    lines += [at(2, SCHEDULE), *critical(), *QUICK]
    outputs, _ = run(lines, FAST)
    assert revoked(outputs) == []


def test_a_snapshot_mid_preemption_restores_the_same_future() -> None:
    """Preempted flags, preempting resources and triggered asks survive a snapshot."""
    first = [*filled(), *critical(), *QUICK]
    sim = Simulation(load_config(FAST))
    for line in first:
        sim.feed(orjson.dumps(line))
    sim.finish()
    restored = load(orjson.loads(orjson.dumps(dump(sim.engine))))
    assert restored.digest() == sim.engine.digest()
    for engine in (sim.engine, restored):
        part = engine.state.partitions["default"]
        assert part.preempting == {"root.best": {"vcore": 2000, "memory": 2000}}
        assert part.apps["c"].asks["c1"].preempt_triggered
    follow = [at(12, release("be", "f3")), at(12, SCHEDULE)]
    after = []
    for engine in (sim.engine, restored):
        again = Simulation(load_config(FAST))
        again.__dict__.update({**sim.__dict__, "engine": engine})
        outs = [o for line in follow for o in again.feed(orjson.dumps(line))]
        after.append([(o.type, o.data.model_dump()) for o in outs if o.type != "cycle.completed"])
    assert after[0] == after[1]
    assert [d["ask_id"] for t, d in after[0] if t == "allocation.decided"] == ["c1"]


def test_folding_the_recorded_outputs_gives_the_state_running_the_cycle_gave() -> None:
    """For recovery from recorded outputs (facts): revocations, then the reservation, then the
    cycle's time give the same engine as running the cycle."""
    from events.models import AllocationRevoked, AskReserved
    from scheduler.core import preemption, reservations

    before = [*filled(), *critical()]
    sim = Simulation(load_config(FAST))
    for line in before:
        sim.feed(orjson.dumps(line))
    sim.feed(orjson.dumps(at(10, SCHEDULE)))
    folded = load(orjson.loads(orjson.dumps(dump(sim.engine))))
    outputs = sim.feed(orjson.dumps(at(11.5, SCHEDULE)))
    outputs += sim.finish()
    revoked = [o.data for o in outputs if isinstance(o.data, AllocationRevoked)]
    reserved = [o.data for o in outputs if isinstance(o.data, AskReserved)]
    assert len(revoked) == 1 and len(reserved) == 1
    state = folded.state
    state.cycle += 1
    for data in revoked:
        preemption.fold(state.partitions, data)
    for r in reserved:
        reservations.fold(state.partitions, r, state.cycle)
    state.cycle = sim.engine.state.cycle
    state.cycle_time_us = sim.engine.state.cycle_time_us
    assert dump(folded) == dump(sim.engine)
    assert folded.digest() == sim.engine.digest()
