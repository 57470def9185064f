"""Preemption under the yunikorn-1.9 profile (yunikorn-core v1.9.0 ``objects/preemption.go``,
``queue.go`` ``FindEligiblePreemptionVictims``/``findPreemptionFenceRoot``), against 1.5 on the
same lines.

Each scenario is one where v1.9.0 and v1.5.2 decide differently; the victims were derived by
hand from v1.9.0's code (the steps in ``scheduler.core.preemption_19``'s docstring) and are
asserted exactly, with 1.5's outcome beside them.
"""

from __future__ import annotations

from typing import Any

import orjson

from events.times import format_time
from replay.explain.pending import explain_pending
from scheduler.config import load_config
from scheduler.core.preemption_queues_19 import QueueSnap19
from scheduler.simulation.simulate import Simulation
from tests.sim import SCHEDULE, app, ask, node, root_queues, run
from tests.unit.test_core_preemption import CLASS, filled, revoked
from tests.unit.test_core_reservations import at


def v19(config: str) -> str:
    """The same configuration under the yunikorn-1.9 rules profile."""
    return config.replace("  - name: default\n", "  - name: default\n    rules: yunikorn-1.9\n", 1)


def both(lines: list[dict[str, Any]], config: str) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """The revocations under yunikorn-1.5, then under yunikorn-1.9."""
    return revoked(run(lines, config)[0]), revoked(run(lines, v19(config))[0])


def crit_ask(t: float = 10, **resources: int) -> list[dict[str, Any]]:
    res = resources or {"vcore": 2000, "memory": 2000}
    return [at(t, app("c", queue="root.crit")),
            at(t, {**ask("c", "c1", priority_class="critical"), "data": {
                **ask("c", "c1", priority_class="critical")["data"], "resources": res}})]


QUICK = [at(10, SCHEDULE), at(11.5, SCHEDULE)]


def leaves(best: str) -> str:
    return root_queues(f"""
        - name: best
          resources: {best}
        - name: crit
          resources: {{guaranteed: {{vcore: 4, memory: 4000}}}}
          properties: {{preemption.delay: 1s}}
    """)


def test_a_queue_over_its_guarantee_only_in_a_type_the_ask_does_not_need_gives_nothing() -> None:
    """YUNIKORN-3113: best guarantees 8 vcores (it uses 8) and 2000 memory (it uses 8000). A
    vcore-only ask finds best's remaining guarantee {vcore: 0, memory: -6000}: nothing below
    zero in vcore (``isVictimQueueOverGuaranteed``), so no victim. 1.5 sees best above its
    guarantee as a whole and takes f3."""
    lines = [*filled(), *crit_ask(vcore=2000), *QUICK]
    v15, v19_ = both(lines, leaves("{guaranteed: {vcore: 8, memory: 2000}}"))
    assert v15 == [("f3", "n1", "preempted")]
    assert v19_ == []


def test_a_queue_without_any_guarantee_gives_victims() -> None:
    """v1.9.0: a queue with no guarantee at or above it has a nil remaining guarantee, which
    counts as over (``remaining == nil``); 1.5 never takes from such a queue. The newest
    allocation on n1 (f3) goes, as 1.5 would choose if it could."""
    lines = [*filled(), *crit_ask(), *QUICK]
    v15, v19_ = both(lines, leaves("{}"))
    assert v15 == []
    assert v19_ == [("f3", "n1", "preempted")]


def test_the_fence_is_the_first_queue_the_ask_would_push_over_its_max() -> None:
    """YUNIKORN-3241: grp's max is 4000/4000 and low, inside it, holds all of it, so crit's ask
    (grp's usage + the ask over its max) makes grp the fence: only low's allocations may go.
    Fair node order puts l1, f2 on n1, l2, f3 on n2 and f1, f4 on n3: best's f2, the newest on n1
    and in a queue over its guarantee, would go first without the fence; with it n1's only
    candidate is l1, as n2's is l2, and n1 wins the tie on node id. Under
    1.5 nothing goes: crit's lineage is within its guarantee only once grp's usage fits grp's max
    again, and only low could give that — a queue without a guarantee, which never gives in 1.5."""
    config = root_queues("""
        - name: best
          resources: {guaranteed: {vcore: 1, memory: 1000}}
        - name: grp
          resources: {max: {vcore: 4, memory: 4000}}
          queues:
            - name: low
            - name: crit
              resources: {guaranteed: {vcore: 2, memory: 2000}}
              properties: {preemption.delay: 1s}
    """)
    lines = [at(0, CLASS), at(0, node("n1")), at(0, node("n2")), at(0, node("n3")),
             at(0, app("lo", queue="root.grp.low")), at(0, app("be", queue="root.best"))]
    for i, (owner, key) in enumerate((("lo", "l1"), ("lo", "l2"), ("be", "f1"), ("be", "f2"), ("be", "f3"),
                                      ("be", "f4")), 1):
        lines += [at(i, ask(owner, key, vcore=2000, memory=2000)), at(i, SCHEDULE)]
    lines += [at(10, app("c", queue="root.grp.crit")),
              at(10, ask("c", "c1", vcore=2000, memory=2000, priority_class="critical")), *QUICK]
    outputs15, _ = run(lines, config)
    outputs19, _ = run(lines, v19(config))
    assert revoked(outputs15) == []
    assert revoked(outputs19) == [("l1", "n1", "preempted")]


def test_the_preemptors_shared_parent_passes_no_remaining_guarantee_down() -> None:
    """YUNIKORN-2769, ``GetRemainingGuaranteedResource``: an ancestor of the ask's leaf with its
    own guarantee returns nil while the ask's leaf has a guarantee, so a sibling is judged by its
    own guarantee alone; a queue elsewhere is judged with its parent's remaining too
    (``ComponentWiseMin``, YUNIKORN-3240)."""
    root = QueueSnap19("root", None, False, {"vcore": 10}, {}, None, None, [], None)
    grp = QueueSnap19("root.grp", root, False, {"vcore": 10}, {}, None, {"vcore": 4}, [], None)
    ask_leaf = QueueSnap19("root.grp.crit", grp, True, {}, {}, None, {"vcore": 2}, [], None)
    sibling = QueueSnap19("root.grp.sib", grp, True, {"vcore": 10}, {}, None, {"vcore": 20}, [], ask_leaf)
    grp.ask_queue = ask_leaf_queue = ask_leaf
    ask_leaf.ask_queue = ask_leaf_queue
    assert grp.remaining() is None  # over by 6, but the ask's own ancestor: nothing passed down
    assert sibling.remaining() == {"vcore": 10}  # its own guarantee alone: not over, nothing to take
    assert ask_leaf.remaining() == {"vcore": 2}
    other = QueueSnap19("root.other", root, False, {"vcore": 10}, {}, None, {"vcore": 4}, [], ask_leaf)
    below = QueueSnap19("root.other.leaf", other, True, {"vcore": 1}, {}, None, {"vcore": 20}, [], ask_leaf)
    assert below.remaining() == {"vcore": -6}  # the parent is over: the leaf can lose what it holds


def test_only_nodes_the_asks_constraints_admit_are_tried() -> None:
    """As under 1.5 (``scheduler.core.constrained_nodes``): f3 on n1 would win the tie on node id,
    but the ask's node selector admits only n2 (zone b), where f4 is the newest."""
    lines = [at(0, CLASS), at(0, node("n1", labels={"zone": "a"})), at(0, node("n2", labels={"zone": "b"})),
             at(0, app("be", queue="root.best"))]
    lines += [at(i, ask("be", f"f{i}", vcore=2000, memory=2000)) for i in range(1, 5)] + [at(4, SCHEDULE)]
    lines += [at(10, app("c", queue="root.crit")),
              at(10, ask("c", "c1", vcore=2000, memory=2000, priority_class="critical",
                         constraints={"node_selector": {"zone": "b"}})), *QUICK]
    v15, v19_ = both(lines, leaves("{guaranteed: {vcore: 2, memory: 2000}}"))
    assert v15 == v19_ == [("f4", "n2", "preempted")]


def test_a_reserved_ask_that_preempts_elsewhere_moves_its_reservation() -> None:
    """v1.9.0 ``partition.go:reserve`` ("fixing reservations"): 1.5's
    ``test_an_ask_already_reserved_keeps_its_reservation`` under 1.9. c1 reserved n3 (no-fit) at
    12.5 s; its preemption at 41 s frees n1, and the reservation moves there."""
    n3 = node("n3", vcore=3000, memory=3000, occupied={"vcore": 2000, "memory": 2000})
    config = root_queues("""
        - name: best
          resources: {guaranteed: {vcore: 2, memory: 2000}}
        - name: crit
          resources: {guaranteed: {vcore: 4, memory: 4000}}
    """)
    lines = [*filled(), at(3, n3), at(10, app("c", queue="root.crit")),
             at(10, ask("c", "c1", vcore=2000, memory=2000, priority_class="critical")),
             at(10, SCHEDULE), at(12.5, SCHEDULE), at(41, SCHEDULE)]
    outputs, state = run(lines, v19(config))
    held = [(o["type"], o["data"]["node_id"], o["data"]["reason"]) for o in outputs
            if o["type"] in ("ask.reserved", "ask.unreserved")]
    assert held == [("ask.reserved", "n3", "no-fit"), ("ask.unreserved", "n3", "preemption"),
                    ("ask.reserved", "n1", "preemption")]
    assert revoked(outputs) == [("f3", "n1", "preempted")]
    assert state["nodes"]["n1"]["reserved_for"] == "c/c1" and "reserved_for" not in state["nodes"]["n3"]


def _stale_reservation_lines(wait_s: float, w1_priority: int = 0) -> list[dict[str, Any]]:
    """f1..f4 fill n1 and n2; a3 and a4 (sorting first) each hold a 3000/3000 allocation of ``be``
    (f5, f6), so 2000/2000 is free in the cluster but on no node: w1 (2000/2000, priority
    ``w1_priority``) reserves a3 at 3 s. ``wait_s`` later c1 (critical) preempts."""
    def at_s(seconds: float, obj: dict[str, Any]) -> dict[str, Any]:
        return {**obj, "time": format_time(round(seconds * 1_000_000))}

    lines = [at_s(0, CLASS), at_s(0, node("n1")), at_s(0, node("n2")), at_s(0, app("be", queue="root.best"))]
    lines += [at_s(i / 10, ask("be", f"f{i}", vcore=2000, memory=2000)) for i in range(1, 5)] + [at_s(0.5, SCHEDULE)]
    lines += [at_s(0.5, node("a3")), at_s(0.5, node("a4")),
              at_s(0.5, ask("be", "f5", vcore=3000, memory=3000)), at_s(0.5, ask("be", "f6", vcore=3000, memory=3000)),
              at_s(0.5, SCHEDULE)]
    lines += [at_s(0.6, app("w", queue="root.best")),
              at_s(0.6, ask("w", "w1", vcore=2000, memory=2000, priority=w1_priority)), at_s(3, SCHEDULE)]
    t = 3 + wait_s
    lines += [at_s(t, app("c", queue="root.crit")),
              at_s(t, ask("c", "c1", vcore=2000, memory=2000, priority_class="critical")),
              at_s(t, SCHEDULE), at_s(t + 1.5, SCHEDULE)]
    return lines


def _held(outputs: list[dict[str, Any]], ask_id: str) -> list[tuple[str, str, str]]:
    return [(o["type"], o["data"]["node_id"], o["data"]["reason"]) for o in outputs
            if o["type"] in ("ask.reserved", "ask.unreserved") and o["data"]["ask_id"] == ask_id]


def test_a_lower_priority_reservation_over_an_hour_old_is_cancelled_for_a_preemption() -> None:
    """YUNIKORN-3092 (v1.9.0 ``preemption.go:initWorkingState``): w1 (priority 0) has held a3 for
    over 60 minutes when c1 (priority 1000) attempts preemption: the reservation is cancelled
    (``ask.unreserved``, reason ``preemption-cancelled``) and a3 is usable; a3, a4, n1 and n2 tie
    on start index and the lowest node id wins: f5 on a3 goes, c1 reserves a3, and w1 reserves
    a4 at its turn. Under 1.5, and with less than 60 minutes of waiting, a3 stays held and f6
    on a4 goes."""
    config = leaves("{guaranteed: {vcore: 2, memory: 2000}}")
    outputs, _ = run(_stale_reservation_lines(3601), v19(config))
    assert _held(outputs, "w1") == [("ask.reserved", "a3", "no-fit"), ("ask.unreserved", "a3", "preemption-cancelled"),
                                    ("ask.reserved", "a4", "no-fit")]
    assert revoked(outputs) == [("f5", "a3", "preempted")]
    assert _held(outputs, "c1") == [("ask.reserved", "a3", "preemption")]
    for too_soon, cfg in ((3597, v19(config)), (3601, config)):  # the attempt is 1.5 s after c1 arrives
        outputs, _ = run(_stale_reservation_lines(too_soon), cfg)
        assert _held(outputs, "w1") == [("ask.reserved", "a3", "no-fit")]
        assert revoked(outputs) == [("f6", "a4", "preempted")]


def test_a_reservation_of_equal_priority_is_not_cancelled() -> None:
    """The reserved ask's priority must be below the preemptor's (``res.alloc.GetPriority() < p.ask.priority``)."""
    config = v19(leaves("{guaranteed: {vcore: 2, memory: 2000}}"))
    outputs, _ = run(_stale_reservation_lines(3601, w1_priority=1000), config)
    assert _held(outputs, "w1") == [("ask.reserved", "a3", "no-fit")]
    assert revoked(outputs) == [("f6", "a4", "preempted")]


def test_why_pending_says_an_attempt_would_cancel_the_stale_reservation_first() -> None:
    """``explain --ask`` / ``evsched pending`` of c1 before its attempt (its 1 s delay not yet over):
    the attempt it would make now names w1's reservation, over an hour old, as cancelled first,
    and the node it frees (a3) as the one it preempts on."""
    sim = Simulation(load_config(v19(leaves("{guaranteed: {vcore: 2, memory: 2000}}"))))
    for line in _stale_reservation_lines(3601)[:-1]:  # through c1's first cycle
        sim.feed(orjson.dumps(line))
    why = explain_pending(sim.engine, "c", "c1")
    assert why.preemption is not None
    attempt = why.preemption["attempt"]
    assert attempt["cancels_reservations"] == ["w/w1 on a3"] and attempt["node"] == "a3"
    assert "first cancels the reservations over an hour old of w/w1 on a3 (YUNIKORN-3092)" in why.summary
