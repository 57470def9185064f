"""The queue order as it was before issue 15 (an O(n²) insertion pass per sort): the oracle
the property tests compare ``scheduler.core.sorting.sort_queues`` and ``QueueOrder`` with."""

from __future__ import annotations

from collections.abc import Sequence

from events.resources import dominates, is_positive
from scheduler.core.queues import QueueNode


def sort_queues_before(children: Sequence[QueueNode], sort_priority: bool) -> list[QueueNode]:
    """Primary keys (priority desc, fair share asc, or the reverse), then within a run of
    equal primary keys a stable insertion pass: a queue moves ahead of an earlier one while
    its pending dominates that one's."""
    candidates = [c for c in children if is_positive(c.pending)]
    if len(candidates) < 2:
        return candidates
    keyed: list[tuple[tuple[object, object, int], QueueNode]]
    if sort_priority:
        keyed = sorted(((-q.priority, q.fair_share(), q.order), q) for q in candidates)
    else:
        keyed = sorted(((q.fair_share(), -q.priority, q.order), q) for q in candidates)
    out: list[QueueNode] = []
    keys: list[object] = []
    for full_key, q in keyed:
        key = full_key[:2]
        i = len(out)
        while i > 0 and keys[i - 1] == key and dominates(q.pending, out[i - 1].pending):
            i -= 1
        out.insert(i, q)
        keys.insert(i, key)
    return out
