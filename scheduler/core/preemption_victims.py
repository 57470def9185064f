"""A cycle's index of preemption victims: which leaves give victims, kept as victims are taken.

``preemption.find_victims`` walks the fence's whole subtree and gathers every candidate
victim for one attempt; a preemption storm (many asks attempting in one cycle) paid
O(queues + allocations) per attempt, quadratic in all. Within a cycle nothing is released
and a victim, once taken, stays taken, so this index builds once per cycle, and then only
for what changes:

* the leaves that give victims (``gives``: policy not ``disabled``, something allocated,
  allocated beyond its guarantee), in depth-first configuration order, each with its
  candidate allocations (no required node; in app order, then allocation order) and, per
  priority, how many are not yet taken and what they hold. A leaf an allocation changed
  (``changed``) is re-read at the next attempt; a taken victim (``taken``) leaves its
  priority's count and sum.
* the nodes in id order, and a prefix of them known to be unschedulable or reserved (the
  attempt's node walk skips it, but for the nodes held for the attempting ask itself). A
  node comes back only when a reservation ends, which starts a fresh memo: ``nodes_returned``.

``Givers`` answers an attempt's questions (``preemption.try_preemption``) from the index:
the snapshots, whether removing every victim brings the ask's queue within its guarantee
(one sum per giving leaf: removing victims only lowers usage, so "within after some prefix"
is "within after all of them"), whether an allocation is a candidate, and the candidates
themselves when ``additional_victims`` needs them. ``tests/property/test_preemption_victims.py``
proves the attempt's outcome equal to the one ``find_victims`` gives from scratch.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator
from typing import cast

from events.resources import Resources, min_permissive
from scheduler.core.objects import Allocation, Node
from scheduler.core.partition import PartitionState
from scheduler.core.preemption_queues import (
    QueueSnap,
    check_queue_guarantees,
    duplicate,
    fit_in,
    live_guaranteed,
    live_max,
    snapshot,
)
from scheduler.core.queues import QueueNode


class LeafEntry:
    """One leaf of a victim index: its candidate allocations (no required node; in app order,
    then allocation order), each counted (``_count``, per subclass) while not taken."""

    __slots__ = ("allocs", "queue")

    def __init__(self, part: PartitionState, queue: QueueNode) -> None:
        self.queue = queue
        self.allocs: list[Allocation] = []
        apps = part.apps
        for app_id in queue.apps:
            for alloc in apps[app_id].allocations.values():
                if alloc.required_node is None:
                    self.allocs.append(alloc)
                    if not alloc.preempted:
                        self._count(alloc, 1)

    def _count(self, alloc: Allocation, sign: int) -> None:
        raise NotImplementedError

    def taken(self, alloc: Allocation) -> None:
        """``alloc`` became a victim: it no longer counts."""
        self._count(alloc, -1)


class LeafVictims(LeafEntry):
    """One giving leaf: its candidate allocations and, per priority, [count, resources] of those not taken."""

    __slots__ = ("by_priority",)

    def __init__(self, part: PartitionState, queue: QueueNode) -> None:
        self.by_priority: dict[int, tuple[list[int], dict[str, int]]] = {}
        super().__init__(part, queue)

    def _count(self, alloc: Allocation, sign: int) -> None:
        entry = self.by_priority.get(alloc.priority)
        if entry is None:
            entry = self.by_priority[alloc.priority] = ([0], {})
        entry[0][0] += sign
        total = entry[1]
        for name, value in alloc.resources.items():
            total[name] = total.get(name, 0) + sign * value

    def any_victim(self, priority: int, fenced: bool) -> bool:
        """A candidate not taken whose priority the ask reaches (every one below a fence it passed)."""
        return any(count[0] > 0 and (fenced or p <= priority) for p, (count, _) in self.by_priority.items())

    def total(self, priority: int, fenced: bool) -> dict[str, int]:
        """What the victims for this ask hold together."""
        out: dict[str, int] = {}
        for p, (count, held) in self.by_priority.items():
            if count[0] > 0 and (fenced or p <= priority):
                for name, value in held.items():
                    out[name] = out.get(name, 0) + value
        return out

    def victims(self, priority: int, fenced: bool) -> Iterator[Allocation]:
        """The victims for this ask, in ``find_victims``' order."""
        return (a for a in self.allocs if not a.preempted and (fenced or a.priority <= priority))


def _gives(part: PartitionState, queue: QueueNode) -> bool:
    """``_collect``'s test of a leaf other than the ask's: it may give victims."""
    if queue.preemption_policy == "disabled" or not any(value > 0 for value in queue.allocated.values()):
        return False
    guaranteed = min_permissive(live_guaranteed(queue), live_max(queue, part.cluster_capacity))
    return not fit_in(guaranteed, queue.allocated, True)


def subtree_spans(root: QueueNode) -> tuple[list[QueueNode], dict[str, int], dict[str, int]]:
    """The queues in depth-first configuration order, each queue's position in it, and the
    position after its subtree (a fence's leaves lie in [position, end))."""
    order = list(root.walk())
    position = {q.path: i for i, q in enumerate(order)}
    size = [1] * len(order)
    for i in range(len(order) - 1, 0, -1):
        parent = order[i].parent
        if parent is not None:
            size[position[parent.path]] += size[i]
    return order, position, {q.path: i + size[i] for i, q in enumerate(order)}


class LeafIndex:
    """A cycle's leaves that may give victims (``_entry``, per subclass) in depth-first
    configuration order, each re-read when an allocation changes it, and the node ids in order."""

    def __init__(self, part: PartitionState) -> None:
        self.part = part
        order, self.position, self.end = subtree_spans(part.root)
        self.entries: dict[str, LeafEntry] = {}
        self.positions: list[int] = []  # sorted positions of ``entries``' leaves
        self.at_position: dict[int, LeafEntry] = {}
        for q in order:
            if q.is_leaf:
                self._read(q)
        self.dirty: set[str] = set()
        self.node_ids = sorted(part.nodes)
        self.skip = 0  # node_ids[:skip] are unschedulable or reserved

    def _entry(self, queue: QueueNode) -> LeafEntry | None:
        """The leaf's entry, or None when it gives nothing."""
        raise NotImplementedError

    def _read(self, queue: QueueNode) -> None:
        entry = self._entry(queue)
        if entry is None:
            return
        path = queue.path
        self.entries[path] = entry
        pos = self.position[path]
        insort(self.positions, pos)
        self.at_position[pos] = entry

    def _drop(self, path: str) -> None:
        del self.entries[path]
        pos = self.position[path]
        del self.positions[bisect_left(self.positions, pos)]
        del self.at_position[pos]

    def changed(self, leaf: QueueNode) -> None:
        """An allocation changed ``leaf``: re-read it before the next attempt."""
        self.dirty.add(leaf.path)

    def taken(self, victims: Iterable[Allocation]) -> None:
        """These allocations became victims (already marked preempted)."""
        apps = self.part.apps
        for victim in victims:
            entry = self.entries.get(apps[victim.app_id].queue.path)
            if entry is not None:
                entry.taken(victim)

    def refresh(self) -> None:
        """Re-read the leaves allocations changed since the last attempt."""
        for path in self.dirty:
            queue = self.part.queues.get(path)
            if path in self.entries:
                self._drop(path)
            if queue is not None and queue.is_leaf:
                self._read(queue)
        self.dirty.clear()

    def advance_skip(self) -> int:
        """Extend the prefix of nodes no attempt can use (unschedulable or reserved: within a memo's
        life nodes are only reserved) past every such node now, telling ``_skipped`` of each; its end."""
        nodes, ids = self.part.nodes, self.node_ids
        skip = self.skip
        while skip < len(ids):
            node = nodes[ids[skip]]
            if node.schedulable and node.reserved_for is None:
                break
            self._skipped(node, skip)
            skip += 1
        self.skip = skip
        return skip

    def _skipped(self, node: Node, place: int) -> None:
        """``node``, at ``place`` in the node order, joined the skipped prefix."""

    def under(self, fence: QueueNode) -> list[int]:
        """The positions of the entries' leaves under ``fence``, in order."""
        positions = self.positions
        return positions[bisect_left(positions, self.position[fence.path]):bisect_left(positions, self.end[fence.path])]


class VictimIndex(LeafIndex):
    """The giving leaves and the node order of one partition for one cycle (module docstring)."""

    def __init__(self, part: PartitionState) -> None:
        super().__init__(part)
        self.held_in_skip: dict[tuple[str, str], list[int]] = {}  # owner → its reserved nodes' places in the prefix

    def _entry(self, queue: QueueNode) -> LeafEntry | None:
        return LeafVictims(self.part, queue) if _gives(self.part, queue) else None

    def _skipped(self, node: Node, place: int) -> None:
        if node.schedulable and node.reserved_for is not None:
            self.held_in_skip.setdefault(node.reserved_for, []).append(place)

    def nodes_returned(self) -> None:
        """A reservation ended: a node of the skipped prefix may be free again."""
        self.skip = 0
        self.held_in_skip.clear()

    def node_order(self, own: tuple[str, str]) -> Iterator[str]:
        """``sorted(part.nodes)`` without the prefix no attempt can use, but for ``own``'s nodes in it."""
        ids = self.node_ids
        skip = self.advance_skip()
        for i in self.held_in_skip.get(own, ()):
            yield ids[i]
        for i in range(skip, len(ids)):
            yield ids[i]

    def givers(self, fence: QueueNode, priorities: dict[str, int], ask_leaf: QueueNode) -> Givers:
        """The leaves under ``fence`` that give victims to an ask of ``ask_leaf`` (``_collect``'s walk)."""
        self.refresh()
        found = Givers(self.part, ask_leaf)
        ask_pos = self.position[ask_leaf.path]
        placed_ask = False
        for pos in self.under(fence):
            if not placed_ask and pos >= ask_pos:
                found.snapshot(ask_leaf)  # ``_collect`` meets the ask's leaf in its depth-first place
                placed_ask = True
            if pos == ask_pos:
                continue  # the ask's own leaf gives nothing to it
            entry = cast(LeafVictims, self.at_position[pos])
            reach = _reach(fence, entry.queue, priorities)
            if reach is not None and entry.any_victim(*reach):
                found.snapshot(entry.queue)
                found.giving[entry.queue.path] = (entry, *reach)
        if not placed_ask:
            found.snapshot(ask_leaf)
        return found


def _reach(fence: QueueNode, leaf: QueueNode, priorities: dict[str, int]) -> tuple[int, bool] | None:
    """The ask's priority as ``_collect`` carries it from the fence down to ``leaf``, and whether
    it passed a priority fence (then every allocation is a victim); None: a fence stops it."""
    path = leaf.lineage  # leaf, parent, …, root
    below = path[: path.index(fence)]
    priority = priorities[fence.path]
    fenced = False
    for child in reversed(below):
        child_priority = priorities.get(child.path)
        if child_priority is None:
            if child.fence:
                if child.offset > priority:
                    return None
                fenced = True
                child_priority = priority
            else:
                child_priority = priority - child.offset
        priority = child_priority
    return priority, fenced


class Candidates:
    """One attempt's snapshots and candidate victims, gathered from scratch (``find_victims``)."""

    def __init__(self, part: PartitionState, queues: dict[str, QueueSnap], ask_leaf: QueueNode) -> None:
        self.part = part
        self.queues = queues
        self.ask_leaf = ask_leaf
        self._eligible = {id(a) for snap in queues.values() for a in snap.victims}

    def leaf_of(self, app_id: str) -> str:
        """The leaf (snapshot path) of a victim's app."""
        return self.part.apps[app_id].queue.path

    def eligible(self, alloc: Allocation) -> bool:
        """``alloc`` is a candidate victim of this attempt."""
        return id(alloc) in self._eligible

    def guarantee_reachable(self, request: Resources) -> bool:
        """``check_queue_guarantees``: removing victims can bring the ask's queue within its guarantee."""
        return check_queue_guarantees(self.queues, self.ask_leaf.path, request)

    def all_victims(self) -> list[Allocation]:
        """Every candidate victim (for ``additional_victims``)."""
        return [v for snap in self.queues.values() for v in snap.victims]


class Givers(Candidates):
    """One attempt's snapshots and giving leaves from the index (its snapshots hold no victims)."""

    def __init__(self, part: PartitionState, ask_leaf: QueueNode) -> None:
        super().__init__(part, {}, ask_leaf)
        self.giving: dict[str, tuple[LeafVictims, int, bool]] = {}

    def snapshot(self, queue: QueueNode) -> None:
        snapshot(queue, self.part.preempting, self.part.cluster_capacity, self.queues)

    def eligible(self, alloc: Allocation) -> bool:
        if alloc.required_node is not None or alloc.preempted:
            return False
        found = self.giving.get(self.part.apps[alloc.app_id].queue.path)
        return found is not None and (found[2] or alloc.priority <= found[1])

    def guarantee_reachable(self, request: Resources) -> bool:
        # Removing a victim only lowers usage, so the queue is within its guarantee after some
        # prefix of the victims exactly when it is after all of them (and there is one).
        if not self.giving:
            return False
        copy = duplicate(self.queues)
        current = copy[self.ask_leaf.path]
        current.add(request)
        for path, (entry, priority, fenced) in self.giving.items():
            copy[path].remove(entry.total(priority, fenced))
        return current.within_guaranteed()

    def all_victims(self) -> list[Allocation]:
        return [v for entry, priority, fenced in self.giving.values() for v in entry.victims(priority, fenced)]
