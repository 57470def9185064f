"""The order the next cycle tries a partition's pending asks in: reserved asks first, then the walk from root.

Built from the very orders the cycle walks by, not a copy of them: the reserved step's
(``scheduler.core.reservations``: queues by ``sort_queues``, apps in the leaf's candidate
order, each app's reserved asks by ``Ask.sort_key``), then the step's walk
(``scheduler.core.cycle``: children by ``child_order``, the leaf's ``candidates``, each
app's ``sorted_asks``). It is the order of the next cycle's *first* step: each allocation
re-sorts what it changed, so later steps may try the rest in another order. An ask held by
a gate (stateaware, maxapplications, a limit) keeps its place here; the walk passes over it.
"""

from __future__ import annotations

from collections.abc import Iterator

from scheduler.core.objects import App, Ask
from scheduler.core.partition import PartitionState
from scheduler.core.queues import QueueNode
from scheduler.core.reservations import _reserved_by_app
from scheduler.core.sorting import child_order, sort_queues

Tried = tuple[App, Ask]


def try_order(part: PartitionState) -> list[Tried]:
    """Every pending ask of the partition once, in the order the next cycle's first step tries them."""
    seen: set[tuple[str, str]] = set()
    out: list[Tried] = []
    for app, ask in (*_reserved(part), *_walk(part, part.root)):
        key = (app.app_id, ask.ask_id)
        if key not in seen:
            seen.add(key)
            out.append((app, ask))
    return out


def _reserved(part: PartitionState) -> Iterator[Tried]:
    if not part.reservations:
        return
    by_app = _reserved_by_app(part, part.reservations)

    def walk(queue: QueueNode) -> Iterator[Tried]:
        if queue.is_leaf:
            for _, app_id in part.candidates[queue.path]:
                for ask in by_app.get(app_id, ()):
                    yield part.apps[app_id], ask
            return
        for child in sort_queues(queue.children, queue.sort_priority):
            yield from walk(child)

    yield from walk(part.root)


def _walk(part: PartitionState, queue: QueueNode) -> Iterator[Tried]:
    if queue.is_leaf:
        for _, app_id in part.candidates[queue.path]:
            app = part.apps[app_id]
            for ask in app.sorted_asks:
                yield app, ask
        return
    for child in child_order(queue.children, queue.sort_priority).sorted():
        yield from _walk(part, child)
