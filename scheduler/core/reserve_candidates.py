"""The node a waiting ask reserves, found without scanning every node again (a partition's cache).

The node an ask that fits nowhere reserves (``scheduler.core.reservations``): among the
schedulable, unreserved nodes (the node index) whose capacity holds the request, the lowest
``fit_in_score``, the first in node order on ties. Node order is the index's, ascending
(policy key, node id), so the answer is the least ``(fit score, policy key, node id)``.
That scan costs one score per node; while a cluster fills up every new reservation paid
it (6,666 reservations over 6,666 nodes: 22 M scores, 70% of a replay verify).

``ReserveCandidates`` keeps, per request shape, a heap of those triples, built by one scan
the first time the shape is asked for. The partition owns it and reports every node it
re-indexes (``node_changed``: an allocation, a release, a reservation made or ended, a
node added or updated), which has a new ``Node.version`` by then and, if it is in the
index, gets a new entry with its new scores. An entry whose version is not its node's
current one (or whose node is gone) is stale and dropped when it surfaces, so the heap's
least current entry is exactly the scan's answer, in every cycle and between them. A heap
that has grown past twice the index (stale entries) is compacted, or dropped when its
shape was not asked for since the last compaction; so are all heaps when more than
``MAX_SHAPES`` shapes are kept.

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


def fit_in_score(request: Resources, available: Resources) -> float:
    """YuniKorn 1.5 ``Resource.FitInScore``, called as ``ask.FitInScore(node.available)``
    (``Node.GetFitInScoreForAvailableResource``); the lowest score is reserved.

    Summed over the node's available types with a positive amount: 1 for a type the request
    does not ask for, ``(available - asked) / available`` where the node has more than
    asked, 0 where it has as much or less. Types summed in the dict's order (fixed by the
    log; Go sums in map order, and with two types the order cannot change the sum).
    A node's ``available`` is its ``indexed_available`` here: current for every indexed node.

    >>> fit_in_score({"vcore": 4000, "memory": 1000}, {"vcore": 1000, "memory": 2000})
    0.5
    >>> fit_in_score({"vcore": 1000}, {"vcore": 4000, "memory": 2000, "pods": 0})
    1.75
    """
    score = 0.0
    for name, have in available.items():
        if have <= 0:
            continue
        want = request.get(name, 0)
        if want <= 0:
            score += 1
        elif have > want:
            score += (have - want) / have
    return score


class ReserveCandidates:
    """Per request shape, the reservable nodes by (fit score, node order); kept by a partition."""

    def __init__(self) -> None:
        self._heaps: dict[Shape, list[Entry]] = {}
        self._requests: dict[Shape, Resources] = {}
        self._asked: set[Shape] = set()  # shapes asked for since their heap was last compacted

    def node_changed(self, index: NodeIndex, nodes: dict[str, Node], node: Node) -> None:
        """``node`` changed (its ``version`` with it): a current entry for it if it is reservable."""
        if not self._heaps:
            return
        node_id = node.node_id
        key = index.key(node_id)
        if key is None:
            return  # reserved or cordoned: not a candidate (its older entries are stale)
        capacity, available, version = node.capacity, node.indexed_available, node.version
        limit = 2 * len(index) + 64
        overgrown: list[Shape] = []
        for shape, heap in self._heaps.items():
            request = self._requests[shape]
            if fits(request, capacity):
                heappush(heap, (fit_in_score(request, available), key, node_id, version))
                if len(heap) > limit:  # mostly stale: compact, or forget a shape nobody asks for
                    overgrown.append(shape)
        for shape in overgrown:
            self._compact(shape, nodes)

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
        return _current(heap, nodes)

    def exhausted(self, shape: Shape, nodes: dict[str, Node]) -> bool:
        """No node can be reserved for requests of ``shape`` now: ``best`` gives None.

        False when the shape was never asked for (unknown here).
        """
        heap = self._heaps.get(shape)
        return heap is not None and _current(heap, nodes) is None

    def entries(self) -> int:
        """Heap entries held, stale ones included (each heap stays under twice the index, plus 64)."""
        return sum(len(heap) for heap in self._heaps.values())

    def _compact(self, shape: Shape, nodes: dict[str, Node]) -> None:
        if shape not in self._asked:
            del self._heaps[shape]
            del self._requests[shape]
            return
        self._asked.discard(shape)
        heap = self._heaps[shape]
        heap[:] = [entry for entry in heap if _is_current(entry, nodes)]
        heapify(heap)

    def _build(self, index: NodeIndex, nodes: dict[str, Node], request: Resources) -> list[Entry]:
        heap: list[Entry] = []
        for node_id in index.ordered():
            node = nodes[node_id]
            if fits(request, node.capacity):
                key = index.key(node_id)
                assert key is not None
                heap.append((fit_in_score(request, node.indexed_available), key, node_id, node.version))
        heapify(heap)
        return heap


def _is_current(entry: Entry, nodes: dict[str, Node]) -> bool:
    node = nodes.get(entry[2])
    return node is not None and node.version == entry[3]


def _current(heap: list[Entry], nodes: dict[str, Node]) -> Node | None:
    """The node of the heap's least current entry (stale ones above it dropped), or None."""
    while heap:
        node = nodes.get(heap[0][2])
        if node is not None and node.version == heap[0][3]:
            return node
        heappop(heap)
    return None
