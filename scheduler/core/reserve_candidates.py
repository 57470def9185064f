"""The node a waiting ask reserves, found without scanning every node again (a partition's cache).

The node an ask that fits nowhere reserves (``scheduler.core.reservations``): among the
schedulable, unreserved nodes (the node index) whose capacity holds the request, the lowest
``fit_in_score``, the first in node order on ties. Node order is the index's, ascending
(policy key, node id), so the answer is the least ``(fit score, policy key, node id)``.

**Node classes.** Both scores are functions of a node's capacity and available resources
alone, so the indexed nodes are grouped in classes of equal ``(capacity, indexed_available)``
items, in their dicts' order (the fit score sums floats in that order):
within a class the answer is its least node id, and over the classes the least
``(fit score, policy key, least id)``. A full cluster of like nodes is a handful of classes,
however many nodes it has; a new request shape costs a look per class, not per node.
Classes are grouped by capacity, so a shape no node's capacity holds (an ask bigger than
any node) costs a look per distinct capacity.

**Per shape, a lazy heap.** Each request shape asked for keeps a heap of class entries
``(fit score, policy key, least id, class version)``. A class gets a new version whenever a
node joins or leaves it; an entry whose version is not current is stale and dropped when it
surfaces. Node changes do not touch the heaps: each appends the classes it changed to a
log, and a heap takes in the log since its last look when it is next asked (each changed
class pushed once), or is rebuilt from the classes when that backlog is longer than the
classes are many. So a node change costs O(1), a look costs what changed since the shape's
last look (at most one pass over the classes), and a shape nobody asks for costs nothing.
There is no cap on the shapes kept: the log keeps what the longest-lagging useful heap
needs, and a heap so far behind that it would be rebuilt anyway is forgotten when the log
is trimmed (memory only: its next look rebuilds it, as it would have).

The classes are kept only while some shape is asked for (a cluster with room never pays
for them); they are built from the index at the first look.

Example: nodes ``a`` (fit score 0.5, key 0.2) and ``b`` (0.5, 0.1) tie on the score;
``b`` comes first in node order, so ``b`` is reserved — and leaves the index: its class
loses it (a new version), and the next ask of that shape gets ``a``.
"""

from __future__ import annotations

from heapq import heapify, heappop, heappush
from typing import Final, final

from events.resources import Resources, fits
from projections.node_index import NodeIndex
from scheduler.core.asks import Shape
from scheduler.core.objects import Node

Entry = tuple[float, float, str, int]  # fit score, policy key, least node id, the class's version
# A node's capacity and available items in their dicts' order: the fit score sums in that order.
ClassKey = tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]
SLACK: Final = 64  # log entries and stale heap entries tolerated beyond the class count


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


@final
class _Class:
    """Indexed nodes of one capacity and availability: their ids, the least first (a lazy heap)."""

    __slots__ = ("available", "capacity", "class_key", "ids", "key", "members", "version")

    def __init__(self, class_key: ClassKey, key: float) -> None:
        self.class_key = class_key
        self.capacity: Resources = dict(class_key[0])
        self.available: Resources = dict(class_key[1])
        self.key = key  # the index's policy key of every member
        self.members: set[str] = set()
        self.ids: list[str] = []  # a heap of ids; one not in ``members`` is stale
        self.version = 0

    def least(self) -> str:
        """The least member id (the class is not empty)."""
        ids, members = self.ids, self.members
        while ids[0] not in members:
            heappop(ids)
        return ids[0]

    def add(self, node_id: str) -> None:
        self.members.add(node_id)
        heappush(self.ids, node_id)
        if len(self.ids) > 2 * len(self.members) + SLACK:
            self.ids = sorted(self.members)  # a sorted list is a heap


@final
class _ShapeHeap:
    """One request shape's heap of class entries and how much of the change log it has taken in."""

    __slots__ = ("heap", "position", "request")

    def __init__(self, request: Resources) -> None:
        self.request = request
        self.heap: list[Entry] = []
        self.position = 0  # absolute position in the change log up to which ``heap`` is current


class ReserveCandidates:
    """Per request shape, the reservable node with the least (fit score, node order); kept by a partition."""

    def __init__(self) -> None:
        self._shapes: dict[Shape, _ShapeHeap] = {}  # in the order of their last look (oldest first)
        self._active = False  # classes kept (some shape was asked for since they were last dropped)
        self._classes: dict[ClassKey, _Class] = {}
        self._by_capacity: dict[tuple[tuple[str, int], ...], list[_Class]] = {}
        self._node_class: dict[str, _Class] = {}
        self._current: dict[int, _Class] = {}  # a live class's current version → the class
        self._versions = 0
        self._log: list[_Class] = []  # classes changed, from absolute position ``_base`` on
        self._base = 0

    # -- node changes --------------------------------------------------------------

    def node_changed(self, index: NodeIndex, nodes: dict[str, Node], node: Node) -> None:
        """``node`` changed (re-indexed): it moves to the class of its capacity and availability."""
        if not self._active:
            return
        node_id = node.node_id
        old = self._node_class.get(node_id)
        key = index.key(node_id)
        if key is None:  # reserved or cordoned: not a candidate
            if old is not None:
                self._leave(old, node_id)
                self._trim()
            return
        class_key: ClassKey = (tuple(node.capacity.items()), tuple(node.indexed_available.items()))
        new = self._classes.get(class_key)
        if new is old and old is not None:
            return  # the same capacity and availability: nothing a heap reads changed
        if old is not None:
            self._leave(old, node_id)
        if new is None:
            new = self._new_class(class_key, key)
        new.add(node_id)
        self._node_class[node_id] = new
        self._bump(new)
        self._trim()

    def node_removed(self, node_id: str) -> None:
        """``node_id`` left the partition."""
        old = self._node_class.get(node_id)
        if old is not None:
            self._leave(old, node_id)
            self._trim()

    def _new_class(self, class_key: ClassKey, key: float) -> _Class:
        c = self._classes[class_key] = _Class(class_key, key)
        group = self._by_capacity.get(class_key[0])
        if group is None:
            group = self._by_capacity[class_key[0]] = []
        group.append(c)
        return c

    def _leave(self, c: _Class, node_id: str) -> None:
        c.members.discard(node_id)
        del self._node_class[node_id]
        if c.members:
            self._bump(c)
            return
        del self._current[c.version]  # its entries go stale
        del self._classes[c.class_key]
        cap_key = c.class_key[0]
        group = self._by_capacity[cap_key]
        group.remove(c)
        if not group:
            del self._by_capacity[cap_key]

    def _bump(self, c: _Class) -> None:
        self._current.pop(c.version, None)
        self._versions += 1
        c.version = self._versions
        self._current[c.version] = c
        self._log.append(c)

    def _trim(self) -> None:
        """Forget the log no heap worth keeping needs (and heaps so far behind they would be rebuilt)."""
        log = self._log
        keep = len(self._classes) + SLACK
        if len(log) <= 2 * keep:
            return
        cut = self._base + len(log) - keep
        shapes = self._shapes
        while shapes:
            shape = next(iter(shapes))
            if shapes[shape].position >= cut:
                break
            del shapes[shape]  # oldest look first: its backlog exceeds the classes, a rebuild either way
        del log[: cut - self._base]
        self._base = cut
        if not shapes:
            self._deactivate()

    def _deactivate(self) -> None:
        self._active = False
        self._classes.clear()
        self._by_capacity.clear()
        self._node_class.clear()
        self._current.clear()
        self._log.clear()

    def _activate(self, index: NodeIndex, nodes: dict[str, Node]) -> None:
        """Group the indexed nodes in classes (no heap exists yet, so nothing is logged)."""
        self._active = True
        for node_id in index.ordered():
            node = nodes[node_id]
            class_key: ClassKey = (tuple(node.capacity.items()), tuple(node.indexed_available.items()))
            c = self._classes.get(class_key)
            if c is None:
                key = index.key(node_id)
                assert key is not None
                c = self._new_class(class_key, key)
            c.members.add(node_id)
            c.ids.append(node_id)
            self._node_class[node_id] = c
        for c in self._classes.values():
            heapify(c.ids)
            self._versions += 1
            c.version = self._versions
            self._current[c.version] = c
        self._log.clear()
        self._base = 0

    # -- looks ---------------------------------------------------------------------

    def best(self, index: NodeIndex, nodes: dict[str, Node], shape: Shape, request: Resources) -> Node | None:
        """The node to reserve for ``request`` (of items ``shape``) now, or None when no node can hold it."""
        if not self._active:
            self._activate(index, nodes)
        kept = self._shapes.pop(shape, None)
        if kept is None:
            kept = _ShapeHeap(dict(request))
            self._rebuild(kept)
        else:
            self._catch_up(kept)
        self._shapes[shape] = kept  # the newest look goes last
        node_id = self._least(kept.heap)
        return None if node_id is None else nodes[node_id]

    def exhausted(self, shape: Shape, nodes: dict[str, Node]) -> bool:
        """No node can be reserved for requests of ``shape`` now: ``best`` gives None.

        False when the shape's heap is not kept (unknown here).
        """
        kept = self._shapes.pop(shape, None)
        if kept is None:
            return False
        self._catch_up(kept)
        self._shapes[shape] = kept  # the newest look goes last (``_trim`` relies on the order)
        return self._least(kept.heap) is None

    def entries(self) -> int:
        """Heap entries held, stale ones included (each heap stays under twice the classes, plus 64)."""
        return sum(len(kept.heap) for kept in self._shapes.values())

    def shapes_kept(self) -> int:
        """Request shapes with a heap."""
        return len(self._shapes)

    def _catch_up(self, kept: _ShapeHeap) -> None:
        """Take in the classes changed since the heap's last look, or rebuild it when that is cheaper."""
        end = self._base + len(self._log)
        if kept.position == end:
            return
        backlog = end - kept.position
        if backlog > len(self._classes) or len(kept.heap) + backlog > 2 * len(self._classes) + SLACK:
            self._rebuild(kept)
            return
        request, heap, current = kept.request, kept.heap, self._current
        pushed: set[int] = set()
        for c in self._log[kept.position - self._base:]:
            version = c.version
            if version in pushed or current.get(version) is not c:
                continue  # pushed already, or emptied since
            pushed.add(version)
            if fits(request, c.capacity):
                heappush(heap, (fit_in_score(request, c.available), c.key, c.least(), version))
        kept.position = end

    def _rebuild(self, kept: _ShapeHeap) -> None:
        request = kept.request
        heap: list[Entry] = []
        for group in self._by_capacity.values():
            if not fits(request, group[0].capacity):
                continue
            for c in group:
                heap.append((fit_in_score(request, c.available), c.key, c.least(), c.version))
        heapify(heap)
        kept.heap = heap
        kept.position = self._base + len(self._log)

    def _least(self, heap: list[Entry]) -> str | None:
        """The node id of the heap's least current entry (stale ones above it dropped), or None."""
        current = self._current
        while heap:
            if heap[0][3] in current:
                return heap[0][2]
            heappop(heap)
        return None
