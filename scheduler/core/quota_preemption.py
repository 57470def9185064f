"""yunikorn-1.9's quota preemption wired into a partition: the timers, their config and allocation hooks, the tick.

The rules themselves are ``scheduler.core.quota_preemption_19`` (pure). Here: each managed
queue with ``quota.preemption.delay`` has a ``QuotaClock`` kept per queue *path* on the
partition (``PartitionState.quota_clocks``: queue objects are rebuilt on every config change),
only under the rules profile yunikorn-1.9 with ``preemption.quotapreemptionenabled``. A config
change sets the clocks from each queue's old max and delay (``setPreemptionTime``, at the config
event's log time); an allocation committed in a queue starts its clock and its ancestors' when it
pushes them over max (``IncAllocatedResource``); and at the start of every cycle ``tick`` walks
the tree root-first and preempts in the first due queue of each branch (yunikorn's one-second
goroutine; we run it once per cycle, at the cycle's log time). Victims are marked preempted as
the preemption step's are and reported ``allocation.revoked`` with reason ``quota-preempted``
(no preemptor); the resource manager releases them.
"""

from __future__ import annotations

from collections.abc import Mapping

from events.models import AllocationRevoked, OutputData
from events.resources import Resources, add_into
from scheduler.config.godurations import positive_duration_us
from scheduler.config.profiles import RulesProfile
from scheduler.config.resolve import QUOTA_PREEMPTION_DELAY
from scheduler.core.objects import Allocation
from scheduler.core.partition import PartitionState
from scheduler.core.queues import QueueNode
from scheduler.core.quota_preemption_19 import QuotaCandidate, QuotaClock, QuotaQueue, select_quota_victims

OldQueues = Mapping[str, tuple[Resources, int]]  # queue path → (max, quota delay) before a config change


def enabled(part: PartitionState) -> bool:
    """Quota preemption runs: yunikorn-1.9 and ``preemption.quotapreemptionenabled``."""
    return part.profile is RulesProfile.YUNIKORN_1_9 and part.quota_preemption


def delay_us(part: PartitionState, path: str) -> int:
    """The queue's ``quota.preemption.delay`` in microseconds (0: unset, or not a positive duration)."""
    settings = part.settings.get(path)
    text = settings.properties.get(QUOTA_PREEMPTION_DELAY) if settings is not None else None
    return positive_duration_us(text, 0)


def _managed(part: PartitionState, path: str) -> bool:
    settings = part.settings.get(path)
    return settings is not None and not settings.dynamic


def before_config(part: PartitionState) -> dict[str, tuple[Resources, int]]:
    """Each queue's max and quota delay, recorded before a config change rebuilds the queues."""
    return {path: (dict(q.max), clock.delay_us if (clock := part.quota_clocks.get(path)) else 0)
            for path, q in part.queues.items()}


def after_config(part: PartitionState, quota_enabled: bool, old: OldQueues, now_us: int) -> None:
    """After a config is applied (the partition's profile set): its ``quotapreemptionenabled``, and
    the clocks set as ``setPreemptionTime`` does at the change's log time ``now_us``."""
    part.quota_preemption = quota_enabled
    if not enabled(part):
        part.quota_clocks = {}
        return
    clocks: dict[str, QuotaClock] = {}
    for path, queue in part.queues.items():
        delay = delay_us(part, path)
        if delay == 0 or not _managed(part, path):
            continue
        clock = part.quota_clocks.get(path) or QuotaClock()
        old_max, old_delay = old.get(path, ({}, 0))
        clock.delay_us = delay
        clock.on_config(now_us, old_max or None, queue.max or None, old_delay, queue.allocated)
        clocks[path] = clock
    part.quota_clocks = clocks


def on_allocated(part: PartitionState, leaf: QueueNode, now_us: int) -> None:
    """An allocation committed in ``leaf``: start the clocks of it and its ancestors it pushed over max."""
    queue: QueueNode | None = leaf
    while queue is not None:
        clock = part.quota_clocks.get(queue.path)
        if clock is not None:
            clock.on_allocated(now_us, queue.max or None, queue.allocated)
        queue = queue.parent


def due_queues(part: PartitionState, now_us: int) -> list[QueueNode]:
    """The tick's walk, root-first: the first due queue of each branch (its subtree is not visited).
    Clears the start time of a visited queue back within its max, as ``tryAcquirePreemption``."""
    out: list[QueueNode] = []
    stack = [part.root]
    while stack:
        queue = stack.pop()
        clock = part.quota_clocks.get(queue.path)
        if clock is not None and clock.due(now_us, queue.max or None, queue.allocated):
            out.append(queue)
            continue
        stack.extend(reversed(queue.children))
    return out


def tick(part: PartitionState, now_us: int, out: list[OutputData]) -> None:
    """At a cycle's start: quota-preempt in every due queue (``allocation.revoked`` ``quota-preempted``)."""
    for queue in due_queues(part, now_us):
        chain: list[QuotaQueue] = []
        ancestor = queue.parent
        while ancestor is not None:
            chain.insert(0, _figures(part, ancestor, None))
            ancestor = ancestor.parent
        allocations: dict[tuple[str, str], Allocation] = {}
        chain.append(_figures(part, queue, allocations))
        for _, victim in select_quota_victims(chain):
            alloc = allocations[(victim.app, victim.key)]
            alloc.preempted = True
            owner = part.apps[alloc.app_id]
            add_into(part.preempting.setdefault(owner.queue.path, {}), alloc.resources)
            part.form.app_changed(owner.app_id)
            out.append(AllocationRevoked.model_construct(
                app_id=alloc.app_id, ask_id=alloc.ask_id, node_id=alloc.node_id, reason="quota-preempted",
                decision_id=alloc.decision_id, preemptor=None))


def _figures(part: PartitionState, queue: QueueNode,
             allocations: dict[tuple[str, str], Allocation] | None) -> QuotaQueue:
    """``queue`` as quota preemption sees it; with its subtree and its leaves' allocations (collected
    into ``allocations``) when that is given. yunikorn's "originator" pod is not tracked: never one."""
    preempting: dict[str, int] = {}
    for path, res in part.preempting.items():
        if path == queue.path or path.startswith(queue.path + "."):
            add_into(preempting, res)
    figures = QuotaQueue(queue.path, queue.max or None, queue.guaranteed or None, dict(queue.allocated), preempting)
    if allocations is None:
        return figures
    figures.children = [_figures(part, child, allocations) for child in queue.children]
    if queue.is_leaf:
        for app in sorted((part.apps[app_id] for app_id in queue.apps), key=lambda a: a.seq):  # the leaf's own
            for alloc in sorted(app.allocations.values(), key=lambda al: al.seq):
                allocations[(app.app_id, alloc.ask_id)] = alloc
                figures.allocations.append(QuotaCandidate(
                    key=alloc.ask_id, app=app.app_id, resource=alloc.resources, priority=alloc.priority,
                    create_us=alloc.created_us, allow_preempt_self=alloc.allow_preemption,
                    required_node=alloc.required_node or "", preempted=alloc.preempted))
    return figures
