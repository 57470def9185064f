"""Audit checks for one preemption victim (``allocation.revoked``, reason ``preempted``).

Written from the rules in docs/semantics.md#preemption, not from the scheduler core:

- ``preemption-victim``: the victim is a live allocation not already preempted, and the
  preemptor is a pending ask.
- ``preemption-fence``: the victim's leaf lies inside the preemptor's preemption fence (the
  nearest queue from the preemptor's leaf up with ``preemption.policy: fence``, else root),
  and its ``preemption.policy`` is not ``disabled``.
- ``preemption-priority``: walking from the fence down to the victim's leaf, the preemptor's
  priority (adjusted by ``priority.offset``/``priority.policy: fence`` as YuniKorn does) is
  at least the victim's, unless a priority fence on the way lets everything below it go.
- ``preemption-guarantee``: with this victim (and the earlier ones) gone, the victim's leaf
  is still at or above its guarantee (YuniKorn ``IsAtOrAboveGuaranteedResource``).

A victim stays allocated (counted as preempting) until ``allocation.released``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from events.models import AllocationRevoked
from events.resources import Resources, add_into, sub_into
from replay.audit.state import AuditState
from scheduler.config import QueueSpec, find_queue


def _chain(root: QueueSpec, path: str) -> list[QueueSpec]:
    """Specs from root to the queue at ``path`` (empty when it is not configured)."""
    out = [root]
    for name in path.split(".")[1:]:
        kid = next((c for c in out[-1].children if c.name == name), None)
        if kid is None:
            return []
        out.append(kid)
    return out


def _fence(chain: list[QueueSpec]) -> QueueSpec:
    for spec in reversed(chain):
        if spec.preemption_policy == "fence":
            return spec
    return chain[0]


def _priority_allows(chain: list[QueueSpec], ask_priority: int, fence: QueueSpec, victim: list[QueueSpec],
                     victim_priority: int) -> bool:
    """YuniKorn ``findPreemptionFenceRoot`` then ``findEligiblePreemptionVictims`` on one path."""
    adjusted: dict[str, int] = {}
    current = ask_priority
    for spec in reversed(chain):
        current = spec.priority_offset if spec.priority_fence else current + spec.priority_offset
        adjusted[spec.path] = current
        if spec is fence:
            break
    p = adjusted[fence.path]
    below = victim[next(i for i, s in enumerate(victim) if s is fence) + 1:]
    for spec in below:
        if spec.path in adjusted:
            p = adjusted[spec.path]
        elif spec.priority_fence:
            return spec.priority_offset <= p  # all under a priority fence the ask reaches may go
        else:
            p -= spec.priority_offset
    return victim_priority <= p


def _permissive(chain: list[QueueSpec], cluster: Resources, guaranteed: bool) -> dict[str, int]:
    out: dict[str, int] = {} if guaranteed else dict(cluster)
    for spec in chain:
        own = spec.guaranteed if guaranteed else spec.max
        for name, value in own.items():
            out[name] = min(value, out[name]) if name in out else value
    return out


def at_or_above(chain: list[QueueSpec], cluster: Resources, used: Mapping[str, int]) -> bool:
    """``IsAtOrAboveGuaranteedResource`` of the leaf at the end of ``chain``."""
    guaranteed = _permissive(chain, cluster, True)
    limit = _permissive(chain, cluster, False)
    absolute = dict(limit)
    for name, value in guaranteed.items():
        absolute[name] = min(value, absolute[name]) if name in absolute else value
    if any(v > max(0, absolute.get(n, 0)) for n, v in used.items()):
        return True  # above its guarantee in some type
    return all(used.get(n, 0) >= v for n, v in guaranteed.items())


def _used(state: AuditState, partition: str, leaf: str) -> Resources:
    used = dict(state.queue_allocated.get((partition, leaf), {}))
    for key in state.preempted:
        alloc = state.allocs.get(key)
        if alloc is not None and key[0] == partition and alloc.queue == leaf:
            sub_into(used, alloc.resources)
    return used


def check_preemption(state: AuditState, d: AllocationRevoked) -> Iterator[tuple[str, str]]:
    """The violations of one victim (rule, message); marks it preempted."""
    part = state.app_partition.get(d.app_id, "default")
    key = (part, d.app_id, d.ask_id)
    who = f"victim {d.app_id}/{d.ask_id}"
    alloc = state.allocs.get(key)
    pre = d.preemptor
    if alloc is None or key in state.preempted or pre is None:
        yield "preemption-victim", f"{who} is not a live allocation (or was already preempted)"
        return
    pre_key = (part, pre.app_id, pre.ask_id)
    state.preempted.add(key)
    if pre_key not in state.pending:
        yield "preemption-victim", f"preemptor {pre.app_id}/{pre.ask_id} of {who} is not a pending ask"
        return
    spec = next((p for p in state.config.partitions if p.name == part), None)
    chain = _chain(spec.root, pre.queue) if spec is not None else []
    victim = _chain(spec.root, alloc.queue) if spec is not None else []
    if not chain or not victim or find_queue(spec, alloc.queue) is None:  # type: ignore[arg-type]
        return  # queues no longer configured (a draining leaf): nothing to check against
    fence = _fence(chain)
    if not any(s is fence for s in victim):
        yield "preemption-fence", (f"{who} in {alloc.queue} is outside the preemption fence {fence.path} "
                                   f"of its preemptor's queue {pre.queue}")
    elif victim[-1].preemption_policy == "disabled":
        yield "preemption-fence", f"{who} is in {alloc.queue}, whose preemption.policy is disabled"
    elif not _priority_allows(chain, state.ask_priority.get(pre_key, 0), fence, victim, alloc.priority):
        yield "preemption-priority", (f"{who} has priority {alloc.priority}, above its preemptor "
                                      f"{pre.app_id}/{pre.ask_id} ({state.ask_priority.get(pre_key, 0)})")
    cluster: Resources = {}
    add_into(cluster, state.cluster_capacity(part))
    if not at_or_above(victim, cluster, _used(state, part, alloc.queue)):
        yield "preemption-guarantee", f"{who} takes {alloc.queue} below its guarantee"
