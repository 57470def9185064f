"""The orders the allocation walk tries queues and applications in, kept across a cycle's steps.

The policies and their keys are ``projections.policies``; this module applies them to the
core's objects (``leaf_sort_key``) and keeps each parent's child order (``sort_queues``,
``KeptOrder``, ``QueueOrder``) up to date as allocations change it.

Every order is total and ends in arrival order (config order for queues, log order for
apps), so the same state always sorts the same way, whatever the hash seed.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence
from operator import ge
from typing import final

from sortedcontainers import SortedList

from events.resources import dominates, is_positive
from projections.policies import AppKey, AppSortPolicy, app_sort_key, usage_share
from scheduler.core.objects import App
from scheduler.core.queues import QueueNode

EMPTY_SHARE: tuple[float, ...] = ()  # the share a non-fair app key never reads


def leaf_sort_key(app: App, policy: AppSortPolicy, sort_priority: bool) -> AppKey:
    """The key an app is held under in its leaf's sorted list: ``projections.policies.app_sort_key`` of it.

    Its usage share (read under fair only) is computed once and cached on the app.
    """
    share = EMPTY_SHARE
    if policy is AppSortPolicy.FAIR:
        cached = app.share
        if cached is None:
            cached = app.share = usage_share(app.allocated, app.queue.guaranteed)
        share = cached
    return app_sort_key(policy, sort_priority, app.priority, share, app.submit_us, app.seq)


def stateaware_allowed(apps_in_order: Sequence[App], starting: Sequence[App]) -> set[str]:
    """Which apps of a stateaware leaf may be scheduled now (YuniKorn 1.5 ``stateAwareFilter``).

    Every app with pending asks that is not Accepted (Running and Starting); plus, when no
    app is Starting, the oldest Accepted app with pending asks. A Starting app blocks every
    Accepted app even when it has nothing pending. ``apps_in_order`` are the leaf's apps
    with pending asks, in fifo order; ``starting`` the leaf's Starting apps (pending or not).
    """
    allowed = {a.app_id for a in apps_in_order if a.state != "Accepted"}
    if starting:
        return allowed
    oldest_accepted = min(
        (a for a in apps_in_order if a.state == "Accepted"), key=lambda a: (a.submit_us, a.seq), default=None
    )
    if oldest_accepted is not None:
        allowed.add(oldest_accepted.app_id)
    return allowed


def sort_queues(children: Sequence[QueueNode], sort_priority: bool) -> list[QueueNode]:
    """Order the child queues that have pending resources, for the walk from their parent.

    Primary keys, all total: with priority sorting enabled on the parent, priority desc
    then fair share asc; disabled, fair share asc then priority desc. Within a run of equal
    primary keys, a queue moves ahead of an earlier one only when its pending resources
    dominate (every component ≥, one >) — a stable insertion pass, which keeps config
    order wherever neither dominates (``QueueOrder`` keeps this order across the steps of
    a cycle, re-ordering only what changed).

    Worked example: a (P5, share 0.5), b (P5, share 0.2), c (P9, share 0.9) under an
    enabled parent sort c, b, a; under a disabled parent b, a, c.

    Up to ``FEW_CHILDREN`` candidates the pass runs directly; more go through ``QueueOrder``.
    The allocation walk sorts afresh only once per parent and cycle: it keeps each order
    (``KeptOrder`` up to ``FEW_CHILDREN`` children, ``QueueOrder`` above) and re-positions
    the children an allocation changed.
    """
    candidates = [c for c in children if is_positive(c.pending)]
    if len(candidates) > FEW_CHILDREN:
        return QueueOrder(candidates, sort_priority).sorted()
    if len(candidates) < 2:
        return candidates
    # Each key is computed once; ``order`` is unique among siblings, so tuples never tie.
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


FEW_CHILDREN = 16


@final
class _Entry:
    """One child in a ``KeptOrder``: the queue and its sort key, read when it last changed."""

    __slots__ = ("order", "prio", "q", "share")

    def __init__(self, q: QueueNode) -> None:
        self.q = q
        self.prio: int = -q.priority
        self.share: tuple[float, ...] = q.fair_share()
        self.order: int = q.order


def _before(a: _Entry, b: _Entry, sort_priority: bool) -> bool:
    """``a`` sorts before ``b`` by (primary key, config order)."""
    if sort_priority:
        if a.prio != b.prio:
            return a.prio < b.prio
        if a.share != b.share:
            return a.share < b.share
    else:
        if a.share != b.share:
            return a.share < b.share
        if a.prio != b.prio:
            return a.prio < b.prio
    return a.order < b.order


def _tied(entries: list[_Entry], i: int) -> int:
    """1 when ``entries[i - 1]`` and ``entries[i]`` exist and share their primary key, else 0."""
    if i <= 0 or i >= len(entries):
        return 0
    a = entries[i - 1]
    b = entries[i]
    return 1 if a.prio == b.prio and a.share == b.share else 0


@final
class KeptOrder:
    """``sort_queues`` of a parent with few children, kept across the steps of a cycle.

    The children with pending resources are kept sorted by (primary key, config order),
    with the count of neighbours that share a primary key. A step changes one child per
    level (``changed``): it leaves its place and is inserted at its new one (a binary
    search), its key re-read — the others' keys are unchanged. With no neighbours tied the
    order is that sorted list; otherwise the insertion pass of ``sort_queues`` runs over it
    (once per change).
    """

    __slots__ = ("entries", "items", "result", "sort_priority", "ties")

    def __init__(self, children: Sequence[QueueNode], sort_priority: bool) -> None:
        self.sort_priority = sort_priority
        keyed = sorted(((primary_key(q, sort_priority), q.order), q) for q in children if is_positive(q.pending))
        self.entries: list[_Entry] = [_Entry(q) for _, q in keyed]
        self.items: list[QueueNode] = [q for _, q in keyed]  # the queues of ``entries``
        self.ties = sum(_tied(self.entries, i) for i in range(1, len(self.entries)))
        self.result: list[QueueNode] | None = None

    def changed(self, q: QueueNode) -> None:
        """Child ``q``'s pending, allocated (fair share) or priority changed."""
        entries = self.entries
        items = self.items
        entry: _Entry | None = None
        for i in range(len(entries)):
            if entries[i].q is q:
                self.ties -= _tied(entries, i) + _tied(entries, i + 1)
                entry = entries.pop(i)
                items.pop(i)
                self.ties += _tied(entries, i)
                break
        self.result = None
        if not is_positive(q.pending):
            return
        if entry is None:
            entry = _Entry(q)
        else:  # re-read in place
            entry.prio = -q.priority
            entry.share = q.fair_share()
        sort_priority = self.sort_priority
        lo = 0
        hi = len(entries)
        while lo < hi:
            mid = (lo + hi) // 2
            if _before(entries[mid], entry, sort_priority):
                lo = mid + 1
            else:
                hi = mid
        self.ties -= _tied(entries, lo)
        entries.insert(lo, entry)
        items.insert(lo, q)
        self.ties += _tied(entries, lo) + _tied(entries, lo + 1)

    def in_order(self) -> Iterator[QueueNode]:
        """``sorted()`` as an iterator (``QueueOrder.in_order``'s counterpart)."""
        return iter(self.sorted())

    def sorted(self) -> list[QueueNode]:
        """The children with pending resources, in ``sort_queues`` order (not to be changed)."""
        if self.ties == 0:
            return self.items
        result = self.result
        if result is None:
            result = self.result = self._insertion_pass()
        return result

    def _insertion_pass(self) -> list[QueueNode]:
        out: list[QueueNode] = []
        placed: list[_Entry] = []
        for entry in self.entries:
            i = len(out)
            while i > 0:
                prev = placed[i - 1]
                if prev.prio != entry.prio or prev.share != entry.share:
                    break
                if not dominates(entry.q.pending, prev.q.pending):
                    break
                i -= 1
            out.insert(i, entry.q)
            placed.insert(i, entry)
        return out


def primary_key(q: QueueNode, sort_priority: bool) -> tuple[object, object]:
    """A queue's primary sort key (ascending) under its parent's priority setting."""
    if sort_priority:
        return (-q.priority, q.fair_share())
    return (q.fair_share(), -q.priority)


class QueueOrder:
    """``sort_queues`` of one parent's children, kept up to date as children change.

    The children are grouped in runs of equal primary key (a sorted set of keys); each run
    keeps its members in config order (the insertion pass's input), the pass's output, and
    where each member was inserted. A changed child (``changed``) leaves its run and joins
    its new one; in each, the insertions from that member's place in config order on are
    undone (in reverse, so the list is exactly as it was before them) and redone. A run
    whose members all pend the same vector has nothing to dominate: config order, no pass.
    So a step of a cycle, which changes one child per level, costs O(log n) to re-key plus
    the redone tail of one or two runs — not a fresh O(n log n) sort and O(n²) pass.
    """

    def __init__(self, children: Sequence[QueueNode], sort_priority: bool) -> None:
        self.sort_priority = sort_priority
        self.keys: dict[int, tuple[object, object]] = {}  # child order → its run's key
        self.runs: dict[tuple[object, object], _Run] = {}
        self.run_keys: SortedList = SortedList()
        self._result: list[QueueNode] | None = None
        for q in children:
            self._join(q, defer=True)
        for run in self.runs.values():
            run.redo_from(0)

    def changed(self, q: QueueNode) -> None:
        """Child ``q``'s pending, allocated (fair share) or priority changed."""
        key = self.keys.pop(q.order, None)
        if key is not None:
            run = self.runs[key]
            run.remove(q)
            if not run.members:
                del self.runs[key]
                self.run_keys.remove(key)
        self._join(q, defer=False)
        self._result = None

    def sorted(self) -> list[QueueNode]:
        """The children with pending resources, in ``sort_queues`` order."""
        if self._result is None:
            out: list[QueueNode] = []
            for key in self.run_keys:
                out.extend(self.runs[key].out())
            self._result = out
        return self._result

    def in_order(self) -> Iterator[QueueNode]:
        """``sorted()`` read in place, without building the list: a cycle's walk stops at the
        first child that allocates, and every step changes the order (building the whole
        list anew each step made a cycle of many waiting children quadratic)."""
        runs = self.runs
        for key in self.run_keys:
            for block in runs[key].blocks:
                yield from block.members

    def _join(self, q: QueueNode, *, defer: bool) -> None:
        if not is_positive(q.pending):
            return
        key = primary_key(q, self.sort_priority)
        self.keys[q.order] = key
        run = self.runs.get(key)
        if run is None:
            run = self.runs[key] = _Run()
            self.run_keys.add(key)
        run.add(q, defer=defer)


@final
class _Block:
    """Members of a ``_Run`` that sit together in its pass's output and pend one vector."""

    __slots__ = ("members", "orders", "vec")

    def __init__(self, q: QueueNode, vec: tuple[int, ...]) -> None:
        self.members: list[QueueNode] = [q]  # in config order; the first made the block
        self.orders: list[int] = [q.order]
        self.vec = vec


def _strictly_dominates(v: tuple[int, ...], w: tuple[int, ...]) -> bool:
    """Every component of ``v`` ≥ ``w``'s, and ``v`` ≠ ``w``."""
    return v != w and all(map(ge, v, w))


class _Run:
    """The members of one run of equal primary key and their insertion pass (``QueueOrder``).

    The pass inserts each member (in config order) just behind the last one it does not
    strictly dominate. A member only ever passes whole blocks of members that pend one
    vector (it passes one iff it strictly dominates the vector, and the two members either
    side of the place it stops never pend the same vector), so the output is kept as
    blocks: the maximal runs of one vector, in output order. Blocks are made (by their
    first member in config order) and grow at their end; they never split, merge or move.
    So the pass as it stood when member ``m`` was inserted is the blocks made before ``m``,
    each cut to its members before ``m``; and a walk costs a look per block passed, not per
    member (a run of six vectors has at most a few blocks, whatever its size).

    A change re-does no more than it must:

    * removing a member that did not make its block (or the first member of the output,
      ``_remove_first``'s argument) leaves every other walk as it was: the member leaves its block;
    * adding one whose walk, at its place in config order, ends behind a block of its own
      vector joins that block, and changes no other walk;
    * otherwise the pass is redone from the member's place (``_repass``) until it is back in
      step with the pass as it was, usually a few members later.
    """

    __slots__ = ("_out", "block_of", "blocks", "members", "names", "orders", "vec")

    def __init__(self) -> None:
        self.members: list[QueueNode] = []  # in config order: the pass's input
        self.orders: list[int] = []  # their config order, for bisect
        self.names: tuple[str, ...] = ()  # every resource name a member pends: the tuples' basis
        self.vec: dict[int, tuple[int, ...]] = {}  # member's order → its pending over ``names``
        self.blocks: list[_Block] = []  # the pass's output, in blocks
        self.block_of: dict[int, _Block] = {}  # member's order → its block
        self._out: list[QueueNode] | None = None

    def out(self) -> list[QueueNode]:
        """The pass's output (not to be changed)."""
        out = self._out
        if out is None:
            out = []
            for block in self.blocks:
                out.extend(block.members)
            self._out = out
        return out

    def add(self, q: QueueNode, *, defer: bool) -> None:
        order = q.order
        i = bisect_left(self.orders, order)
        self.members.insert(i, q)
        self.orders.insert(i, order)
        if q.pending.keys() <= set(self.names):
            self.vec[order] = tuple(q.pending.get(name, 0) for name in self.names)
        else:
            self.names = tuple(sorted(set(self.names) | q.pending.keys()))
            self.vec = {m.order: tuple(m.pending.get(name, 0) for name in self.names) for m in self.members}
            for block in self.blocks:
                block.vec = self.vec[block.orders[0]]
        if defer:
            return
        self._out = None
        v = self.vec[order]
        blocks = self.blocks
        k = len(blocks)
        while k > 0:  # the walk as the pass made it: over the blocks made before ``q``
            block = blocks[k - 1]
            if block.orders[0] > order:
                k -= 1
                continue
            if block.vec == v:
                j = bisect_left(block.orders, order)
                block.orders.insert(j, order)
                block.members.insert(j, q)
                self.block_of[order] = block
                return
            if not _strictly_dominates(v, block.vec):
                break
            k -= 1
        self._repass(order, i)

    def remove(self, q: QueueNode) -> None:
        order = q.order
        i = bisect_left(self.orders, order)
        del self.members[i]
        del self.orders[i]
        self._out = None
        block = self.block_of[order]
        if block.orders[0] != order or block is self.blocks[0]:
            del self.block_of[order]
            del self.vec[order]
            j = bisect_left(block.orders, order)
            del block.orders[j]
            del block.members[j]
            if not block.orders:
                del self.blocks[0]  # the output's first member, alone in its block
            return
        del self.block_of[order]
        del self.vec[order]
        self._repass(order, i)

    def _repass(self, order: int, i: int) -> None:
        """Redo the pass from ``members[i]`` (config order ``order`` on), and stop as soon as it
        is back in step with the pass as it was: when the blocks made so far are the old pass's
        blocks made before the next member (the same vectors in the same places, the blocks
        made before ``order`` each in its own place), every later walk is the one it was, so
        the old blocks take the rest of their members back. Removing a block's first member
        usually costs the members up to its second one, not the rest of the run."""
        saved = [(block, block.orders, block.members) for block in self.blocks]  # full lists, kept
        blocks: list[_Block] = []
        for block, orders, members in saved:
            if orders[0] < order:  # the pass before ``order``: its blocks, cut to their members before it
                j = bisect_left(orders, order)
                block.orders = orders[:j]
                block.members = members[:j]
                blocks.append(block)
        self.blocks = blocks
        members = self.members
        last = len(members) - 1
        for j in range(i, last + 1):
            self._insert(members[j])
            if j < last and self._in_step(saved, members[j + 1].order, order):
                self._splice(saved, members[j + 1].order)
                break
        self._out = None

    def _in_step(self, saved: list[tuple[_Block, list[int], list[QueueNode]]], until: int, order: int) -> bool:
        """The blocks now are the old pass's blocks made before ``until``, place by place."""
        blocks = self.blocks
        k = 0
        for block, orders, _ in saved:
            if orders[0] >= until:
                continue
            if k == len(blocks):
                return False
            now = blocks[k]
            if now.vec != block.vec:
                return False
            # A block that survived the cut must stand in its own place (and no survivor in a
            # newer block's): ``_splice`` then reads each block's list before it replaces it.
            if orders[0] < order:
                if now is not block:
                    return False
            elif now.orders[0] < order:
                return False
            k += 1
        return k == len(blocks)

    def _splice(self, saved: list[tuple[_Block, list[int], list[QueueNode]]], until: int) -> None:
        """Back in step before member ``until``: each old block takes its members from ``until`` on back."""
        blocks = self.blocks
        block_of = self.block_of
        out: list[_Block] = []
        k = 0
        for block, orders, members in saved:
            if orders[0] < until:
                now = blocks[k]
                k += 1
                j = bisect_left(orders, until)
                if now is not block:  # made anew by the redo where the old pass had ``block``
                    for o in now.orders:
                        block_of[o] = block
                block.orders = now.orders + orders[j:]
                block.members = now.members + members[j:]
            out.append(block)
        self.blocks = out

    def redo_from(self, i: int) -> None:
        """Insert ``members[i:]`` (not in the pass yet) in config order."""
        members = self.members
        for j in range(i, len(members)):
            self._insert(members[j])
        self._out = None

    def _insert(self, q: QueueNode) -> None:
        """Put ``q`` in the pass: into the block of its own vector, else into a new block right
        after the last one whose vector ``q``'s does not dominate."""
        vec, blocks, block_of = self.vec, self.blocks, self.block_of
        v = vec[q.order]
        k = len(blocks)
        while k > 0:
            w = blocks[k - 1].vec
            if v == w or not all(map(ge, v, w)):
                break
            k -= 1
        if k > 0 and blocks[k - 1].vec == v:
            block = blocks[k - 1]
            block.members.append(q)
            block.orders.append(q.order)
        else:
            block = _Block(q, v)
            blocks.insert(k, block)
        block_of[q.order] = block


ChildOrder = KeptOrder | QueueOrder


def child_order(children: Sequence[QueueNode], sort_priority: bool) -> ChildOrder:
    """A parent's child order kept across a cycle's steps: ``KeptOrder`` for up to
    ``FEW_CHILDREN`` children (a sorted list and one re-insert per change is cheapest
    there), ``QueueOrder`` above (runs of equal keys, so a change re-does one run's pass)."""
    if len(children) <= FEW_CHILDREN:
        return KeptOrder(children, sort_priority)
    return QueueOrder(children, sort_priority)
