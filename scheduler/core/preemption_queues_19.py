"""Queue snapshots for preemption under yunikorn-1.9: v1.9.0 ``QueuePreemptionSnapshot`` and its resource math.

yunikorn-core v1.9.0 (``objects/preemption.go``) judges a queue by its *remaining
guarantee*, type by type (YUNIKORN-3113), instead of 1.5's whole-resource "within" and "at
or above" tests. ``QueueSnap19.remaining`` is ``GetRemainingGuaranteedResource``:

* per type of the queue's own guarantee, guarantee − (allocated − preempting)
  (``SubOnlyExisting``: the guarantee's types only);
* combined with the parent's remaining: the smaller value per type, a type on one side only
  keeping its value (``ComponentWiseMin``) — so an ancestor over its guarantee makes every
  queue below it look over too (YUNIKORN-3240: what a queue can lose accounts for its
  ancestors' guarantees);
* the preemptor's own leaf, when it has a guarantee, keeps its own values and takes only
  the types it lacks from its parent (``MergeIfNotPresent``);
* an ancestor of the preemptor's leaf (a *string* prefix of its path, as Go's
  ``strings.HasPrefix``) with a guarantee of its own passes nothing down (nil) while the
  preemptor's leaf has a guarantee: a queue over its guarantee under such a shared parent
  is not shielded by the parent's headroom, so siblings can take from it (YUNIKORN-2769);
* nil (None here) when neither the queue nor anything above it has a guarantee.

Resources follow Go's ``resources.Resource`` with nil kept apart from empty (``None`` is
nil), because the 1.9 rules test for nil (``remaining == nil`` makes any allocation of a
queue without guarantees a candidate) and for types present (``FitInActual``,
``SubOnlyExisting`` and the per-type checks skip missing types).
"""

from __future__ import annotations

from collections.abc import Mapping

from events.resources import Resources, min_permissive
from scheduler.core.objects import Allocation
from scheduler.core.preemption_queues import BaseQueueSnap, preempting_of, queue_max, uncached_lineage
from scheduler.core.queues import QueueNode

Res = Mapping[str, int]


def sub_only_existing(base: Res | None, delta: Res | None) -> dict[str, int] | None:
    """``SubOnlyExisting``: base − delta over base's types (nil base → nil; nil delta → base)."""
    if base is None:
        return None
    if delta is None:
        return dict(base)
    return {name: value - delta.get(name, 0) for name, value in base.items()}


def merge_if_not_present(left: Res | None, right: Res | None) -> dict[str, int] | None:
    """``MergeIfNotPresent``: left, plus right's types left lacks."""
    if left is None:
        return None if right is None else dict(right)
    out = dict(left)
    if right is not None:
        for name, value in right.items():
            if name not in left:
                out[name] = value
    return out


def fit_in_actual(larger: Res | None, smaller: Res | None) -> bool:
    """``larger.FitInActual(smaller)``: types larger lacks are skipped, negative values compared as they are."""
    if smaller is None:
        return True
    big = larger or {}
    for name, value in smaller.items():
        have = big.get(name)
        if have is not None and value > have:
            return False
    return True


def negative_in(ask: Res, remaining: Res) -> bool:
    """Some type of the ask is below zero in ``remaining`` (``isVictimQueueOverGuaranteed``; its
    negation is ``isAskQueueUnderGuaranteed``)."""
    for name in ask:
        value = remaining.get(name)
        if value is not None and value < 0:
            return True
    return False


def none_negative(res: Res) -> bool:
    """``StrictlyGreaterThanOrEquals(res, Zero)``: no type below zero (an empty resource passes)."""
    return all(value >= 0 for value in res.values())


def equals_or_empty_19(left: Res | None, right: Res | None) -> bool:
    """``EqualsOrEmpty`` with nil: both zero (nil or all 0), or both set and equal (a missing type 0)."""
    if all(v == 0 for v in (left or {}).values()) and all(v == 0 for v in (right or {}).values()):
        return True
    if left is None or right is None:
        return False
    return all(left.get(k, 0) == right.get(k, 0) for k in {*left, *right})


def greater_only_existing(larger: Res, smaller: Res) -> bool:
    """``larger.StrictlyGreaterThanOnlyExisting(smaller)`` (the preemptor's shortfall test).

    Over larger's types that smaller has: none where smaller is above and some where they
    differ; with smaller empty, every type of larger positive; with no type in common, both
    non-empty.
    """
    if not smaller:
        return bool(larger) and all(value > 0 for value in larger.values())
    common = False
    differs = False
    for name, value in larger.items():
        other = smaller.get(name)
        if other is None:
            continue
        common = True
        if other > value:
            return False
        if other != value:
            differs = True
    return differs if common else bool(larger)


def fenced_by_max(max_resource: Res | None, projected: Res) -> bool:
    """``!max.StrictlyGreaterThanOrEqualsOnlyExisting(projected)`` for a set, non-empty max (YUNIKORN-3241):
    some type in both where the projected usage is above the max."""
    if not max_resource:
        return False
    if not projected:
        return not all(value > 0 for value in max_resource.values())
    return any(name in projected and projected[name] > value for name, value in max_resource.items())


def live_max_19(queue: QueueNode, cluster: Resources) -> dict[str, int] | None:
    """``Queue.GetMaxResource`` under v1.9.0: the permissive minimum of the maxes down from root
    (root's is the cluster; v1.9's ``ComponentWiseMin`` keeps a type set on one side only)."""
    limit: dict[str, int] | None = None
    for q in reversed(queue.lineage):
        limit = min_permissive(limit, queue_max(q, cluster))
    return limit


class QueueSnap19(BaseQueueSnap):
    """A queue's snapshot under v1.9.0's rules: its remaining guarantee type by type.

    ``ask_queue`` is the preemptor's leaf snapshot as first taken (``AskQueue``; root has
    none). Copies keep pointing at that original, as Go's ``Duplicate`` does; only its path
    and whether it has a guarantee are read through it, and neither changes.
    """

    __slots__ = ("ask_queue",)

    def __init__(self, path: str, parent: QueueSnap19 | None, leaf: bool, allocated: Res, preempting: Res,
                 max_resource: Res | None, guaranteed: Res | None, victims: list[Allocation],
                 ask_queue: QueueSnap19 | None) -> None:
        super().__init__(path, parent, leaf, allocated, preempting, max_resource, guaranteed, victims)
        self.ask_queue = ask_queue

    def copy_under(self, parent: QueueSnap19 | None) -> QueueSnap19:
        return QueueSnap19(self.path, parent, self.leaf, self.allocated, self.preempting, self.max,
                           self.guaranteed, self.victims, self.ask_queue)

    def gives_up(self, res: Res, request: Res) -> bool:
        """Over its guarantee in some type of the request, or without one (``remaining == nil``),
        as it stands before losing the victim (``isVictimQueueOverGuaranteed``)."""
        remaining = self.remaining()
        self.remove(res)
        if remaining is None or negative_in(request, remaining):
            return True
        self.add(res)
        return False

    def used(self) -> dict[str, int]:
        """Allocated minus what is already being preempted (``SubOnlyExisting``: allocated's types)."""
        preempting = self.preempting
        return {name: value - preempting.get(name, 0) for name, value in self.allocated.items()}

    def remaining(self) -> dict[str, int] | None:
        """``GetRemainingGuaranteedResource`` (module docstring); None is Go's nil."""
        parent = self.parent.remaining() if self.parent is not None else None
        if not parent and not self.guaranteed:
            return None
        own = sub_only_existing(self.guaranteed, self.used())
        ask = self.ask_queue
        if ask is not None:
            if ask.path == self.path and own:
                return merge_if_not_present(own, parent)
            # The ask queue's remaining guarantee is non-empty exactly when it has a guarantee
            # (``SubOnlyExisting`` keeps the guarantee's types).
            if own and ask.guaranteed and ask.path.startswith(self.path):
                return None
        return min_permissive(own, parent)


def snapshot_19(queue: QueueNode, preempting: Mapping[str, Resources], cluster: Resources,
                cache: dict[str, QueueSnap19], ask_queue: QueueSnap19 | None) -> QueueSnap19:
    """A queue's snapshot in ``cache`` (``createPreemptionSnapshot``: made with its ancestors' on
    first need, ancestors first, each pointing at ``ask_queue``)."""
    for q in uncached_lineage(queue, cache):
        parent = cache[q.parent.path] if q.parent is not None else None
        cache[q.path] = QueueSnap19(q.path, parent, q.is_leaf, q.allocated, preempting_of(q, preempting),
                                    queue_max(q, cluster), q.guaranteed or None, [], ask_queue)
    return cache[queue.path]
