"""The sort policies: the order nodes, applications and queues are tried in, as enums plus pure key functions.

One module for every ordering choice the configuration makes (YuniKorn keeps them apart from
its objects too, in ``policies/``): ``NodeSortPolicy`` (a partition's ``nodesortpolicy``),
``AppSortPolicy`` (a leaf's ``application.sort.policy``) and the measure both fair orders and
the queue walk share, the usage share. Every key is ascending and total once its caller adds
the arrival-order tie-break (node id, app sequence, queue config order), so the same state
always sorts the same way, whatever the hash seed. The orders that use them: the node index
(``projections.node_index``), a leaf's app list (``scheduler.core.partition``) and the queue
walk (``scheduler.core.sorting``).

Nodes (docs/semantics.md#nodes): each node's weighted usage score is
``Σ w·(1 − available/capacity) / Σ w`` over the resource types in its capacity with a
non-zero weight. ``fair`` sorts by the score ascending (least used first), ``binpacking``
by ``1 − score`` ascending (most used first); ties by node id.

Worked example, weights ``{vcore: 4, memory: 1}``: node a uses 25% vcore and 75% memory,
node b 75% vcore and 25% memory:

>>> w = {"vcore": 4.0, "memory": 1.0}
>>> a = node_sort_key(NodeSortPolicy.FAIR, {"vcore": 1000, "memory": 100}, {"vcore": 750, "memory": 25}, w)
>>> b = node_sort_key(NodeSortPolicy.FAIR, {"vcore": 1000, "memory": 100}, {"vcore": 250, "memory": 75}, w)
>>> round(a, 4), round(b, 4)
(0.35, 0.65)

so ``fair`` tries a before b, ``binpacking`` (keys 0.65 and 0.35) b before a.

Applications: see ``app_sort_key``; its worked example covers each policy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import Enum
from typing import Any, Final

from events.resources import Resources


class NodeSortPolicy(Enum):
    """How nodes are ordered for allocation."""

    FAIR = "fair"
    BINPACKING = "binpacking"


def usage_score(capacity: Mapping[str, int], available: Mapping[str, int], weights: Mapping[str, float]) -> float:
    """Weighted usage in [0, 1] (above 1 when overcommitted); 0.0 when no type is usable."""
    return score_of(dict(capacity), dict(available), weight_items(weights))


def weight_items(weights: Mapping[str, float]) -> list[tuple[str, float]]:
    """The non-zero weights in a fixed (name) order: float sums are order-sensitive."""
    return [(name, weights[name]) for name in sorted(weights) if weights[name]]


def score_of(capacity: dict[str, int], available: dict[str, int], items: list[tuple[str, float]]) -> float:
    """``usage_score`` over typed dicts and ``weight_items``: the node index's per-update call."""
    # ``dict``, not ``Mapping``: compiled, the lookups are dict operations (once per node change)
    total = 0.0
    weight_sum = 0.0
    for name, weight in items:
        cap = capacity.get(name, 0)
        if cap <= 0:
            continue
        total += weight * (1.0 - available.get(name, 0) / cap)
        weight_sum += weight
    score = total / weight_sum if weight_sum else 0.0
    # Config validation keeps weighted sums finite; should one still overflow, a NaN score
    # would break the index's order (a bisect then finds and deletes the wrong node).
    return score if score == score else math.inf


def node_sort_key(
    policy: NodeSortPolicy, capacity: Mapping[str, int], available: Mapping[str, int], weights: Mapping[str, float]
) -> float:
    """The first component of a node's sort key under a policy (ascending; ties by node id)."""
    score = usage_score(capacity, available, weights)
    return score if policy is NodeSortPolicy.FAIR else 1.0 - score


class AppSortPolicy(Enum):
    """``application.sort.policy`` of a leaf queue."""

    FIFO = "fifo"
    FAIR = "fair"
    STATEAWARE = "stateaware"

    @classmethod
    def parse(cls, value: str) -> AppSortPolicy:
        """Case-sensitive, as YuniKorn: anything unknown is fifo."""
        return _POLICY_BY_VALUE.get(value, cls.FIFO)


_POLICY_BY_VALUE = {member.value: member for member in AppSortPolicy}

AppKey = tuple[object, ...]


def app_sort_key(
    policy: AppSortPolicy, sort_priority: bool, priority: int, share: tuple[float, ...], submit_us: int, seq: int
) -> AppKey:
    """The key apps in a leaf sort by (ascending); ``share`` is read under ``fair`` only.

    As YuniKorn ``sorters.go``: fifo+enabled (priority desc, submission), fifo+disabled
    (submission, priority desc), fair+enabled (priority desc, usage share), fair+disabled
    (usage share, priority desc). The usage share is vs the leaf's guarantee, dominant
    component first (``usage_share``). Our deterministic tie-breaks follow: submission time
    (fair only), then arrival order (``seq``). stateaware sorts as fifo (its filter is
    ``scheduler.core.sorting.stateaware_allowed``).

    Worked example (fifo, priority enabled): a (P0, t=1), b (P5, t=2), c (P5, t=3)
    sort b, c, a; with priority disabled a, b, c. Under fair with priority disabled and
    equal shares: b, c, a (priority before submission time).

    >>> apps = {"a": (0, 1, 1), "b": (5, 2, 2), "c": (5, 3, 3)}  # priority, submitted, seq
    >>> def order(policy: AppSortPolicy, sort_priority: bool) -> list[str]:
    ...     key = lambda n: app_sort_key(policy, sort_priority, apps[n][0], (0.5,), apps[n][1], apps[n][2])
    ...     return sorted(apps, key=key)
    >>> order(AppSortPolicy.FIFO, True), order(AppSortPolicy.FIFO, False), order(AppSortPolicy.FAIR, False)
    (['b', 'c', 'a'], ['a', 'b', 'c'], ['b', 'c', 'a'])
    """
    if policy is AppSortPolicy.FAIR:
        if sort_priority:
            return (-priority, share, submit_us, seq)
        return (share, -priority, submit_us, seq)
    if sort_priority:
        return (-priority, submit_us, seq)
    return (submit_us, -priority, seq)


EXACT: Final = 2**53  # below this an int converts to a double exactly


def _share_of(qty: int, g: int) -> float:
    """``qty / g`` (``float(qty)`` where no guarantee), rounded as Python's int division.

    Compiled, ``int / int`` converts both to doubles first (two roundings past 2**53);
    there the division goes through Python objects instead.
    """
    if g == 0:
        return qty * 1.0  # == float(qty), exactly
    if -EXACT < qty < EXACT and -EXACT < g < EXACT:
        return qty / g  # both exact as doubles: one rounding, as Python's
    return _divide(qty, g)


def _divide(qty: Any, g: Any) -> float:
    result: float = qty / g
    return result


def usage_share(used: Mapping[str, int], guaranteed: Mapping[str, int]) -> tuple[float, ...]:
    """used/guaranteed per type (raw used where no guarantee), zeros dropped, largest first."""
    parts: list[float] = []
    if isinstance(used, dict) and isinstance(guaranteed, dict):  # compiled: typed, no method calls
        used_d: Resources = used
        guaranteed_d: Resources = guaranteed
        for name, qty in used_d.items():
            if qty != 0:
                parts.append(_share_of(qty, guaranteed_d.get(name, 0)))
    else:
        for name, qty in used.items():
            if qty != 0:
                parts.append(_share_of(qty, guaranteed.get(name, 0)))
    n = len(parts)
    if n == 1:
        return (parts[0],)
    if n == 2:  # the usual vcore + memory: no sort call (the components are never NaN)
        a = parts[0]
        b = parts[1]
        return (a, b) if a >= b else (b, a)
    parts.sort(reverse=True)
    return tuple(parts)


def fair_max_share(used: Mapping[str, int], guaranteed: Mapping[str, int], fair_max: Mapping[str, int]) -> tuple[float]:
    """A queue's fair share under yunikorn-1.9 (YUNIKORN-2678, ``resources.go:getFairShare``): one number.

    Per resource type in use (a negative quantity is skipped): allocated ÷ guaranteed where
    the queue has a guarantee for the type, else allocated ÷ its fair max (the queue's max
    layered over its ancestors', the cluster's capacity at the top:
    ``queue.go:GetFairMaxResource``); a denominator ≤ 0 gives 1.0 when the type is used, 0
    when not; a type in neither counts nothing. The share is the largest, 0 when none.
    Divided as Go does, both quantities first converted to doubles.

    >>> fair_max_share({"vcore": 1000, "memory": 512}, {"vcore": 4000}, {"vcore": 8000, "memory": 1024})
    (0.5,)
    >>> fair_max_share({"vcore": 1000}, {}, {"memory": 1024})
    (0.0,)
    """
    best = 0.0
    for name, qty in used.items():
        if qty < 0:
            continue
        denominator = guaranteed.get(name)
        if denominator is None:
            denominator = fair_max.get(name)
            if denominator is None:
                continue
        share = (1.0 if qty > 0 else 0.0) if denominator <= 0 else float(qty) / float(denominator)
        if share > best:
            best = share
    return (best,)
