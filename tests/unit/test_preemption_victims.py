"""Property: a preemption attempt read from the cycle's victim index finds what ``find_victims`` finds.

``scheduler.core.preemption_victims.VictimIndex`` is built at a cycle's first attempt and then
told of every step (allocations, victims taken, nodes coming back). At every step of random
preemption workloads (``test_preemption_properties``' generators), every ask that may preempt
is tried three ways — through the cycle's own index as the steps left it, through an index
built now, and from scratch — and the three outcomes (node, victims, every node tried, the
reason of a failure) must be the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import orjson
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from events.times import format_time
from scheduler.core.cycle import CycleMemo, begin_cycle, cycle_steps, fits_queue_headroom
from scheduler.core.engine import Engine
from scheduler.core.objects import App, Ask
from scheduler.core.partition import PartitionState
from scheduler.core.preemption import Outcome, try_preemption
from scheduler.core.preemption_victims import LeafVictims, VictimIndex
from tests.sim import app, ask, node, root_queues
from tests.unit.test_preemption_properties import configs, fill, other, play, urgent


def _seen(outcome: Outcome) -> tuple[Any, ...]:
    return outcome.node, outcome.victims, outcome.reason, [(t.node_id, t.start_index, t.victims) for t in outcome.tried]


def _compare(part: PartitionState, index: VictimIndex | None) -> int:
    """Try every ask that may preempt three ways; returns how many were compared."""
    return compare_attempts(part, index, lambda a, k, tried, using: _seen(try_preemption(part, a, k, tried,
                                                                                          index=using)), VictimIndex)


def compare_attempts(part: PartitionState, index: Any, attempt: Callable[[App, Ask, bool, Any], tuple[Any, ...]],
                     fresh: Callable[[PartitionState], Any]) -> int:
    """Try every ask that may preempt from scratch (``attempt(app, ask, nodes_tried, None)``),
    through a ``fresh`` index and through ``index`` (the cycle's, if any): the same outcome each
    time. Returns how many were compared with ``index``."""
    compared = 0
    for a in part.apps.values():
        for k in a.asks.values():
            if not k.preempt_other or k.preempt_triggered or k.required_node is not None:
                continue
            tried = fits_queue_headroom(part, a.queue, k.resources)
            scratch = attempt(a, k, tried, None)
            assert attempt(a, k, tried, fresh(part)) == scratch
            if index is not None:
                assert attempt(a, k, tried, index) == scratch
                compared += 1
    return compared


@st.composite
def storms(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """Work that fills the nodes, a cycle, then many asks that may preempt in one cycle, then anything."""
    return [*draw(st.lists(fill, min_size=4, max_size=20)), ("cycle",),
            *draw(st.lists(st.one_of(urgent, urgent, fill), min_size=2, max_size=12)), ("cycle",),
            *draw(st.lists(st.one_of(urgent, fill, other), max_size=12))]


Counts = dict[Any, tuple[list[int], dict[str, int]]]  # a leaf's count and sum per key


def held_by_leaf(index: Any, counts: Callable[[Any], Counts]) -> dict[str, Any]:
    """Each leaf's candidates and its non-empty counts and sums per key (1.5: priority; 1.9:
    priority and resource types), the index refreshed first."""
    index.refresh()
    return {path: ([id(a) for a in entry.allocs],
                   {key: (count[0], {k: v for k, v in held.items() if v})
                    for key, (count, held) in counts(entry).items() if count[0]})
            for path, entry in index.entries.items()}


def _summary(index: VictimIndex) -> tuple[Any, ...]:
    """What the index holds: each giving leaf's candidates and per-priority counts and sums."""
    gives = held_by_leaf(index, lambda entry: cast(LeafVictims, entry).by_priority)
    owners = {n.reserved_for for n in index.part.nodes.values()} | {("", "")}
    return gives, index.positions, \
        {o: list(index.node_order(o)) for o in owners if o is not None}


@dataclass(frozen=True)
class IndexCheck:
    """How a rules profile's cycle index is read from the memo, built afresh, summarised and tried."""

    of_memo: Callable[[CycleMemo], Any]
    fresh: Callable[[PartitionState], Any]
    summary: Callable[[Any], tuple[Any, ...]]
    compare: Callable[[PartitionState, Any], int]


CHECKS_15 = IndexCheck(lambda memo: memo.victims, VictimIndex, _summary, _compare)


class _Driver:
    def __init__(self, config: str, checks: IndexCheck = CHECKS_15) -> None:
        self.checks = checks
        self.engine = Engine()
        self.now_us = 0
        self.count = 0
        self.compared = 0
        self.submit({"type": "config.updated", "data": {"yaml": config}})

    def submit(self, *events: dict[str, Any]) -> None:
        for e in events:
            self.count += 1
            self.now_us += 1000
            raw = orjson.dumps({"id": f"in-{self.count}", "source": "test", "time": format_time(self.now_us), **e})
            self.engine.ingest(raw, append_time_us=self.now_us, position=f"inputs:{self.count}")

    def cycle(self) -> None:
        state = self.engine.state
        out: list[Any] = []
        prev = begin_cycle(state, self.now_us, out)
        for part, memo, _, _ in cycle_steps(state, self.now_us, prev, out):
            self.compared += self.check(part, memo)

    def check(self, part: PartitionState, memo: CycleMemo) -> int:
        """Mid-cycle: the cycle's index holds what a fresh one holds and answers as the walk from scratch."""
        index = self.checks.of_memo(memo)
        if index is not None:
            assert self.checks.summary(index) == self.checks.summary(self.checks.fresh(part))
        return self.checks.compare(part, index)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), storms(), st.integers(1, 4))
def test_the_cycle_index_finds_what_a_walk_from_scratch_finds(config: str, steps: list[tuple[Any, ...]],
                                                              nodes: int) -> None:
    storm_through(_Driver(config), steps, nodes)


def storm_through(drv: _Driver, steps: list[tuple[Any, ...]], nodes: int) -> None:
    """Play the steps through ``drv`` (which checks every step), then try every ask once more at the end."""
    play(drv, steps, nodes)
    for part in drv.engine.state.partitions.values():
        drv.checks.compare(part, None)
    event(f"attempts compared mid-cycle: {'none' if not drv.compared else 'some'}")


def test_the_node_walk_skips_reserved_nodes_but_the_asks_own_and_sees_a_node_come_back() -> None:
    drv = _Driver(root_queues("""
        - name: default
    """))
    drv.submit(*(node(f"n{i}", 3000, 3000) for i in range(4)), app("a", "root.default"),
               ask("a", "k0", vcore=9000, memory=9000))
    part = drv.engine.state.partitions["default"]
    owner = part.apps["a"]
    held = owner.asks["k0"]
    index = VictimIndex(part)
    part.reserve(owner, held, part.nodes["n0"], 1, "no-fit", None)
    part.reserve(owner, held, part.nodes["n2"], 1, "no-fit", None)
    assert list(index.node_order(("b", "k9"))) == ["n1", "n2", "n3"]  # n0 joins the skipped prefix
    assert list(index.node_order(("a", "k0"))) == ["n0", "n1", "n2", "n3"]
    part.unreserve(owner, held, "removed", None)
    part.nodes["n0"].reserved_for = None  # both holds end (the partition keeps one per ask)
    index.nodes_returned()
    assert list(index.node_order(("b", "k9"))) == ["n0", "n1", "n2", "n3"]
