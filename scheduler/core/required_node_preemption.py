"""Required-node (daemon set) preemption: YuniKorn v1.5.2 ``required_node_preemptor.go``.

A reserved ask with a ``required_node`` that does not fit its node's available resources,
and has not preempted yet, takes what it needs on that node (``tryReservedAllocate`` →
``tryRequiredNodePreemption``). No delay, no ``preempt_other``, no guarantees, no fence;
YuniKorn 1.5.2 does it even with partition preemption disabled.

Candidates: the node's allocations without a required node, of priority at most the
ask's, not already preempted, sharing at least one resource type with the ask. Order
(``sortAllocations``): preemptable before ``allow_preemption: false``, lower priority
first, newest first, smaller first (a resource strictly greater in every type goes after),
then allocation order. Victims are taken in that order until together they cover the ask;
they are used only if they plus the node's available resources cover it.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cmp_to_key

from scheduler.core.objects import Allocation, Ask, Node


def _covers(larger: Mapping[str, int], smaller: Mapping[str, int]) -> bool:
    """``StrictlyGreaterThanOrEquals``: every type of either side, a missing type counting 0."""
    return all(larger.get(k, 0) >= smaller.get(k, 0) for k in {*larger, *smaller})


def _strictly_positive(delta: Mapping[str, int]) -> bool:
    """``StrictlyGreaterThanZero``: no type negative, one positive."""
    return all(v >= 0 for v in delta.values()) and any(v > 0 for v in delta.values())


def _before(left: Allocation, right: Allocation) -> int:
    """``sortAllocations``' less function as a comparison (-1: left first)."""
    lt, rt = (1 if left.allow_preemption else 2), (1 if right.allow_preemption else 2)
    if lt != rt:
        return -1 if lt < rt else 1
    if left.priority != right.priority:
        return -1 if left.priority < right.priority else 1
    if left.created_us != right.created_us:
        return -1 if left.created_us > right.created_us else 1
    if any(left.resources.get(k, 0) != right.resources.get(k, 0) for k in {*left.resources, *right.resources}):
        delta = {k: left.resources.get(k, 0) - right.resources.get(k, 0) for k in {*left.resources, *right.resources}}
        return 1 if _strictly_positive(delta) else -1
    return 0


def required_node_victims(node: Node, ask: Ask) -> list[Allocation]:
    """``filterAllocations``, ``sortAllocations``, ``GetVictims``: the victims, or [] when it cannot help."""
    candidates = [
        a for a in sorted(node.allocations.values(), key=lambda a: a.seq)
        if a.required_node is None and a.priority <= ask.priority and not a.preempted
        and any(k in a.resources for k in ask.resources)
    ]
    candidates.sort(key=cmp_to_key(_before))
    victims: list[Allocation] = []
    total: dict[str, int] = {}
    for alloc in candidates:
        if _covers(total, ask.resources):
            break
        for k, v in alloc.resources.items():
            total[k] = total.get(k, 0) + v
        victims.append(alloc)
    with_free = dict(total)
    for k, v in node.available().items():
        with_free[k] = with_free.get(k, 0) + v
    return victims if victims and _covers(with_free, ask.resources) else []
