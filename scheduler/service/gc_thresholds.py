"""Process tuning for the long-running commands: cyclic GC thresholds sized for a large heap.

Why: the scheduler state is a large, long-lived object graph (one app, ask and dict per
pending request), and CPython's default threshold (a young collection every 700 net
container allocations, the old generations re-traversed as they grow) spends a quarter
to a half of the time of decoding and folding inputs, and about a sixth of an allocation
cycle, re-scanning objects that are still alive. Collecting young objects every 50,000
allocations instead makes collections rare; garbage cycles are rare in this code, so the
extra memory held between collections stays small.
Measured in ``benchmarks/RESULTS.md``.

This is shell code (it changes process-wide state); the core never calls it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

GC_THRESHOLDS = (50_000, 20, 10)


@contextmanager
def tuned_gc(thresholds: tuple[int, int, int] = GC_THRESHOLDS) -> Iterator[None]:
    """Run the body with the scheduler's GC thresholds; the previous ones come back after."""
    previous = gc.get_threshold()
    gc.set_threshold(*thresholds)
    try:
        yield
    finally:
        gc.set_threshold(*previous)
