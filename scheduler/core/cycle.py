"""One allocation cycle: fire timers, then allocate one ask at a time until nothing fits.

A step walks from root: child queues in sorted order, depth first; in a leaf, its apps in
policy order; in an app, its asks in order; for each ask the first node in node order that
fits, provided the allocation also fits every queue's max on the way up. The first success
is applied and the walk starts again from root (so everything is re-sorted).

Within a cycle nothing is ever released, so failures are permanent until the cycle ends:
an ask that fitted nowhere, an app none of whose asks fitted, and a queue none of whose
children or apps could allocate are remembered and skipped. Skipping something that
would fail again cannot change which ask wins, only how fast it is found.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from events.models import AllocationDecided, OutputData, construct
from events.resources import fits
from projections.queues import QueueNode
from scheduler.core.objects import App, Ask, Node
from scheduler.core.partition import PartitionState
from scheduler.core.sorting import AppSortPolicy, sort_queues, stateaware_allowed
from scheduler.core.state import SchedulerState

DECIDED_FIELDS = frozenset(AllocationDecided.model_fields)


@dataclass
class CycleMemo:
    """What is known to fail for the rest of this cycle (see the module docstring)."""

    exhausted_queues: set[str] = field(default_factory=set)
    exhausted_apps: set[str] = field(default_factory=set)
    failed_prefix: dict[str, int] = field(default_factory=dict)  # app → leading asks known to fail
    unplaceable: set[tuple[tuple[str, int], ...]] = field(default_factory=set)  # shapes no node holds


def decision_id(partition: str, cycle: int, step: int) -> str:
    """Deterministic id of the step-th decision of a cycle: replay yields the same ids."""
    return f"{partition}-{cycle}-{step}"


def held_by_max_applications(app: App) -> bool:
    """An Accepted app waits while its queue or an ancestor has its maxapplications running."""
    if app.state != "Accepted":
        return False
    return any(q.max_applications and q.running_apps >= q.max_applications for q in app.queue.ancestry())


def fits_queue_headroom(part: PartitionState, leaf: QueueNode, request: dict[str, int]) -> bool:
    """The request fits ``max − allocated`` of every queue up to root (root: the cluster)."""
    for q in leaf.ancestry():
        if q.parent is None:
            cap = part.cluster_capacity
            for name, qty in request.items():
                if q.allocated.get(name, 0) + qty > cap.get(name, 0):
                    return False
        elif q.max:
            limits = q.max
            for name, qty in request.items():
                limit = limits.get(name)
                if limit is not None and q.allocated.get(name, 0) + qty > limit:
                    return False
    return True


def place(part: PartitionState, app: App, ask: Ask, memo: CycleMemo) -> Node | None:
    """The node this ask goes to now, or None."""
    request = ask.resources
    shape = tuple(request.items())
    if ask.required_node is None and shape in memo.unplaceable:
        return None  # checked first: cheaper than the headroom walk, and the answer is the same None
    if not fits_queue_headroom(part, app.queue, request):
        return None
    if ask.required_node is not None:
        node = part.nodes.get(ask.required_node)
        # schedulable or not (YuniKorn 1.5 tryAllocate: the required node skips IsSchedulable)
        if node is not None and fits(request, node.available()):
            return node
        return None
    node_id = part.index.first_fit(request)
    if node_id is None:
        memo.unplaceable.add(shape)
        return None
    return part.nodes[node_id]


def _try_app(part: PartitionState, app: App, memo: CycleMemo) -> tuple[App, Ask, Node] | None:
    asks = app.sorted_asks
    i = memo.failed_prefix.get(app.app_id, 0)
    n = len(asks)
    while i < n:
        ask = asks[i]
        node = place(part, app, ask, memo)
        if node is not None:
            memo.failed_prefix[app.app_id] = i
            return app, ask, node
        i += 1
    memo.failed_prefix[app.app_id] = i
    return None


def _try_leaf(part: PartitionState, leaf: QueueNode, memo: CycleMemo) -> tuple[App, Ask, Node] | None:
    allowed: set[str] | None = None
    if leaf.app_sort_policy == AppSortPolicy.STATEAWARE.value:
        allowed = stateaware_allowed(part.ordered_apps(leaf), list(part.starting[leaf.path].values()))
    apps = part.apps
    for _, app_id in part.candidates[leaf.path]:
        if app_id in memo.exhausted_apps or (allowed is not None and app_id not in allowed):
            continue
        app = apps[app_id]
        if held_by_max_applications(app):
            continue
        found = _try_app(part, app, memo)
        if found is not None:
            return found
        memo.exhausted_apps.add(app_id)
    return None


def _walk(part: PartitionState, queue: QueueNode, memo: CycleMemo) -> tuple[App, Ask, Node] | None:
    if queue.is_leaf:
        return _try_leaf(part, queue, memo)
    for child in sort_queues(queue.children, queue.sort_priority):
        if child.path in memo.exhausted_queues:
            continue
        found = _walk(part, child, memo)
        if found is not None:
            return found
        memo.exhausted_queues.add(child.path)
    return None


def allocate_step(part: PartitionState, memo: CycleMemo) -> tuple[App, Ask, Node] | None:
    """Find the next allocation of a partition (without applying it)."""
    if part.root.path in memo.exhausted_queues:
        return None
    found = _walk(part, part.root, memo)
    if found is None:
        memo.exhausted_queues.add(part.root.path)
    return found


def commit(
    state: SchedulerState, part: PartitionState, choice: tuple[App, Ask, Node], step: int, now_us: int,
    out: list[OutputData],
) -> None:
    """Apply a found allocation and emit its decision and any app state change."""
    app, ask, node = choice
    did = decision_id(part.name, state.cycle, step)
    part.allocate(app, ask, node, did)
    values = {"decision_id": did, "cycle": state.cycle, "ask_id": ask.ask_id, "app_id": app.app_id,
              "partition": part.name, "queue": app.queue.path, "node_id": node.node_id,
              "resources": dict(ask.resources), "priority": ask.priority}
    out.append(construct(AllocationDecided, values, set(DECIDED_FIELDS)))
    if app.state == "Accepted":
        part.transition(app, "Starting", now_us, state, out)
        if app.stateaware_disabled:
            part.transition(app, "Running", now_us, state, out)
    elif app.state == "Starting":
        part.transition(app, "Running", now_us, state, out)


def run_cycle(state: SchedulerState, now_us: int, max_allocations: int | None = None) -> tuple[list[OutputData], int]:
    """Run the next cycle at time ``now_us``; returns its outputs and decision count."""
    state.cycle += 1
    out: list[OutputData] = []
    state.fire_timers(now_us, out)
    decisions = 0
    for name in sorted(state.partitions):
        part = state.partitions[name]
        memo = CycleMemo()
        while max_allocations is None or decisions < max_allocations:
            choice = allocate_step(part, memo)
            if choice is None:
                break
            decisions += 1
            commit(state, part, choice, decisions, now_us, out)
    return out, decisions
