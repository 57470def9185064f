"""A cycle's index of preemption candidates under yunikorn-1.9: the leaves holding candidates, kept as victims go.

``preemption_19.find_victims_19`` walks the fence's whole subtree and lists every candidate
of every leaf for one attempt; ``try_preemption_19`` then walked every node id from the first,
and sorted every candidate for the additional pass. A preemption storm (many asks attempting
in one cycle) paid O(queues + allocations + nodes) per attempt, quadratic in all. Within a
cycle nothing is released and a victim, once taken, stays taken, so this index (the 1.9
counterpart of ``scheduler.core.preemption_victims``) builds once per cycle and then follows
what changes:

* the leaves that hold candidates (policy not ``disabled``, an allocation without a required
  node), in depth-first configuration order, each with its candidates in victim order and,
  per (priority, resource types held), how many are not yet taken and what they hold. A leaf
  an allocation changed (``changed``) is re-read at the next attempt; a taken victim
  (``taken``) leaves its count and sum. Whether a leaf *gives* depends on the attempting
  ask (its remaining guarantee is read relative to the ask's lineage), so each attempt still
  judges every leaf under its fence that holds a candidate for it — but no other leaf, and
  no allocation one by one;
* the nodes in id order, and a prefix of them known to be unschedulable or reserved (no
  attempt can use them but the ask that holds one: ``ask.reserved_node``). A node comes back
  only when a reservation ends, which starts a fresh memo: ``nodes_returned``.

``Givers19`` answers an attempt's questions from the index: the snapshots, the guarantee check
(``guarantee_reachable``: one sum per giving leaf, as Go's one-by-one removal holds after some
candidate exactly when it holds after all), whether an allocation is a candidate, and the
candidates in victim order for the additional pass (merged lazily: that pass usually stops
after a few). ``tests/property/test_preemption_victims_19.py`` proves every attempt's outcome
through the index equal to the one gathered from scratch.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import cast

from events.resources import Resources
from scheduler.core.objects import Allocation, Ask
from scheduler.core.partition import PartitionState
from scheduler.core.preemption import victim_order
from scheduler.core.preemption_queues import duplicate, uncached_lineage
from scheduler.core.preemption_queues_19 import (
    QueueSnap19,
    fit_in_actual,
    negative_in,
    none_negative,
    snapshot_19,
)
from scheduler.core.preemption_victims import LeafEntry, LeafIndex, _reach
from scheduler.core.queues import QueueNode

_Key = tuple[int, frozenset[str]]  # (priority, the resource types an allocation holds)


class LeafCandidates19(LeafEntry):
    """One leaf's candidates (allocations without a required node) in victim order, and per
    (priority, types) [count, resources] of those not taken."""

    __slots__ = ("by_key",)

    def __init__(self, part: PartitionState, queue: QueueNode) -> None:
        self.by_key: dict[_Key, tuple[list[int], dict[str, int]]] = {}
        super().__init__(part, queue)
        self.allocs.sort(key=victim_order)

    def _count(self, alloc: Allocation, sign: int) -> None:
        key = (alloc.priority, frozenset(alloc.resources))
        entry = self.by_key.get(key)
        if entry is None:
            entry = self.by_key[key] = ([0], {})
        entry[0][0] += sign
        total = entry[1]
        for name, value in alloc.resources.items():
            total[name] = total.get(name, 0) + sign * value

    def any_victim(self, priority: int, fenced: bool, wanted: Resources) -> bool:
        """A candidate not taken that the ask reaches (priority, or a fence passed) and that
        shares a resource type with it (``MatchAny``)."""
        return any(count[0] > 0 and (fenced or p <= priority) and not types.isdisjoint(wanted)
                   for (p, types), (count, _) in self.by_key.items())

    def total(self, priority: int, fenced: bool, wanted: Resources) -> dict[str, int]:
        """What this ask's candidates in the leaf hold together."""
        out: dict[str, int] = {}
        for (p, types), (count, held) in self.by_key.items():
            if count[0] > 0 and (fenced or p <= priority) and not types.isdisjoint(wanted):
                for name, value in held.items():
                    out[name] = out.get(name, 0) + value
        return out

    def victims(self, priority: int, fenced: bool, wanted: Resources) -> Iterator[Allocation]:
        """This ask's candidates in the leaf, in victim order."""
        for alloc in self.allocs:
            if not alloc.preempted and (fenced or alloc.priority <= priority) and \
                    any(name in alloc.resources for name in wanted):
                yield alloc


class VictimIndex19(LeafIndex):
    """The candidate-holding leaves and the node order of one partition for one cycle (module docstring)."""

    def __init__(self, part: PartitionState) -> None:
        super().__init__(part)
        self.node_place = {node_id: i for i, node_id in enumerate(self.node_ids)}

    def _entry(self, queue: QueueNode) -> LeafEntry | None:
        """A leaf whose allocations ``find_victims_19``'s walk reads (policy not ``disabled``), if it has any."""
        if queue.preemption_policy == "disabled" or not queue.apps:
            return None
        entry = LeafCandidates19(self.part, queue)
        return entry if entry.allocs else None

    def nodes_returned(self) -> None:
        """A reservation ended: a node of the skipped prefix may be usable again."""
        self.skip = 0

    def node_order(self, ask: Ask, freed: set[str]) -> Iterator[str]:
        """``sorted(part.nodes)`` without the prefix no attempt can use, but for the node ``ask``
        holds and the nodes ``freed`` (whose every reservation the attempt cancels, YUNIKORN-3092).

        Under 1.9 a node unschedulable or held for another ask is unusable (``_usable``) unless
        freed; the attempting ask holds at most one node, ``ask.reserved_node``. Those of the
        prefix come first, in id order: every other node before them is unusable.
        """
        ids = self.node_ids
        skip = self.advance_skip()
        place = self.node_place
        own = ask.reserved_node
        early = [n for n in freed if place.get(n, skip) < skip]
        if own is not None and place.get(own, skip) < skip:
            early.append(own)
        yield from sorted(set(early))
        for i in range(skip, len(ids)):
            yield ids[i]

    def givers(self, fence: QueueNode, priorities: dict[str, int], ask_leaf: QueueNode, ask: Ask) -> Givers19:
        """``find_victims_19`` from the index: the ask's lineage snapshotted first, then each leaf
        under ``fence`` holding a candidate for this ask, in depth-first order, kept when its
        remaining guarantee is nil or below zero in some type (``_collect``)."""
        self.refresh()
        part = self.part
        found = Givers19(part, ask_leaf, ask.resources)
        queues = found.queues
        ask_snap = snapshot_19(ask_leaf, part.preempting, part.cluster_capacity, queues, None)
        snap: QueueSnap19 | None = ask_snap
        while snap is not None and snap.parent is not None:
            snap.ask_queue = ask_snap
            snap = snap.parent
        ask_pos = self.position[ask_leaf.path]
        wanted = ask.resources
        for pos in self.under(fence):
            if pos == ask_pos:
                continue  # the ask's own leaf gives nothing to it
            entry = cast(LeafCandidates19, self.at_position[pos])
            reach = _reach(fence, entry.queue, priorities)
            if reach is None or not entry.any_victim(reach[0], reach[1], wanted):
                continue
            new = [q.path for q in uncached_lineage(entry.queue, queues)]
            leaf_snap = snapshot_19(entry.queue, part.preempting, part.cluster_capacity, queues, ask_snap)
            remaining = leaf_snap.remaining()
            if remaining is None or not none_negative(remaining):
                found.giving[entry.queue.path] = (entry, *reach)
            else:  # as Go's ``prunePreemptionSnapshots``: it gives nothing
                for path in new:
                    del queues[path]
        return found


class Givers19:
    """One 1.9 attempt's snapshots (without victim lists) and giving leaves, from the index."""

    def __init__(self, part: PartitionState, ask_leaf: QueueNode, wanted: Resources) -> None:
        self.part = part
        self.ask_leaf = ask_leaf
        self.wanted = wanted
        self.queues: dict[str, QueueSnap19] = {}
        self.giving: dict[str, tuple[LeafCandidates19, int, bool]] = {}

    def leaf_of(self, alloc: Allocation) -> str:
        """The leaf (snapshot path) of a candidate's app."""
        return self.part.apps[alloc.app_id].queue.path

    def eligible(self, alloc: Allocation) -> bool:
        """``alloc`` is a candidate of this attempt (``_collect``'s tests)."""
        if alloc.required_node is not None or alloc.preempted:
            return False
        found = self.giving.get(self.part.apps[alloc.app_id].queue.path)
        return found is not None and (found[2] or alloc.priority <= found[1]) and \
            any(name in alloc.resources for name in self.wanted)

    def guarantee_reachable(self, request: Resources) -> bool:
        """``checkPreemptionQueueGuarantees`` (``preemption_19.guarantee_reachable``) with each
        giving leaf's candidates removed as one sum."""
        copy = duplicate(self.queues)
        current = copy[self.ask_leaf.path]
        before = current.remaining()
        if before is not None and fit_in_actual(before, request):
            return True
        current.add(request)
        if not self.giving:
            return False
        for path, (entry, priority, fenced) in self.giving.items():
            copy[path].remove(entry.total(priority, fenced, self.wanted))
        remaining = current.remaining()
        return remaining is not None and not negative_in(request, remaining)

    def in_victim_order(self, skip: set[int]) -> Iterator[Allocation]:
        """Every candidate but those whose id is in ``skip``, in victim order (lazily merged)."""
        wanted = self.wanted
        merged = heapq.merge(*(entry.victims(priority, fenced, wanted)
                               for entry, priority, fenced in self.giving.values()), key=victim_order)
        return (v for v in merged if id(v) not in skip)
