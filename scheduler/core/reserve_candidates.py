"""The node a waiting ask reserves, found without scanning every node again (a cycle's cache).

The node an ask that fits nowhere reserves (``scheduler.core.reservations``): among the
schedulable, unreserved nodes (the node index) whose capacity holds the request, the lowest
``fit_in_score``, the first in node order on ties. Node order is the index's, ascending
(policy key, node id), so the answer is the least ``(fit score, policy key, node id)``.
That scan costs one score per node; while a cluster fills up every new reservation paid
it (6,666 reservations over 6,666 nodes: 22 M scores, 70% of a replay verify).

``ReserveCandidates`` keeps, per request shape, a heap of those triples, built by one scan
the first time the shape is asked for. Within a cycle (until a node comes back, when the
cycle starts a fresh memo and so a fresh cache) a node changes only by the step that
allocates on it or reserves it; the cycle reports that node (``node_changed``), which
gets a new version and, if it is still in the index, a new entry with its new scores.
An entry whose version is not its node's current one is stale and dropped when it
surfaces, so the heap's least current entry is exactly the scan's answer.

Example: nodes ``a`` (fit score 0.5, key 0.2) and ``b`` (0.5, 0.1) tie on the score;
``b`` comes first in node order, so ``b`` is reserved — and leaves the index: reported
changed, its entry goes stale, and the next ask of that shape gets ``a``.
"""

from __future__ import annotations

from heapq import heapify, heappop, heappush

from events.resources import Resources, fits
from scheduler.core.asks import Shape
from scheduler.core.objects import Node
from scheduler.core.partition import PartitionState

Entry = tuple[float, float, str, int]  # fit score, policy key, node id, the node's version


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
    """Per request shape, the reservable nodes by (fit score, node order); valid for one cycle memo."""

    def __init__(self) -> None:
        self._heaps: dict[Shape, list[Entry]] = {}
        self._requests: dict[Shape, Resources] = {}
        self._versions: dict[str, int] = {}  # node id → changes reported (absent: none)
        # Some shape has had no node to reserve: only then can ``exhausted`` say yes (a flag
        # the cycle reads before asking it, so a cycle with room asks nothing).
        self.any_exhausted = False

    def node_changed(self, part: PartitionState, node: Node) -> None:
        """``node`` was allocated on or reserved: its entries are stale; a current one if it is reservable."""
        if not self._heaps:
            return
        node_id = node.node_id
        version = self._versions.get(node_id, 0) + 1
        self._versions[node_id] = version
        key = part.index.key(node_id)
        if key is None:
            return  # reserved (or cordoned): not a candidate any more
        capacity = node.capacity
        for shape, heap in self._heaps.items():
            request = self._requests[shape]
            if fits(request, capacity):
                heappush(heap, (node_fit_in_score(request, node), key, node_id, version))

    def best(self, part: PartitionState, shape: Shape, request: Resources) -> Node | None:
        """The node to reserve for ``request`` (of items ``shape``) now, or None when no node can hold it."""
        heap = self._heaps.get(shape)
        if heap is None:
            heap = self._heaps[shape] = self._build(part, request)
            self._requests[shape] = dict(request)
        node_id = self._current(heap)
        if node_id is None:
            self.any_exhausted = True
            return None
        return part.nodes[node_id]

    def exhausted(self, shape: Shape) -> bool:
        """No node can be reserved for requests of ``shape`` now: ``best`` gives None.

        False when the shape was never asked for (unknown here).
        """
        heap = self._heaps.get(shape)
        return heap is not None and self._current(heap) is None

    def _current(self, heap: list[Entry]) -> str | None:
        """The node of the heap's least current entry (stale ones above it dropped), or None."""
        versions = self._versions
        while heap:
            _, _, node_id, version = heap[0]
            if version == versions.get(node_id, 0):
                return node_id
            heappop(heap)
        return None

    def _build(self, part: PartitionState, request: Resources) -> list[Entry]:
        index, nodes, versions = part.index, part.nodes, self._versions
        heap: list[Entry] = []
        for node_id in index.ordered():
            node = nodes[node_id]
            if fits(request, node.capacity):
                key = index.key(node_id)
                assert key is not None
                heap.append((node_fit_in_score(request, node), key, node_id, versions.get(node_id, 0)))
        heapify(heap)
        return heap
