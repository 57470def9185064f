"""Required-node (daemon set) preemption: YuniKorn v1.5.2 ``required_node_preemptor.go`` and
``application.go:tryReservedAllocate`` → ``tryRequiredNodePreemption``."""

from __future__ import annotations

from typing import Any

from tests.sim import SCHEDULE, app, of_type, placements, run
from tests.unit.test_core_reservations import at, release


def res_ask(app_id: str, ask_id: str, first: int, priority: int, **extra: Any) -> dict[str, Any]:
    return {"type": "ask.added", "data": {"app_id": app_id, "ask_id": ask_id, "resources": {"first": first},
                                          "priority": priority, **extra}}


T = 0.001  # ask2, ask4 and ask7 share this creation time (YuniKorn's test sets createTime on them)
# YuniKorn prepareAllocationAsks without the two originator asks (evsched has no originators).
ALLOCS = [(2, 8, 10, T, True), (4, 5, 10, T, True), (7, 8, 10, T, False), (1, 10, 10, 0.002, True),
          (3, 10, 15, 0.003, True), (5, 5, 5, 0.004, True), (6, 10, 10, 0.005, False), (8, 10, 15, 0.006, False)]


def node_full_of_work(capacity: int = 90) -> list[dict[str, Any]]:
    lines = [at(0, {"type": "node.added", "data": {"node_id": "node", "capacity": {"first": capacity}}}),
             at(0, app("app1"))]
    for n, size, prio, t, preemptable in ALLOCS:
        lines.append(at(t, res_ask("app1", f"ask{n}", size, prio, allow_preemption=preemptable)))
    # "spare" joins after the work is placed, to keep root's headroom (the cluster) open: a
    # required-node ask failing its headroom neither reserves nor preempts (as in YuniKorn)
    lines += [at(0.01, SCHEDULE), at(0.015, {"type": "node.added", "data": {"node_id": "spare",
                                                                            "capacity": {"first": 100}}})]
    return lines


def revoked(outputs: list[dict[str, Any]]) -> list[str]:
    return [d["ask_id"] for d in of_type(outputs, "allocation.revoked")]


def test_victims_as_yunikorn_get_victims_case_1() -> None:
    """``TestGetVictims`` case 1: a priority-20 daemon-set ask for 25 on a node with 24 free takes
    ask5 (lowest priority), ask1 (newest of priority 10), ask4 then ask2 (same time: smaller
    first) — until the victims alone cover 25."""
    lines = [*node_full_of_work(), at(0.02, app("ds")),
             at(0.02, res_ask("ds", "d1", 25, 20, required_node="node")), at(0.03, SCHEDULE)]
    outputs, state = run(lines)
    assert of_type(outputs, "ask.reserved") == [
        {"app_id": "ds", "ask_id": "d1", "node_id": "node", "reason": "required-node"}]
    assert revoked(outputs) == ["ask5", "ask1", "ask4", "ask2"]
    rev = of_type(outputs, "allocation.revoked")[0]
    assert rev["reason"] == "preempted"
    assert rev["preemptor"] == {"app_id": "ds", "ask_id": "d1", "queue": "root.default"}
    assert state["nodes"]["node"]["reserved_for"] == "ds/d1"
    later = [*lines, *(at(0.04, release("app1", a)) for a in ("ask5", "ask1")), at(0.05, SCHEDULE)]
    assert placements(run(later)[0])[-1] == ("d1", "node")  # 24 + 15 free: it fits without waiting for more


def test_no_victims_when_a_requested_type_is_missing_everywhere() -> None:
    """``TestGetVictims`` case 3: the ask also wants ``second``, which no allocation holds."""
    lines = [*node_full_of_work(), at(0.02, app("ds")),
             at(0.02, {"type": "ask.added", "data": {"app_id": "ds", "ask_id": "d1", "priority": 20,
                                                     "resources": {"first": 5, "second": 5},
                                                     "required_node": "node"}}),
             at(0.03, SCHEDULE)]
    assert revoked(run(lines)[0]) == []


def test_higher_priority_and_required_node_allocations_are_kept() -> None:
    """``filterAllocations``: priority above the ask's, or a required node, is never a victim; the
    daemon set asks preempt only once (``HasTriggeredPreemption``)."""
    lines = [*node_full_of_work(), at(0.02, app("ds")),
             at(0.02, res_ask("ds", "d1", 25, 9, required_node="node")), at(0.03, SCHEDULE), at(0.04, SCHEDULE)]
    assert revoked(run(lines)[0]) == ["ask5"]  # only ask5 (priority 5) is eligible; with 24 free it covers 25
