"""The node a waiting ask reserves, found without scanning every node again (a partition's cache).

The node an ask that fits nowhere reserves (``scheduler.core.reservations``): among the
schedulable, unreserved nodes (the node index) whose capacity holds the request, the lowest
``fit_in_score``, the first in node order on ties. Node order is the index's, ascending
(policy key, node id), so the answer is the least ``(fit score, policy key, node id)``.
That scan costs one score per node; while a cluster fills up every new reservation paid
it (6,666 reservations over 6,666 nodes: 22 M scores, 70% of a replay verify).

``ReserveCandidates`` keeps, per request shape, a heap of those triples, built by one scan
the first time the shape is asked for. The partition owns it and reports every node it
re-indexes or removes (``node_changed``: an allocation, a release, a reservation made or
ended, a node added, updated or removed), which gets a new version and, if it is in the
index, a new entry with its new scores. An entry whose version is not its node's current
one is stale and dropped when it surfaces, so the heap's least current entry is exactly
the scan's answer, in every cycle and between them. A heap that has grown past twice the
index (stale entries) is rebuilt by a scan, or dropped when its shape was not asked for
since the last rebuild; so are all heaps when more than ``MAX_SHAPES`` shapes are kept.

Example: nodes ``a`` (fit score 0.5, key 0.2) and ``b`` (0.5, 0.1) tie on the score;
``b`` comes first in node order, so ``b`` is reserved — and leaves the index: reported
changed, its entry goes stale, and the next ask of that shape gets ``a``.
"""

from __future__ import annotations

from heapq import heapify, heappop, heappush

from events.resources import Resources, fits
from projections.node_index import NodeIndex
from scheduler.core.asks import Shape
from scheduler.core.objects import Node

Entry = tuple[float, float, str, int]  # fit score, policy key, node id, the node's version
MAX_SHAPES = 64  # request shapes kept at once (each costs a push per node change)


def node_fit_in_score(request: Resources, node: Node) -> float:
    """YuniKorn ``FitInScore`` of ``request`` on ``node``'s availability, read in place.

    Per requested type the fraction missing (1 when nothing is available); 0 when it fits.

    >>> node = Node("n", "p", {"vcore": 4000, "memory": 4000}, {}, True, {}, 0, allocated={"vcore": 3000})
    >>> node_fit_in_score({"vcore": 4000, "memory": 1000}, node)
    0.75
    """
    capacity, allocated, occupied = node.capacity, node.allocated, node.occupied
    score = 0.0
    for name, want in request.items():
        if want <= 0:
            continue
        have = capacity.get(name, 0) - allocated.get(name, 0) - occupied.get(name, 0)
        if have <= 0:
            score += 1
        elif want > have:
            score += (want - have) / want
    return score


class ReserveCandidates:
    """Per request shape, the reservable nodes by (fit score, node order); kept by a partition."""

    def __init__(self) -> None:
        self._heaps: dict[Shape, list[Entry]] = {}
        self._requests: dict[Shape, Resources] = {}
        self._asked: set[Shape] = set()  # shapes asked for since their heap was last built
        self._versions: dict[str, int] = {}  # node id → changes reported (absent: none)

    def node_changed(self, index: NodeIndex, node: Node) -> None:
        """``node`` changed (or left): its entries are stale; a current one if it is reservable."""
        if not self._heaps:
            return
        node_id = node.node_id
        version = self._versions.get(node_id, 0) + 1
        self._versions[node_id] = version
        key = index.key(node_id)
        if key is None:
            return  # reserved, cordoned or removed: not a candidate
        capacity = node.capacity
        limit = 2 * len(index) + 64
        for shape, heap in list(self._heaps.items()):
            request = self._requests[shape]
            if fits(request, capacity):
                heappush(heap, (node_fit_in_score(request, node), key, node_id, version))
                if len(heap) > limit:  # mostly stale: rebuild, or forget a shape nobody asks for
                    self._compact(shape)

    def best(self, index: NodeIndex, nodes: dict[str, Node], shape: Shape, request: Resources) -> Node | None:
        """The node to reserve for ``request`` (of items ``shape``) now, or None when no node can hold it."""
        heap = self._heaps.get(shape)
        if heap is None:
            if len(self._heaps) >= MAX_SHAPES:
                self._heaps.clear()
                self._requests.clear()
                self._asked.clear()
            heap = self._heaps[shape] = self._build(index, nodes, request)
            self._requests[shape] = dict(request)
        self._asked.add(shape)
        node_id = self._current(heap)
        return None if node_id is None else nodes[node_id]

    def exhausted(self, shape: Shape) -> bool:
        """No node can be reserved for requests of ``shape`` now: ``best`` gives None.

        False when the shape was never asked for (unknown here).
        """
        heap = self._heaps.get(shape)
        return heap is not None and self._current(heap) is None

    def entries(self) -> int:
        """Heap entries held, stale ones included (each heap stays under twice the index, plus 64)."""
        return sum(len(heap) for heap in self._heaps.values())

    def _current(self, heap: list[Entry]) -> str | None:
        """The node of the heap's least current entry (stale ones above it dropped), or None."""
        versions = self._versions
        while heap:
            _, _, node_id, version = heap[0]
            if version == versions.get(node_id, 0):
                return node_id
            heappop(heap)
        return None

    def _compact(self, shape: Shape) -> None:
        if shape not in self._asked:
            del self._heaps[shape]
            del self._requests[shape]
            return
        self._asked.discard(shape)
        heap = self._heaps[shape]
        heap[:] = [entry for entry in heap if entry[3] == self._versions.get(entry[2], 0)]
        heapify(heap)

    def _build(self, index: NodeIndex, nodes: dict[str, Node], request: Resources) -> list[Entry]:
        versions = self._versions
        heap: list[Entry] = []
        for node_id in index.ordered():
            node = nodes[node_id]
            if fits(request, node.capacity):
                key = index.key(node_id)
                assert key is not None
                heap.append((node_fit_in_score(request, node), key, node_id, versions.get(node_id, 0)))
        heapify(heap)
        return heap
