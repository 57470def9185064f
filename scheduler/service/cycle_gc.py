"""Cyclic garbage collection at cycle boundaries: the live service collects between cycles, not inside them.

Why: a cycle makes tens of thousands of short-lived containers — decoded events, outputs,
their encodings — and reference counting frees them all when the cycle ends. CPython
collects its young generation whenever net allocations pass a threshold, so collections
land mid-cycle, traverse those transient objects and promote the survivors for nothing
(about 6% of the service's time on the reference workload, 11 collections of ~27 ms).
Between cycles the young generation holds only what the cycle kept (new state), so the
same collection costs a fraction.

Inside a cycle the automatic threshold is raised to ``ceiling`` (a safety net for a huge
cycle). ``after_cycle`` then collects as CPython would: the young generation once it has
grown past ``young``; with it the middle one every ``middle`` young collections; and the
whole heap every ``old`` middle collections, but only once the old generation has grown by
a quarter since the last full collection (CPython 3.11's rule that keeps full collections
linear on a growing heap).

Process-wide state: one collector per process (``run`` opens it around all its services).
"""

from __future__ import annotations

import gc
from types import TracebackType

YOUNG = 50_000  # net new containers before a young collection (scheduler.service.gc_thresholds's threshold)
MIDDLE = 20
OLD = 10
CEILING = 1_000_000  # automatic young collections inside a cycle happen only past this


class CycleCollector:
    """Moves young/middle/full collections to cycle boundaries while open (a context manager).

    >>> with CycleCollector(young=10) as collector:
    ...     kept = [[] for _ in range(100)]  # what a cycle adds to the state
    ...     collector.after_cycle() is not None, collector.after_cycle()
    (True, None)
    """

    def __init__(self, *, young: int = YOUNG, middle: int = MIDDLE, old: int = OLD, ceiling: int = CEILING) -> None:
        self.young, self.middle, self.old, self.ceiling = young, middle, old, ceiling
        self._previous: tuple[int, int, int] | None = None
        self._middles_since_full = 0
        self._old_after_full = 0

    def __enter__(self) -> CycleCollector:
        self._previous = gc.get_threshold()
        gc.set_threshold(self.ceiling, self.middle, self.old)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if self._previous is not None:
            gc.set_threshold(*self._previous)
            self._previous = None

    def after_cycle(self) -> int | None:
        """Collect what is due now that the cycle's transient objects are gone; the generation, or None."""
        young, middles, _ = gc.get_count()
        if young < self.young:
            return None
        generation = 0
        if middles >= self.middle:
            generation = 1
            self._middles_since_full += 1
            if self._middles_since_full >= self.old and self._old_grew_by_a_quarter():
                generation = 2
        gc.collect(generation)
        if generation == 2:
            self._middles_since_full = 0
            self._old_after_full = len(gc.get_objects(2))
        return generation

    def _old_grew_by_a_quarter(self) -> bool:
        return len(gc.get_objects(2)) - self._old_after_full > self._old_after_full / 4
