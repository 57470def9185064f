"""Queue snapshots for preemption: YuniKorn v1.5.2 ``QueuePreemptionSnapshot`` and its resource math.

Resources here follow Go's ``resources.Resource`` exactly, because the victims chosen depend
on it: a map where a *missing* type differs from a type at 0 in ``FitInMaxUndef`` (missing
types are skipped) and in ``ComponentWiseMinPermissive`` (a missing type takes the other
side's value), while ``Equals``/``ComponentWiseMin``/``ComponentWiseMax`` read a missing
type as 0. ``None`` stands for Go's nil resource.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Self, TypeVar

from events.resources import Resources, min_permissive
from scheduler.core.objects import Allocation
from scheduler.core.queues import QueueNode

Res = Mapping[str, int]
SnapT = TypeVar("SnapT", bound="BaseQueueSnap")


def cw_min(left: Res | None, right: Res | None) -> dict[str, int]:
    """``ComponentWiseMin``: a type missing on one side counts 0 there (nil → empty)."""
    if left is None or right is None:
        return {}
    out = {name: min(value, right.get(name, 0)) for name, value in left.items()}
    for name, value in right.items():
        out[name] = min(value, left.get(name, 0))
    return out


def cw_max(left: Res | None, right: Res | None) -> dict[str, int]:
    """``ComponentWiseMax``: a type missing on one side counts 0 there (nil → empty)."""
    if left is None or right is None:
        return {}
    out = {name: max(value, right.get(name, 0)) for name, value in left.items()}
    for name, value in right.items():
        out[name] = max(value, left.get(name, 0))
    return out


def fit_in(larger: Res | None, smaller: Res | None, skip_undef: bool) -> bool:
    """``larger.FitIn(smaller)`` (``FitInMaxUndef`` with ``skip_undef``); negative larger counts 0."""
    if smaller is None:
        return True
    big = larger or {}
    for name, value in smaller.items():
        if name not in big:
            if skip_undef:
                continue
            have = 0
        else:
            have = max(0, big[name])
        if value > have:
            return False
    return True


def sub(left: Res | None, right: Res | None) -> dict[str, int]:
    """``Sub``: every type of both sides kept (zeros too)."""
    out = dict(left or {})
    for name, value in (right or {}).items():
        out[name] = out.get(name, 0) - value
    return out


def sub_non_negative(left: Res, right: Res) -> dict[str, int]:
    """``SubEliminateNegative``: ``Sub`` with negative results set to 0."""
    out = dict(left)
    for name, value in right.items():
        out[name] = max(0, out.get(name, 0) - value)
    return out


def add_along(usages: list[dict[str, int]], res: Res, sign: int) -> None:
    """``AddAllocation`` (sign 1) or ``RemoveAllocation`` (sign -1) on every map of ``usages``: a
    queue snapshot's ``allocated`` and each of its ancestors' (``lineage_usages``)."""
    for allocated in usages:
        for name, value in res.items():
            allocated[name] = allocated.get(name, 0) + sign * value


def lineage_usages(allocated: dict[str, int], parent_usages: list[dict[str, int]] | None) -> list[dict[str, int]]:
    """A snapshot's own ``allocated`` then its ancestors' up to root: what a change to its usage changes."""
    return [allocated, *parent_usages] if parent_usages is not None else [allocated]


def equals_or_empty(left: Res, right: Res) -> bool:
    """``EqualsOrEmpty``: both all-zero, or equal with a missing type read as 0."""
    return all(left.get(k, 0) == right.get(k, 0) for k in {*left, *right})


class BaseQueueSnap:
    """What a queue's snapshot holds during one preemption attempt under either profile: its usage
    (parents shared, victims per leaf), the copy ``Duplicate`` makes and the usage changes. The
    rules that read it are the profile's own: ``QueueSnap`` (v1.5.2), ``QueueSnap19`` (v1.9.0)."""

    __slots__ = ("allocated", "guaranteed", "leaf", "max", "parent", "path", "preempting", "usages", "victims")

    def __init__(self, path: str, parent: Self | None, leaf: bool, allocated: Res, preempting: Res,
                 max_resource: Res | None, guaranteed: Res | None, victims: list[Allocation]) -> None:
        self.path = path
        self.parent = parent
        self.leaf = leaf
        self.allocated = dict(allocated)
        self.preempting = dict(preempting)
        self.max = max_resource
        self.guaranteed = guaranteed
        self.victims = victims
        above = parent.usages if parent is not None else None
        self.usages: list[dict[str, int]] = lineage_usages(self.allocated, above)

    def copy_under(self, parent: Self | None) -> Self:
        """A copy of this snapshot below ``parent`` (a copy of this one's parent)."""
        raise NotImplementedError

    def gives_up(self, res: Res, request: Res) -> bool:
        """Whether the profile's rules let this queue lose a victim of ``res`` for ``request``;
        if so its usage is left without it (else left as it was)."""
        raise NotImplementedError

    def duplicate(self, cache: dict[str, Self]) -> Self:
        """A copy whose ancestors are copied once into ``cache`` (``Duplicate``)."""
        found = cache.get(self.path)
        if found is not None:
            return found
        parent = self.parent.duplicate(cache) if self.parent is not None else None
        copy = self.copy_under(parent)
        cache[self.path] = copy
        return copy

    def get_guaranteed(self) -> dict[str, int]:
        """``GetGuaranteedResource``: the permissive minimum down from root."""
        above = self.parent.get_guaranteed() if self.parent is not None else {}
        return min_permissive(above, self.guaranteed) or {}

    def add(self, res: Res) -> None:
        """``AddAllocation``: here and every ancestor."""
        add_along(self.usages, res, 1)

    def remove(self, res: Res) -> None:
        """``RemoveAllocation``: here and every ancestor."""
        add_along(self.usages, res, -1)


class QueueSnap(BaseQueueSnap):
    """A queue's snapshot under v1.5.2's rules: whole-resource "within" and "at or above" its guarantee."""

    __slots__ = ()

    def copy_under(self, parent: QueueSnap | None) -> QueueSnap:
        return QueueSnap(self.path, parent, self.leaf, self.allocated, self.preempting, self.max, self.guaranteed,
                         self.victims)

    def gives_up(self, res: Res, request: Res) -> bool:
        """Still at or above its guarantee without the victim (``IsAtOrAboveGuaranteedResource``)."""
        self.remove(res)
        if self.at_or_above_guaranteed():
            return True
        self.add(res)
        return False

    def get_max(self) -> dict[str, int]:
        """``GetMaxResource``: the permissive minimum down from root."""
        above = self.parent.get_max() if self.parent is not None else {}
        return min_permissive(above, self.max) or {}

    def used(self) -> dict[str, int]:
        """Allocated minus what is already being preempted."""
        return sub(self.allocated, self.preempting)

    def at_or_above_guaranteed(self) -> bool:
        """``IsAtOrAboveGuaranteedResource``."""
        guaranteed = self.get_guaranteed()
        absolute = min_permissive(guaranteed, self.get_max())
        used = self.used()
        if not fit_in(absolute, used, False):
            return True
        return equals_or_empty(cw_max(guaranteed, used), used)

    def within_guaranteed(self) -> bool:
        """``IsWithinGuaranteedResource`` (every ancestor too; a leaf without a guarantee is not)."""
        if self.parent is not None and not self.parent.within_guaranteed():
            return False
        guaranteed = self.get_guaranteed()
        if self.leaf and not guaranteed:
            return False
        return fit_in(min_permissive(guaranteed, self.get_max()), self.used(), False)

    def remaining_guaranteed(self) -> dict[str, int]:
        """``GetRemainingGuaranteed``: guarantee minus use, the minimum with every ancestor's."""
        above = self.parent.remaining_guaranteed() if self.parent is not None else {}
        remaining = sub(min_permissive(self.get_guaranteed(), self.get_max()), self.used())
        return cw_min(remaining, above)


def snapshot(queue: QueueNode, preempting: Mapping[str, Resources], cluster: Resources,
             cache: dict[str, QueueSnap]) -> QueueSnap:
    """A queue's snapshot in ``cache`` (made with its ancestors' on first need, ancestors first)."""
    for q in uncached_lineage(queue, cache):
        parent = cache[q.parent.path] if q.parent is not None else None
        cache[q.path] = QueueSnap(q.path, parent, q.is_leaf, q.allocated, preempting_of(q, preempting),
                                  queue_max(q, cluster), q.guaranteed or None, [])
    return cache[queue.path]


def uncached_lineage(queue: QueueNode, cache: Mapping[str, object]) -> list[QueueNode]:
    """The queue and those of its ancestors without a snapshot in ``cache``, root first: the
    order snapshots are made in (a parent's before its children's)."""
    missing: list[QueueNode] = []
    for q in queue.lineage:
        if q.path in cache:
            break
        missing.append(q)
    missing.reverse()
    return missing


def duplicate(queues: dict[str, SnapT]) -> dict[str, SnapT]:
    """``duplicateQueueSnapshots`` (either profile's snapshots)."""
    cache: dict[str, SnapT] = {}
    for snap in queues.values():
        snap.duplicate(cache)
    return cache


def check_queue_guarantees(queues: dict[str, QueueSnap], leaf: str, request: Resources) -> bool:
    """``checkPreemptionQueueGuarantees``: can removing victims bring the ask's queue within its guarantee?"""
    copy = duplicate(queues)
    current = copy.get(leaf)
    if current is None:
        return False
    current.add(request)
    for snap in copy.values():
        for alloc in snap.victims:
            snap.remove(alloc.resources)
            if current.within_guaranteed():
                return True
    return False


def queue_max(queue: QueueNode, cluster: Resources) -> Res | None:
    """A queue's own max as YuniKorn holds it: root's is the cluster; unset is nil."""
    if queue.parent is None:
        return cluster
    return queue.max or None


def preempting_of(queue: QueueNode, preempting: Mapping[str, Resources]) -> dict[str, int]:
    """Resources of victims not yet released in this queue's subtree (``preemptingResource``)."""
    out: dict[str, int] = {}
    prefix = queue.path + "."
    for path, res in preempting.items():
        if path == queue.path or path.startswith(prefix):
            for name, value in res.items():
                out[name] = out.get(name, 0) + value
    return out


def live_max(queue: QueueNode, cluster: Resources) -> dict[str, int] | None:
    """``Queue.GetMaxResource`` on the live tree: ``ComponentWiseMin`` down from root (nil: unset)."""
    limit: dict[str, int] | None = None
    for q in reversed(queue.lineage):
        own = queue_max(q, cluster)
        if limit is None:
            limit = dict(own) if own is not None else None
        elif own is not None:
            limit = cw_min(limit, own)
    return limit


def live_guaranteed(queue: QueueNode) -> dict[str, int] | None:
    """``Queue.GetActualGuaranteedResource``: permissive minimum up to root (root's parent: empty)."""
    result: dict[str, int] | None = {}
    for q in reversed(queue.lineage):
        result = min_permissive(q.guaranteed or None, result)
    return result
