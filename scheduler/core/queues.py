"""The queue object (``QueueNode``): one queue of the tree, its run-time configuration (ACLs,
guarantee and max, policies) and apps, with per-queue pending/allocated roll-ups, running-app
counts and cached priorities, updated incrementally and pushed up the tree only when they change.

A leaf's raw priority is the max of its apps' priorities; a parent's, the max of its
children's adjusted priorities (``projections.priority.adjusted``). Raising a value is
O(depth); lowering the value that *was* the max rescans that one level's siblings.
``recompute`` derives every value from scratch; tests prove the two always agree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Final, Protocol

from events.resources import Resources, add_into, sub_into
from projections.policies import fair_max_share, usage_share
from projections.priority import MIN_PRIORITY, adjusted

RUNNING_STATES: Final = frozenset({"Starting", "Running"})


class AppView(Protocol):
    """What the queue projection reads of an application."""

    @property
    def app_id(self) -> str: ...
    @property
    def priority(self) -> int: ...
    @property
    def pending(self) -> Resources: ...
    @property
    def allocated(self) -> Resources: ...
    @property
    def state(self) -> str: ...


class QueueNode:
    """One queue of the tree: configuration it needs at run time plus cached roll-ups."""

    __slots__ = (
        "_child_priorities",
        "_share",
        "admin_acl",
        "allocated",
        "allocating_accepted",
        "app_sort_policy",
        "apps",
        "backoff_delay_us",
        "children",
        "fair_guaranteed",
        "fair_max",
        "fence",
        "guaranteed",
        "is_leaf",
        "lineage",
        "max",
        "max_applications",
        "name",
        "offset",
        "order",
        "parent",
        "path",
        "pending",
        "preemption_delay_us",
        "preemption_policy",
        "priority",
        "raw_priority",
        "running_apps",
        "sort_priority",
        "submit_acl",
        "unsched_backoff",
    )

    def __init__(
        self,
        *,
        name: str,
        path: str,
        parent: QueueNode | None,
        is_leaf: bool,
        order: int,
        fence: bool = False,
        offset: int = 0,
        sort_priority: bool = True,
        app_sort_policy: str = "fifo",
        guaranteed: Mapping[str, int] | None = None,
        max_resources: Mapping[str, int] | None = None,
        max_applications: int = 0,
        submit_acl: str | None = None,
        preemption_policy: str = "default",
        preemption_delay_us: int = 30_000_000,
        admin_acl: str | None = None,
        zero_guaranteed: tuple[str, ...] = (),
        unsched_backoff: int = 0,
        backoff_delay_us: int = 30_000_000,
    ) -> None:
        self.name = name
        self.path = path
        self.parent = parent
        # This queue, then each ancestor up to root: every roll-up walks it, per ask.
        self.lineage: tuple[QueueNode, ...] = (self, *(parent.lineage if parent is not None else ()))
        self.is_leaf = is_leaf
        self.order = order
        self.fence = fence
        self.offset = offset
        self.sort_priority = sort_priority
        self.app_sort_policy = app_sort_policy
        self.guaranteed: Resources = dict(guaranteed or {})
        # What yunikorn-1.9's fair share divides by: the guarantee with its explicit zeros kept
        # (``QueueSpec.zero_guaranteed``: a used such type counts 1.0). The same dict without any.
        self.fair_guaranteed: Resources = self.guaranteed
        if zero_guaranteed:
            self.fair_guaranteed = {**self.guaranteed, **{name: 0 for name in zero_guaranteed}}
        self.max: Resources = dict(max_resources or {})
        self.max_applications = max_applications
        self.submit_acl = submit_acl
        self.admin_acl = admin_acl
        self.preemption_policy = preemption_policy  # default | fence | disabled
        self.preemption_delay_us = preemption_delay_us
        # yunikorn-1.9's unschedulable-ask backoff (scheduler.core.cycle, ``_try_app_counting``): 0 is off
        self.unsched_backoff = unsched_backoff
        self.backoff_delay_us = backoff_delay_us
        self.children: list[QueueNode] = []
        self.apps: dict[str, AppView] = {}
        self.pending: Resources = {}
        self.allocated: Resources = {}
        self.running_apps = 0
        # Accepted apps of a gang that hold placeholders, at or below this queue: they count as
        # running for maxapplications (YuniKorn ``allocatingAcceptedApps``), not in running_apps.
        self.allocating_accepted = 0
        self.raw_priority = MIN_PRIORITY
        self.priority = MIN_PRIORITY
        self._share: tuple[float, ...] | None = None
        # Under the yunikorn-1.9 rules profile, the queue's fair max (``set_fair_max``): its
        # fair share is then ``fair_max_share``'s one number. None under yunikorn-1.5.
        self.fair_max: Resources | None = None
        # How many children (a leaf: apps) have each priority (built on first need): the raw
        # priority is their max, found without rescanning every child or app.
        self._child_priorities: Counter[int] | None = None

    def __repr__(self) -> str:
        return f"QueueNode({self.path})"

    def ancestry(self) -> Iterator[QueueNode]:
        """This queue, then each parent up to root."""
        return iter(self.lineage)

    def walk(self) -> Iterator[QueueNode]:
        """This queue and all descendants, depth-first in configuration order."""
        yield self
        for child in self.children:
            yield from child.walk()

    def fair_share(self) -> tuple[float, ...]:
        """allocated/guaranteed per type (raw allocated where no guarantee), largest first.

        Zero components are left out, so tuples compare correctly with ``<``:

        >>> q = QueueNode(name="a", path="root.a", parent=None, is_leaf=True, order=0,
        ...               guaranteed={"vcore": 4000})
        >>> q.allocated = {"vcore": 1000, "memory": 0}
        >>> q.fair_share()
        (0.25,)
        """
        share = self._share
        if share is None:
            fair_max = self.fair_max
            if fair_max is None:
                share = self._share = usage_share(self.allocated, self.guaranteed)
            else:
                share = self._share = fair_max_share(self.allocated, self.fair_guaranteed, fair_max)
        return share

    def set_fair_max(self, fair_max: Resources | None) -> None:
        """The queue's fair max under yunikorn-1.9 (None: the yunikorn-1.5 share)."""
        if fair_max != self.fair_max:
            self.fair_max = fair_max
            self._share = None

    # -- incremental updates --------------------------------------------------------

    def add_pending(self, delta: Mapping[str, int]) -> None:
        """A leaf's pending grew by delta: roll it up to root."""
        for q in self.lineage:
            add_into(q.pending, delta)

    def sub_pending(self, delta: Mapping[str, int]) -> None:
        """A leaf's pending shrank by delta: roll it up to root."""
        for q in self.lineage:
            sub_into(q.pending, delta)

    def add_allocated(self, delta: Mapping[str, int]) -> None:
        """A leaf's allocation grew by delta: roll it up and invalidate fair shares."""
        for q in self.lineage:
            add_into(q.allocated, delta)
            q._share = None

    def sub_allocated(self, delta: Mapping[str, int]) -> None:
        """A leaf's allocation shrank by delta: roll it up and invalidate fair shares."""
        for q in self.lineage:
            sub_into(q.allocated, delta)
            q._share = None

    def add_running(self, delta: int) -> None:
        """An app of this leaf entered (+1) or left (-1) Starting/Running."""
        for q in self.ancestry():
            q.running_apps += delta

    def add_allocating_accepted(self, delta: int) -> None:
        """A gang app of this leaf began (+1) or stopped (-1) allocating placeholders while Accepted."""
        for q in self.ancestry():
            q.allocating_accepted += delta

    def app_priority_changed(self, old: int, new: int) -> None:
        """An app of this leaf changed its priority from old to new: update and push up."""
        if new == old:
            return
        counts = self._child_priorities
        if counts is None:  # the app already has ``new``
            counts = self._child_priorities = Counter(a.priority for a in self.apps.values())
        else:
            _move(counts, old, new)
        self._set_raw(_max_after_move(counts, old, new, self.raw_priority))

    def app_added(self, app: AppView) -> None:
        """Attach an app (its pending/allocated/running must be rolled up by the caller)."""
        self.apps[app_key(app)] = app
        counts = self._child_priorities
        if counts is not None:
            counts[app.priority] += 1
        if app.priority > self.raw_priority:
            self._set_raw(app.priority)

    def app_removed(self, app: AppView) -> None:
        """Detach an app; recompute this leaf's priority if it was the max."""
        del self.apps[app_key(app)]
        counts = self._child_priorities
        if counts is None:
            counts = self._child_priorities = Counter(a.priority for a in self.apps.values())
        else:
            _take(counts, app.priority)
        if app.priority == self.raw_priority:
            self._set_raw(max(counts) if counts else MIN_PRIORITY)

    def _set_raw(self, raw: int) -> None:
        q: QueueNode = self
        while True:
            if raw == q.raw_priority:
                return
            q.raw_priority = raw
            old_adj = q.priority
            new_adj = adjusted(raw, fence=q.fence, offset=q.offset) if q.parent is not None else raw
            if new_adj == old_adj:
                return
            q.priority = new_adj
            parent = q.parent
            if parent is None:
                return
            counts = parent._child_priorities
            if counts is None:
                counts = parent._child_priorities = Counter(c.priority for c in parent.children)
            else:
                _move(counts, old_adj, new_adj)
            raw = _max_after_move(counts, old_adj, new_adj, parent.raw_priority)
            q = parent  # the loop's first test ends it where the parent's raw priority stays


def _take(counts: Counter[int], value: int) -> None:
    counts[value] -= 1
    if not counts[value]:
        del counts[value]


def _move(counts: Counter[int], old: int, new: int) -> None:
    _take(counts, old)
    counts[new] += 1


def _max_after_move(counts: Counter[int], old: int, new: int, raw: int) -> int:
    """The max of ``counts`` after one member moved from ``old`` to ``new``, ``raw`` the max before.

    Only a member that rose above the max, or left it, changes it; only the latter rescans.
    """
    if new > raw:
        return new
    if old == raw:
        return max(counts)
    return raw


def app_key(app: AppView) -> str:
    """The key under which a leaf holds an app."""
    return app.app_id


def recompute(root: QueueNode) -> dict[str, tuple[int, int, Resources, Resources, int]]:
    """From scratch, per queue path: (raw priority, priority, pending, allocated, running).

    Reads only the apps attached to leaves and the tree shape, never a cached value.
    """
    out: dict[str, tuple[int, int, Resources, Resources, int]] = {}

    def visit(q: QueueNode) -> tuple[int, Resources, Resources, int]:
        pending: Resources = {}
        allocated: Resources = {}
        running = 0
        if q.is_leaf:
            raw = max((a.priority for a in q.apps.values()), default=MIN_PRIORITY)
            for a in q.apps.values():
                add_into(pending, a.pending)
                add_into(allocated, a.allocated)
                running += a.state in RUNNING_STATES
        else:
            raw = MIN_PRIORITY
            for c in q.children:
                c_adj, c_pending, c_alloc, c_running = visit(c)
                raw = max(raw, c_adj)
                add_into(pending, c_pending)
                add_into(allocated, c_alloc)
                running += c_running
        adj = adjusted(raw, fence=q.fence, offset=q.offset) if q.parent is not None else raw
        out[q.path] = (raw, adj, pending, allocated, running)
        return adj, pending, allocated, running

    visit(root)
    return out


def cached(root: QueueNode) -> dict[str, tuple[int, int, Resources, Resources, int]]:
    """The cached values in the same shape as ``recompute``, for comparison."""
    return {
        q.path: (q.raw_priority, q.priority, dict(q.pending), dict(q.allocated), q.running_apps) for q in root.walk()
    }
