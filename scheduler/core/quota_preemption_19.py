"""Quota preemption under yunikorn-1.9 (YUNIKORN-3193): when a queue's max is lowered, take allocations back.

yunikorn-core v1.9.0 ``objects/queue.go`` (``setPreemptionTime``, ``IncAllocatedResource``,
``tryAcquirePreemption``, ``TryQuotaPreemption``, ``GetPreemptableResource``) and
``objects/quota_preemptor.go`` (``QuotaPreemptionContext``), as pure functions over plain data.

**When** (``QuotaClock``): a queue with ``quota.preemption.delay`` > 0 whose usage exceeds a
lowered max gets a start time = now + delay; yunikorn reads ``time.Now()`` there, we read the
log time of the config change (or of the allocation that pushed it over). A scheduler tick
(every second in yunikorn) walks the tree top-down and starts quota preemption in the first
queue, root-first, whose usage exceeds its max and whose start time has passed
(``due``); its subtree is not visited further on that tick.

**What** (``select_quota_victims``): the queue's preemptable resource is
``min(usage − preempting − max, over-guarantee along the ancestors)`` for the types over max
(``preemptable_resource``); a parent queue spreads it over its children in proportion to their
usage above guarantee, floored (``spread_over_children``). In each leaf the allocations sharing a
type with that resource, without a required node and not already preempted, are sorted
(``victim_order``) and taken greedily while their total stays within the preemptable resource.

Deterministic adaptations (Go iterates maps here): candidate allocations start in app arrival order,
then allocation order, instead of map order; children in configuration order (the spread is
per child, so the order only changes the order victims are reported in). Go's
``sort.SliceStable`` with a comparator that answers "less" for equal elements is reproduced by
an insertion sort (which puts a later equal element first): exact by construction for up to 20
candidates (Go's insertion-sort block); checked against v1.9.0's own ``SortAllocationsBasedOnAsk``
on 1,500 random lists of 1–80 candidates with ties in every key, identical in all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from events.resources import dominates, equals, min_permissive
from scheduler.config.resmath import fits_max_undef, is_zero

Res = Mapping[str, int]

SCORE_ORIGINATOR = 1 << 33  # preemption.go scoreOriginator
SCORE_NO_PREEMPT = 1 << 34  # preemption.go scoreNoPreempt
HOUR_US = 3_600_000_000


# ---------------------------------------------------------------------------------------------
# resource helpers with yunikorn's exact edge cases (nil = None, empty = {})


def _is_zero(res: Res | None) -> bool:
    """``resources.IsZero``: nil, or every quantity 0."""
    return res is None or is_zero(res)


def strictly_ge_only_existing(larger: Res | None, smaller: Res | None) -> bool:
    """``StrictlyGreaterThanOrEqualsOnlyExisting`` (``internalStrictlyOnlyExisting`` with equals)."""
    big = larger or {}
    small = smaller or {}
    all_positive = True
    common = False
    for name, value in big.items():
        if not small and value <= 0:
            all_positive = False
        if name in small:
            common = True
            if small[name] > value:
                return False
    if not small and big:
        return all_positive
    if common:
        return True
    return bool(big) and bool(small)


def _match_any(left: Res | None, right: Res | None) -> bool:
    """``MatchAny``: a type in common."""
    return left is not None and right is not None and any(name in right for name in left)


def _sub_only_existing(base: Res | None, delta: Res | None) -> dict[str, int] | None:
    """``SubOnlyExisting``: base − delta over base's types."""
    if base is None:
        return None
    return {name: value - (delta or {}).get(name, 0) for name, value in base.items()}


def _min_only_existing(left: Res | None, right: Res | None) -> dict[str, int] | None:
    """``ComponentWiseMinOnlyExisting``: left's types, the smaller where right defines one."""
    if left is None:
        return None
    return {name: min(value, right[name]) if right is not None and name in right else value
            for name, value in left.items()}


def _shares(res: Res, total: Res | None) -> dict[str, float]:
    """``GetSharesTypeWise``: per type res ÷ total (res itself where total lacks the type or is 0)."""
    out: dict[str, float] = {}
    for name, value in res.items():
        if value == 0:
            continue
        denominator = (total or {}).get(name, 0)
        out[name] = float(value) if denominator == 0 else value / denominator
    return out


def _compare_shares(left: list[float], right: list[float]) -> int:
    """``compareShares`` over ascending share lists: the largest shares first."""
    li, ri = len(left) - 1, len(right) - 1
    while li >= 0 and ri >= 0:
        if left[li] != right[ri]:
            return 1 if left[li] > right[ri] else -1
        li -= 1
        ri -= 1
    for index in range(li, -1, -1):
        if left[index] != 0:
            return 1 if left[index] > 0 else -1
    for index in range(ri, -1, -1):
        if right[index] != 0:
            return -1 if right[index] > 0 else 1
    return 0


# ---------------------------------------------------------------------------------------------
# when: the start time, in log microseconds


@dataclass
class QuotaClock:
    """One queue's quota-preemption timer: ``quotaPreemptionStartTime`` (None = zero time) and delay.

    Only a managed queue of a partition with quota preemption on has one
    (``scheduler.core.quota_preemption.after_config``), so yunikorn's ``IsManaged`` and
    ``quotaPreemptionEnabled`` guards hold wherever a clock exists. Its ``isQuotaPreemptionRunning``
    guard never holds here: our tick preempts within the cycle, done before the next event."""

    delay_us: int = 0
    start_us: int | None = None

    def on_config(self, now_us: int, old_max: Res | None, new_max: Res | None, old_delay_us: int,
                  allocated: Res | None) -> None:
        """``setPreemptionTime``: after a config change that sets ``quota.preemption.delay`` (now = its log time)."""
        if self.delay_us == 0:
            return
        if _is_zero(new_max) or strictly_ge_only_existing(new_max, allocated):
            self.start_us = None
            return
        delta = self.delay_us - old_delay_us
        if equals(old_max, new_max):
            if self.start_us is None:
                if old_delay_us == 0 and self.delay_us > 0:
                    self.start_us = now_us + self.delay_us
            elif delta:
                self.start_us += delta
            return
        if _strictly_greater(old_max, new_max):
            if self.start_us is None:
                self.start_us = now_us + self.delay_us
            elif delta:
                self.start_us += delta
            return
        if _strictly_greater(new_max, old_max) and self.start_us is not None and delta:
            self.start_us += delta

    def on_allocated(self, now_us: int, max_resource: Res | None, allocated: Res | None) -> None:
        """``IncAllocatedResource``: usage pushed over max starts the delay from now when no start is set."""
        if (self.start_us is not None or self.delay_us == 0
                or _is_zero(max_resource) or strictly_ge_only_existing(max_resource, allocated)):
            return
        self.start_us = now_us + self.delay_us

    def due(self, now_us: int, max_resource: Res | None, allocated: Res | None) -> bool:
        """``tryAcquirePreemption``: over max and past the start time (clears the start when back under max)."""
        if strictly_ge_only_existing(max_resource, allocated):
            self.start_us = None
            return False
        return self.start_us is not None and now_us >= self.start_us


def _strictly_greater(larger: Res | None, smaller: Res | None) -> bool:
    """``resources.StrictlyGreaterThan``: ≥ in every type (missing = 0) and not equal; nil is zero."""
    return dominates(larger or {}, smaller or {})


# ---------------------------------------------------------------------------------------------
# what: the victims


@dataclass(frozen=True)
class QuotaCandidate:
    """An allocation as quota preemption sees it."""

    key: str
    app: str
    resource: Mapping[str, int]
    priority: int = 0
    create_us: int = 0
    originator: bool = False
    allow_preempt_self: bool = True
    required_node: str = ""
    preempted: bool = False


@dataclass
class QuotaQueue:
    """A queue's figures for quota preemption; children and allocations in our total order."""

    path: str
    max: Mapping[str, int] | None = None
    guaranteed: Mapping[str, int] | None = None
    allocated: Mapping[str, int] = field(default_factory=dict)
    preempting: Mapping[str, int] = field(default_factory=dict)
    children: list[QuotaQueue] = field(default_factory=list)
    allocations: list[QuotaCandidate] = field(default_factory=list)


def ancestors_preemptable(chain: Sequence[QuotaQueue]) -> dict[str, int] | None:
    """``GetPreemptableResource`` root → queue: guaranteed − allocated (allocated without a guarantee), min'd down."""
    out: dict[str, int] | None = {}
    for queue in chain:
        guaranteed = queue.guaranteed
        own = dict(queue.allocated) if guaranteed is None else _sub_only_existing(guaranteed, queue.allocated)
        out = min_permissive(own, out)
    return out


def preemptable_resource(queue: QuotaQueue, chain: Sequence[QuotaQueue]) -> dict[str, int] | None:
    """``setPreemptableResources``: how much to take from ``queue`` (chain = root … queue)."""
    used = _sub_only_existing(queue.allocated, queue.preempting) or {}
    if not queue.max or not used:
        return None
    over = {name: -value for name, value in (_sub_only_existing(queue.max, used) or {}).items() if value < 0}
    parents = {name: -value for name, value in (ancestors_preemptable(chain) or {}).items() if value < 0}
    result = _min_only_existing(over, parents)
    return result or None


def spread_over_children(parent: QuotaQueue, parent_res: Res) -> list[tuple[QuotaQueue, dict[str, int]]]:
    """``getChildQueuesPreemptableResource``: each leaf's part of a parent's preemptable resource."""
    used_by: list[tuple[QuotaQueue, dict[str, int]]] = []
    total: dict[str, int] = {}
    for child in parent.children:
        if not child.allocated or strictly_ge_only_existing(child.guaranteed, child.allocated):
            continue
        used = _sub_only_existing(child.guaranteed, child.allocated) if child.guaranteed else dict(child.allocated)
        part = {name: abs(value) for name, value in (used or {}).items()}
        used_by.append((child, part))
        for name, value in part.items():
            total[name] = total.get(name, 0) + value
    out: list[tuple[QuotaQueue, dict[str, int]]] = []
    for child, part in used_by:
        share = _shares(part, total)
        child_res = {name: math.floor(share.get(name, 0.0) * parent_res[name]) for name in part if name in parent_res}
        if child.children:
            out.extend(spread_over_children(child, child_res))
        else:
            out.append((child, child_res))
    return out


def _score(candidate: QuotaCandidate, ask: Res) -> int:
    """``scoreAllocationBasedOnAsk``."""
    score = 0
    if candidate.originator:
        score |= SCORE_ORIGINATOR
    if not candidate.allow_preempt_self:
        score |= SCORE_NO_PREEMPT
    if candidate.resource:
        score += sum(1 for name in ask if name in candidate.resource) * 100 // len(candidate.resource)
    return score


def _less(left: QuotaCandidate, right: QuotaCandidate, total: Res | None, ask: Res) -> bool:
    """``SortAllocationsBasedOnAsk``'s comparator, true for equal elements as in Go."""
    left_score, right_score = _score(left, ask), _score(right, ask)
    if left_score != right_score:
        return left_score > right_score
    if left.priority != right.priority:
        return left.priority < right.priority
    left_hour, right_hour = left.create_us // HOUR_US, right.create_us // HOUR_US
    if left_hour != right_hour:
        return left_hour > right_hour
    left_shares, right_shares = _shares(left.resource, total), _shares(right.resource, total)
    comp = _compare_shares(sorted(left_shares[n] for n in ask if n in left_shares),
                           sorted(right_shares[n] for n in ask if n in right_shares))
    return comp != 1


def victim_order(candidates: Sequence[QuotaCandidate], total: Res | None, ask: Res) -> list[QuotaCandidate]:
    """Go's ``sort.SliceStable`` with ``_less``, as an insertion sort (see the module docstring)."""
    out = list(candidates)
    for i in range(1, len(out)):
        j = i
        while j > 0 and _less(out[j], out[j - 1], total, ask):
            out[j], out[j - 1] = out[j - 1], out[j]
            j -= 1
    return out


def leaf_victims(leaf: QuotaQueue, preemptable: Res | None) -> list[QuotaCandidate]:
    """``filterAllocations`` + ``sortAllocations`` + ``preemptVictims`` in one leaf."""
    if _is_zero(preemptable):
        return []
    assert preemptable is not None
    candidates = [c for c in leaf.allocations
                  if _match_any(preemptable, c.resource) and not c.required_node and not c.preempted]
    taken: list[QuotaCandidate] = []
    total: dict[str, int] = {}
    for victim in victim_order(candidates, leaf.max, preemptable):
        if not fits_max_undef(preemptable, victim.resource):
            continue
        trial = {name: total.get(name, 0) + victim.resource.get(name, 0) for name in set(total) | set(victim.resource)}
        if strictly_ge_only_existing(preemptable, trial):
            total = trial
            taken.append(victim)
    return taken


def select_quota_victims(chain: Sequence[QuotaQueue]) -> list[tuple[str, QuotaCandidate]]:
    """``tryPreemption`` for ``chain[-1]`` (chain = root … queue): (leaf path, victim) in our order."""
    queue = chain[-1]
    preemptable = preemptable_resource(queue, chain)
    if not queue.children:
        return [(queue.path, victim) for victim in leaf_victims(queue, preemptable)]
    if preemptable is None:
        return []  # yunikorn dereferences the nil resource here (a panic in its goroutine); we take nothing
    out: list[tuple[str, QuotaCandidate]] = []
    for leaf, share in spread_over_children(queue, preemptable):
        out.extend((leaf.path, victim) for victim in leaf_victims(leaf, share))
    return out
