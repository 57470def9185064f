"""The queue order is today's (tests/oracles/queue_order.py) on random small trees, whether
sorted afresh (``sort_queues``) or kept across the steps of a cycle (``QueueOrder`` for wide
parents, ``KeptOrder`` for parents with few children)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.queues import QueueNode
from scheduler.core.sorting import KeptOrder, QueueOrder, sort_queues
from tests.oracles.queue_order import sort_queues_before

small = st.integers(min_value=0, max_value=3)
vector = st.dictionaries(st.sampled_from(["vcore", "memory", "gpu"]), small, max_size=3)
child_values = st.tuples(st.integers(min_value=0, max_value=2), vector, vector, st.sampled_from([{}, {"vcore": 2}]))


Values = tuple[int, dict[str, int], dict[str, int], dict[str, int]]
Order = type[QueueOrder] | type[KeptOrder]
ORDERS = pytest.mark.parametrize("kept", [QueueOrder, KeptOrder])


def tree(values: list[Values]) -> list[QueueNode]:
    root = QueueNode(name="root", path="root", parent=None, is_leaf=False, order=0)
    children = []
    for i, (priority, pending, allocated, guaranteed) in enumerate(values):
        q = QueueNode(name=f"q{i}", path=f"root.q{i}", parent=root, is_leaf=True, order=i, guaranteed=guaranteed)
        set_values(q, priority, pending, allocated)
        children.append(q)
    root.children = children
    return children


def same_as_fresh(order: QueueOrder | KeptOrder, children: list[QueueNode], sort_priority: bool) -> None:
    """The order equals the oracle's; a ``KeptOrder``'s kept keys and tie count equal a fresh build's."""
    assert order.sorted() == sort_queues_before(children, sort_priority)
    if isinstance(order, KeptOrder):
        fresh = KeptOrder(children, sort_priority)
        assert [(e.q, e.prio, e.share, e.order) for e in order.entries] == [
            (e.q, e.prio, e.share, e.order) for e in fresh.entries]
        assert order.items == fresh.items
        assert order.ties == fresh.ties


def set_values(q: QueueNode, priority: int, pending: dict[str, int], allocated: dict[str, int]) -> None:
    q.priority = priority
    q.pending = {k: v for k, v in pending.items() if v}
    q.allocated = {k: v for k, v in allocated.items() if v}
    q._share = None


@settings(max_examples=400, deadline=None)
@given(st.lists(child_values, max_size=24), st.booleans())
def test_sort_queues_gives_todays_order(values: list[Values], sort_priority: bool) -> None:
    children = tree(values)
    assert sort_queues(children, sort_priority) == sort_queues_before(children, sort_priority)


@ORDERS
@settings(max_examples=300, deadline=None)
@given(st.lists(child_values, min_size=1, max_size=20), st.booleans(),
       st.lists(st.tuples(st.integers(min_value=0, max_value=8), st.integers(min_value=0, max_value=2), vector,
                          vector), max_size=12))
def test_queue_order_kept_across_changes_gives_todays_order(
    kept: Order, values: list[Values], sort_priority: bool,
    changes: list[tuple[int, int, dict[str, int], dict[str, int]]],
) -> None:
    children = tree(values)
    order = kept(children, sort_priority)
    same_as_fresh(order, children, sort_priority)
    for index, priority, pending, allocated in changes:
        q = children[index % len(children)]
        set_values(q, priority, pending, allocated)
        order.changed(q)
        same_as_fresh(order, children, sort_priority)


@ORDERS
@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 0, 0, 1]), vector), min_size=1, max_size=20), st.booleans(),
       st.lists(st.tuples(st.booleans(), st.integers(min_value=0, max_value=8), vector), max_size=24))
def test_queue_order_as_a_cycle_drains_the_first_queue_gives_todays_order(
    kept: Order, values: list[tuple[int, dict[str, int]]], sort_priority: bool,
    steps: list[tuple[bool, int, dict[str, int]]],
) -> None:
    """A cycle's steps: the first queue in the order gets an allocation (its pending shrinks
    or ends), now and then another child changes. Mostly one priority and no guarantee, so
    most children share one run of equal key (where the insertion pass matters)."""
    children = tree([(priority, pending, {}, {}) for priority, pending in values])
    order = kept(children, sort_priority)
    for first, index, pending in steps:
        current = order.sorted()
        if first and current:
            q = current[0]
            shrunk = {k: v - 1 for k, v in q.pending.items()} if index % 2 else {}
            set_values(q, q.priority, shrunk, q.allocated)
        else:
            q = children[index % len(children)]
            set_values(q, q.priority, pending, q.allocated)
        order.changed(q)
        same_as_fresh(order, children, sort_priority)


few_vectors = st.sampled_from([{}, {"vcore": 1}, {"vcore": 2}, {"vcore": 1, "memory": 2}, {"memory": 1},
                               {"vcore": 2, "memory": 2}, {"gpu": 1}])


@settings(max_examples=300, deadline=None)
@given(st.lists(few_vectors, min_size=1, max_size=40), st.booleans(),
       st.lists(st.tuples(st.integers(min_value=0, max_value=39), few_vectors), max_size=30))
def test_one_wide_run_kept_in_blocks_gives_todays_order(
    pendings: list[dict[str, int]], sort_priority: bool, changes: list[tuple[int, dict[str, int]]],
) -> None:
    """Every child in one run (nothing allocated, one priority), pending one of a few vectors,
    some comparable, some not: members leave the run (nothing pending), come back with
    another vector, make blocks, join them and leave them first, in the middle or last."""
    children = tree([(0, pending, {}, {}) for pending in pendings])
    order = QueueOrder(children, sort_priority)
    same_as_fresh(order, children, sort_priority)
    for index, pending in changes:
        q = children[index % len(children)]
        set_values(q, 0, pending, {})
        order.changed(q)
        same_as_fresh(order, children, sort_priority)
