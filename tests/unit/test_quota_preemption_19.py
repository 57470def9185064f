"""yunikorn-1.9 quota preemption (scheduler.core.quota_preemption_19): worked examples from v1.9.0's rules."""

from __future__ import annotations

from scheduler.core.quota_preemption_19 import (
    HOUR_US,
    QuotaCandidate,
    QuotaClock,
    QuotaQueue,
    preemptable_resource,
    select_quota_victims,
    strictly_ge_only_existing,
    victim_order,
)

S = 1_000_000  # one second of log time in microseconds


def _allocs(prefix: str, sizes: list[int], **extra: object) -> list[QuotaCandidate]:
    return [QuotaCandidate(key=f"{prefix}{i}", app="app-1", resource={"memory": size}, **extra)  # type: ignore[arg-type]
            for i, size in enumerate(sizes, 1)]


def _tree(leaf: QuotaQueue) -> list[QuotaQueue]:
    root = QuotaQueue("root", allocated=dict(leaf.allocated), children=[leaf])
    return [root, leaf]


def _keys(chosen: list[tuple[str, QuotaCandidate]]) -> list[str]:
    return [victim.key for _, victim in chosen]


def test_lowered_max_after_the_delay_takes_exactly_the_excess() -> None:
    # max 100 → 40 with 3 × 20 running: 20 over, one allocation goes. All three compare equal, and Go's
    # stable sort with "less" answering true for equals reverses them (insertion sort): the last one goes.
    leaf = QuotaQueue("root.a", max={"memory": 40}, allocated={"memory": 60}, allocations=_allocs("a", [20, 20, 20]))
    assert preemptable_resource(leaf, _tree(leaf)) == {"memory": 20}
    assert _keys(select_quota_victims(_tree(leaf))) == ["a3"]


def test_lowest_priority_first_and_greedy_skip_of_what_overshoots() -> None:
    # 50 running, max 20: 30 to take. Order by priority: p0 (20) taken, p1 (20) would make 40 > 30: skipped,
    # p2 (10) makes 30: taken. yunikorn never takes more than the preemptable resource.
    allocs = [QuotaCandidate("p1", "app-1", {"memory": 20}, priority=1),
              QuotaCandidate("p0", "app-1", {"memory": 20}, priority=0),
              QuotaCandidate("p2", "app-1", {"memory": 10}, priority=2)]
    leaf = QuotaQueue("root.a", max={"memory": 20}, allocated={"memory": 50}, allocations=allocs)
    assert [c.key for c in victim_order(allocs, leaf.max, {"memory": 30})] == ["p0", "p1", "p2"]
    assert _keys(select_quota_victims(_tree(leaf))) == ["p0", "p2"]


def test_younger_hour_first_then_no_preempt_opt_out_last() -> None:
    old = QuotaCandidate("old", "app-1", {"memory": 10}, create_us=0)
    young = QuotaCandidate("young", "app-1", {"memory": 10}, create_us=2 * HOUR_US)
    # Go sorts the higher score first: an allocation that did not opt into preemption (scoreNoPreempt)
    # precedes the others in v1.9.0's quota sort (SortAllocationsBasedOnAsk: scoreLeft > scoreRight).
    shielded = QuotaCandidate("shielded", "app-1", {"memory": 10}, allow_preempt_self=False)
    assert [c.key for c in victim_order([old, young], None, {"memory": 10})] == ["young", "old"]
    assert [c.key for c in victim_order([old, shielded], None, {"memory": 10})] == ["shielded", "old"]


def test_guarantee_limits_what_is_taken() -> None:
    # usage 60, max 40 (20 over) but guaranteed 50: only 10 may go, so one 10 and not the 20.
    allocs = [QuotaCandidate("big", "app-1", {"memory": 20}, priority=0),
              QuotaCandidate("small", "app-1", {"memory": 10}, priority=1),
              QuotaCandidate("rest", "app-1", {"memory": 30}, priority=2)]
    leaf = QuotaQueue("root.a", max={"memory": 40}, guaranteed={"memory": 50}, allocated={"memory": 60},
                      allocations=allocs)
    assert preemptable_resource(leaf, _tree(leaf)) == {"memory": 10}
    assert _keys(select_quota_victims(_tree(leaf))) == ["small"]


def test_already_preempting_and_required_node_are_not_counted_or_taken() -> None:
    allocs = [QuotaCandidate("pinned", "app-1", {"memory": 10}, required_node="n1"),
              QuotaCandidate("gone", "app-1", {"memory": 10}, preempted=True),
              QuotaCandidate("free", "app-1", {"memory": 10})]
    leaf = QuotaQueue("root.a", max={"memory": 10}, allocated={"memory": 30}, allocations=allocs)
    assert _keys(select_quota_victims(_tree(leaf))) == ["free"]
    leaf.preempting = {"memory": 20}
    assert preemptable_resource(leaf, _tree(leaf)) is None
    assert select_quota_victims(_tree(leaf)) == []


def test_parent_spreads_the_excess_over_children_by_usage() -> None:
    # parent max 60, children use 60 and 20 (80): 20 over, spread 15 : 5 (floor of 0.75 × 20 and 0.25 × 20).
    a = QuotaQueue("root.p.a", allocated={"memory": 60}, allocations=_allocs("a", [5] * 12))
    b = QuotaQueue("root.p.b", allocated={"memory": 20}, allocations=_allocs("b", [5] * 4))
    parent = QuotaQueue("root.p", max={"memory": 60}, allocated={"memory": 80}, children=[a, b])
    root = QuotaQueue("root", allocated={"memory": 80}, children=[parent])
    chosen = select_quota_victims([root, parent])
    assert [(path, v.key) for path, v in chosen] == [
        ("root.p.a", "a12"), ("root.p.a", "a11"), ("root.p.a", "a10"), ("root.p.b", "b4")]


def test_clock_starts_on_the_lowering_config_change_in_log_time() -> None:
    clock = QuotaClock(delay_us=10 * S)
    clock.on_config(100 * S, {"memory": 100}, {"memory": 40}, 10 * S, {"memory": 60})
    assert clock.start_us == 110 * S
    assert not clock.due(109 * S, {"memory": 40}, {"memory": 60})  # before the delay: nothing
    assert clock.due(110 * S, {"memory": 40}, {"memory": 60})
    # a second lowering keeps the first start time
    clock.on_config(105 * S, {"memory": 40}, {"memory": 30}, 10 * S, {"memory": 60})
    assert clock.start_us == 110 * S
    # a longer delay moves it by the difference
    clock.delay_us = 20 * S
    clock.on_config(106 * S, {"memory": 30}, {"memory": 30}, 10 * S, {"memory": 60})
    assert clock.start_us == 120 * S


def test_a_max_equal_but_for_a_zero_entry_is_unchanged_as_go_equals_reads_it() -> None:
    # v1.9.0 ``resources.Equals`` reads a missing type as 0: {memory: 40, vcore: 0} equals {memory: 40}, so a
    # delay set later (old delay 0) starts the clock from the change, as for an unchanged max
    clock = QuotaClock(delay_us=10 * S)
    clock.on_config(100 * S, {"memory": 40, "vcore": 0}, {"memory": 40}, 0, {"memory": 60})
    assert clock.start_us == 110 * S


def test_clock_disabled_or_back_under_max_does_nothing() -> None:
    off = QuotaClock(delay_us=0)
    off.on_config(100 * S, {"memory": 100}, {"memory": 40}, 0, {"memory": 60})
    assert off.start_us is None and not off.due(10_000 * S, {"memory": 40}, {"memory": 60})
    clock = QuotaClock(delay_us=10 * S)
    clock.on_config(100 * S, {"memory": 100}, {"memory": 40}, 10 * S, {"memory": 60})
    assert not clock.due(200 * S, {"memory": 40}, {"memory": 40})  # usage dropped to the max
    assert clock.start_us is None


def test_allocation_over_max_starts_the_delay_once() -> None:
    clock = QuotaClock(delay_us=5 * S)
    clock.on_allocated(50 * S, {"memory": 40}, {"memory": 40})  # at max, not over: nothing
    assert clock.start_us is None
    clock.on_allocated(50 * S, {"memory": 40}, {"memory": 60})
    assert clock.start_us == 55 * S
    clock.on_allocated(52 * S, {"memory": 40}, {"memory": 70})
    assert clock.start_us == 55 * S  # already set: kept


def test_strictly_ge_only_existing_edge_cases_match_go() -> None:
    assert strictly_ge_only_existing({"memory": 40}, {"memory": 40})
    assert not strictly_ge_only_existing({"memory": 40}, {"memory": 41})
    assert strictly_ge_only_existing({"memory": 40}, {"vcore": 5})  # disjoint, both set
    assert not strictly_ge_only_existing(None, {"memory": 1})  # nil max never holds usage
    assert not strictly_ge_only_existing({"memory": 0}, {})  # empty smaller: larger must be all > 0
