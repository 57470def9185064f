"""The cycle-boundary collector: no young collection inside a cycle below the ceiling, cyclic garbage
collected between cycles, full collections only as the old generation grows, thresholds restored."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from scheduler.service.cycle_gc import CycleCollector


class Node:
    """A container that can take part in a reference cycle."""

    def __init__(self) -> None:
        self.other: Node | None = None


def cyclic_garbage() -> weakref.ref[Node]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generation of every collection CPython runs while the test does."""
    seen: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.collect()
    gc.callbacks.append(note)
    try:
        yield seen
    finally:
        gc.callbacks.remove(note)


def settled(collections: list[int]) -> None:
    """Start from zero counts (a full collection) and forget it: CPython may have run one between
    the fixture and the test's collector."""
    gc.collect()
    collections.clear()


def test_no_collection_inside_a_cycle_below_the_ceiling(collections: list[int]) -> None:
    with CycleCollector(young=1_000, ceiling=200_000):
        settled(collections)
        cycle_objects = [[i] for i in range(50_000)]  # 50 times the young threshold, all alive
        assert collections == []
        del cycle_objects


def test_after_cycle_collects_garbage_cycles_once_due(collections: list[int]) -> None:
    with CycleCollector(young=1_000, ceiling=200_000) as collector:
        settled(collections)
        garbage = cyclic_garbage()
        assert collector.after_cycle() is None and garbage() is not None  # not yet due
        kept = [[i] for i in range(2_000)]
        assert collector.after_cycle() == 0
        assert garbage() is None, "the reference cycle was not collected"
        assert collections == [0]
        del kept


def test_middle_and_full_collections_come_at_their_counts(collections: list[int]) -> None:
    kept: list[list[int]] = []
    with CycleCollector(young=100, middle=3, old=2, ceiling=10_000_000) as collector:
        settled(collections)
        generations = []
        for _ in range(12):
            kept.extend([i] for i in range(200))  # the state grows by more than a quarter each time
            generations.append(collector.after_cycle())
    # young, young, young, then middle (3 young ones since the last middle); a full one at the
    # second middle collection, as the old generation has grown by more than a quarter.
    assert generations[:4] == [0, 0, 0, 1]
    assert 2 in generations and generations.index(2) > generations.index(1)
    assert collections == [g for g in generations if g is not None]


def test_full_collection_waits_until_the_old_generation_grew_by_a_quarter() -> None:
    big = [[i] for i in range(200_000)]
    gc.collect()  # `big` is old now
    with CycleCollector(young=100, middle=1, old=1, ceiling=10_000_000) as collector:
        collector._old_after_full = len(gc.get_objects(2))  # as after a full collection
        small = [[i] for i in range(200)]
        assert collector.after_cycle() == 0
        more = [[i] for i in range(200)]
        assert collector.after_cycle() == 1, "a full collection on a heap that grew by 0.2%"
    del big, small, more


def test_thresholds_come_back_after_the_run_even_on_error() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), CycleCollector(ceiling=123_456, middle=7, old=3):
        assert gc.get_threshold() == (123_456, 7, 3)
        raise RuntimeError("boom")
    assert gc.get_threshold() == before
