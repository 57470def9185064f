"""Property: a yunikorn-1.9 preemption attempt read from the cycle's index finds what the walk from scratch finds.

``scheduler.core.preemption_victims_19.VictimIndex19`` is built at a cycle's first attempt and
then told of every step (allocations, victims taken, nodes coming back). At every step of
random preemption workloads under the yunikorn-1.9 rules profile (``test_preemption_properties``'
generators, with guarantees on parents too), every ask that may preempt is tried three ways —
through the cycle's own index as the steps left it, through an index built now, and from
scratch (``find_victims_19``) — and the three outcomes (node, victims, victims collected,
every node tried, the reason of a failure, the fence) must be the same; and the cycle's index
must hold what a fresh one holds.
"""

from __future__ import annotations

from typing import Any, cast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.core.cycle import expiring
from scheduler.core.objects import App, Ask
from scheduler.core.partition import PartitionState
from scheduler.core.preemption_19 import Outcome19, try_preemption_19
from scheduler.core.preemption_victims_19 import LeafCandidates19, VictimIndex19
from tests.sim import app, ask, node, root_queues
from tests.unit.test_preemption_properties import configs
from tests.unit.test_preemption_victims import (
    IndexCheck,
    _Driver,
    compare_attempts,
    held_by_leaf,
    storm_through,
    storms,
)


def _seen(outcome: Outcome19) -> tuple[Any, ...]:
    return (outcome.node, outcome.victims, outcome.collected, outcome.reason, outcome.fence, outcome.fence_by,
            [(t.node_id, t.start_index, t.victims) for t in outcome.tried],
            [(a.app_id, k.ask_id) for a, k in outcome.cancelled])


LATE_US = 10 * 3600 * 1_000_000  # every reservation then over 60 minutes old: stale if of a lower priority


def _compare(part: PartitionState, index: VictimIndex19 | None) -> int:
    """Try every ask that may preempt three ways, without and with stale reservations to cancel
    (YUNIKORN-3092, at ``LATE_US``; the index reads only the old ones, ``expiring``); returns how
    many were compared with the cycle's index."""
    def attempt(a: App, k: Ask, tried: bool, using: VictimIndex19 | None, now_us: int | None) -> tuple[Any, ...]:
        among = expiring(part, now_us) if using is not None and now_us is not None else None
        return _seen(try_preemption_19(part, a, k, tried, now_us=now_us, index=using, stale_among=among))

    compared = compare_attempts(part, index, lambda a, k, tried, using: attempt(a, k, tried, using, None),
                                VictimIndex19)
    compare_attempts(part, index, lambda a, k, tried, using: attempt(a, k, tried, using, LATE_US), VictimIndex19)
    return compared


@st.composite
def configs_19(draw: st.DrawFn) -> str:
    """``test_preemption_properties``' trees under yunikorn-1.9, a parent sometimes guaranteed too
    (the 1.9 rules read remaining guarantees down the lineage: YUNIKORN-2769, 3240)."""
    config = draw(configs()).replace("  - name: default\n", "  - name: default\n    rules: yunikorn-1.9\n", 1)
    for parent in ("left", "right"):
        g = draw(st.sampled_from((0, 0, 1000, 3000)))  # asks hold 500–2000 of each
        if g:
            head = f"- name: {parent}\n"
            at = config.index(head)
            indent = config[config.rindex("\n", 0, at) + 1:at]
            config = config.replace(head, f"{head}{indent}  resources: {{guaranteed: {{vcore: {g}, memory: {g}}}}}\n",
                                    1)
    return config


def _summary(index: VictimIndex19) -> tuple[Any, ...]:
    """What the index holds: each leaf's candidates and per-(priority, types) counts and sums, the node order."""
    holding = held_by_leaf(index, lambda entry: cast(LeafCandidates19, entry).by_key)
    part = index.part
    orders = {(app_id, ask_id): list(index.node_order(part.apps[app_id].asks[ask_id], set()))
              for app_id, a in part.apps.items() for ask_id in a.asks}
    return holding, index.positions, orders


CHECKS_19 = IndexCheck(lambda memo: memo.victims_19, VictimIndex19, _summary, _compare)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs_19(), storms(), st.integers(1, 4))
def test_the_cycle_index_finds_what_a_walk_from_scratch_finds(config: str, steps: list[tuple[Any, ...]],
                                                              nodes: int) -> None:
    storm_through(_Driver(config, CHECKS_19), steps, nodes)


class _SlowDriver19(_Driver):
    """Cycles 3 s of log time apart: asks that fit nowhere are old enough to reserve nodes, which
    the comparisons at ``LATE_US`` may then cancel as stale."""

    def cycle(self) -> None:
        self.now_us += 3_000_000
        super().cycle()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs_19(), storms(), st.integers(1, 4))
def test_with_stale_reservations_the_index_finds_what_a_walk_from_scratch_finds(
        config: str, steps: list[tuple[Any, ...]], nodes: int) -> None:
    storm_through(_SlowDriver19(config, CHECKS_19), steps, nodes)


def test_the_node_walk_skips_held_nodes_but_the_asks_own_and_sees_a_node_come_back() -> None:
    drv = _Driver(root_queues("""
        - name: default
    """).replace("  - name: default\n", "  - name: default\n    rules: yunikorn-1.9\n", 1), CHECKS_19)
    drv.submit(*(node(f"n{i}", 3000, 3000) for i in range(4)), app("a", "root.default"),
               ask("a", "k0", vcore=9000, memory=9000), ask("a", "k1", vcore=9000, memory=9000))
    part = drv.engine.state.partitions["default"]
    owner = part.apps["a"]
    held, other_ask = owner.asks["k0"], owner.asks["k1"]
    index = VictimIndex19(part)
    part.reserve(owner, held, part.nodes["n0"], 1, "no-fit", None)
    assert list(index.node_order(other_ask, set())) == ["n1", "n2", "n3"]  # n0 joins the skipped prefix
    assert list(index.node_order(held, set())) == ["n0", "n1", "n2", "n3"]
    assert list(index.node_order(other_ask, {"n0"})) == ["n0", "n1", "n2", "n3"]  # a stale reservation cancelled
    part.unreserve(owner, held, "removed", None)
    index.nodes_returned()
    assert list(index.node_order(other_ask, set())) == ["n0", "n1", "n2", "n3"]
