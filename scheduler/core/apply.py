"""apply(state, event): fold one validated input event into the scheduler state.

Each handler checks its preconditions first and either changes the state or rejects the
event with a stable reason code, never both: a rejected event changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from events.codec import reject
from events.models import (
    AllocationReleased,
    AppAdded,
    AppPlaced,
    AppRemoved,
    AppStateChanged,
    AskAdded,
    AskRemoved,
    ConfigApplied,
    ConfigUpdated,
    InputEvent,
    NodeAdded,
    NodeRemoved,
    NodeUpdated,
    OutputData,
    PriorityClassDeleted,
    PriorityClassUpserted,
)
from events.resources import is_positive, normalized
from scheduler.config import ConfigError, PartitionSpec, find_queue, load_config
from scheduler.config.profiles import RulesProfile
from scheduler.core import gang, quota_preemption
from scheduler.core.acl import may_submit
from scheduler.core.bounds import (
    decision_size_problem,
    node_change_problem,
    pending_growth_problem,
    resource_types_problem,
)
from scheduler.core.node_constraints import compile_constraints, compile_taints
from scheduler.core.objects import App, Ask, Node
from scheduler.core.partition import STATEAWARE_DISABLE_TAG, PartitionState
from scheduler.core.placement import PlacementError, Submission, place_app
from scheduler.core.priorityclass import PriorityClass, PriorityError
from scheduler.core.state import SchedulerState

TERMINAL_STATES: Final = frozenset({"Completed", "Rejected", "Failed"})


class Rejected(Exception):
    """An input that cannot be applied: ``reason`` is the stable code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def apply(state: SchedulerState, event: InputEvent, out: list[OutputData]) -> None:
    """Apply one input event; outputs (rejections, state changes, revocations) go to out."""
    state.settled_cycle = None  # an input may give the walk something to do (``cycle.settled``)
    handler = _HANDLERS[type(event.data)]
    try:
        handler(state, event, out)
    except Rejected as exc:
        out.append(reject(event.id, event.type, exc.reason, exc.message))


def _partition(state: SchedulerState, name: str) -> PartitionState:
    part = state.partitions.get(name)
    if part is None:
        raise Rejected("unknown-partition", f"partition {name!r} is not configured")
    return part


def _app(part: PartitionState, app_id: str) -> App:
    app = part.apps.get(app_id)
    if app is None:
        raise Rejected("unknown-app", f"application {app_id!r} does not exist in partition {part.name!r}")
    return app


def _node(part: PartitionState, node_id: str) -> Node:
    node = part.nodes.get(node_id)
    if node is None:
        raise Rejected("unknown-node", f"node {node_id!r} does not exist in partition {part.name!r}")
    return node


def resolved_groups(user: str, groups: Sequence[str]) -> list[str]:
    """The app's groups: as sent, or — sent none — a group named after the user.

    YuniKorn 1.5's default resolver (``security/usergroup_no_resolver.go``: ``noLookupUser``
    gives the user a primary group id equal to its name, ``noLookupGroupID`` names the group
    by its id; ``UserGroupCache.ConvertUGI`` resolves only when no groups were sent), so a
    ``*`` group limit or ACL, or one naming the user, applies to an app sent without groups.
    """
    return list(groups) if groups else [user]


def _app_added(state: SchedulerState, event: InputEvent, out: list[OutputData]) -> None:
    data = event.data
    assert isinstance(data, AppAdded)
    part = _partition(state, data.partition)
    if data.app_id in part.apps:
        raise Rejected("app-exists", f"application {data.app_id!r} already exists")
    spec = next(p for p in state.config.partitions if p.name == part.name)
    problem: Rejected | None = None
    leaf = None
    groups = resolved_groups(data.user, data.groups)
    # yunikorn-1.9 places every app by the rules (the implicit ``provided`` rule when none, so an
    # unknown queue falls back to root.default); yunikorn-1.5 only when rules are configured.
    by_rules = part.profile is RulesProfile.YUNIKORN_1_9
    if spec.placement_rules or not data.queue or by_rules:
        try:
            submission = Submission(data.queue, data.user, tuple(groups), dict(data.tags))
            placement = place_app(spec.placement_rules, submission, part.queues, part.draining if by_rules else ())
        except PlacementError as exc:
            problem = Rejected("no-placement", str(exc))
        else:
            if part.is_draining(placement.path):
                problem = Rejected("no-placement", f"queue {placement.path!r} is draining: the config removed it")
            else:
                leaf, created = part.ensure_queue(placement.path)
                out.append(
                    AppPlaced.model_construct(app_id=data.app_id, partition=part.name, queue=leaf.path, created=created)
                )
    elif (leaf := part.queues.get(data.queue.lower())) is None:
        problem = Rejected("unknown-queue", f"queue {data.queue!r} does not exist")
    elif part.is_draining(leaf.path):
        problem = Rejected("unknown-queue", f"queue {data.queue!r} is draining: the config removed it")
    elif not leaf.is_leaf:
        problem = Rejected("not-a-leaf", f"queue {data.queue!r} is a parent queue; applications need a leaf")
    elif not may_submit(leaf, data.user, groups):
        problem = Rejected(
            "acl-denied", f"user {data.user!r} (groups {groups}) may not submit to {leaf.path!r}"
        )
    placeholder_ask = normalized(data.placeholder_ask)
    if problem is None and leaf is not None and (unfit := gang.unsupported(leaf, placeholder_ask)) is not None:
        problem = Rejected("gang-unsupported", unfit)
    if problem is not None:
        out.append(reject(event.id, event.type, problem.reason, problem.message))
        out.append(AppStateChanged.model_construct(app_id=data.app_id, from_="New", to="Rejected"))
        return
    assert leaf is not None
    app = App(
        app_id=data.app_id,
        partition=part.name,
        queue=leaf,
        user=data.user,
        groups=groups,
        tags=dict(data.tags),
        submit_us=event.time_us,
        seq=state.next_seq(),
        state_since_us=event.time_us,
        stateaware_disabled=stateaware_disabled(data.tags),
    )
    if gang.sends_gang(placeholder_ask, data.gang_scheduling_style, data.placeholder_timeout_ms):
        app.gang = gang.new_gang(placeholder_ask, data.gang_scheduling_style, data.placeholder_timeout_ms)
    part.add_app(app)


def stateaware_disabled(tags: dict[str, str]) -> bool:
    """YuniKorn ``GetTag``: the tag key matches case-insensitively; any non-empty value disables."""
    return any(value and key.lower() == STATEAWARE_DISABLE_TAG for key, value in tags.items())


def _app_removed(state: SchedulerState, event: InputEvent, out: list[OutputData]) -> None:
    data = event.data
    assert isinstance(data, AppRemoved)
    part = _partition(state, data.partition)
    part.remove_app(_app(part, data.app_id), out)


def _ask_added(state: SchedulerState, event: InputEvent, out: list[OutputData]) -> None:
    data = event.data
    assert isinstance(data, AskAdded)
    # Each field read once: the event is a pydantic model, and this runs for every ask.
    ask_id, priority_class, preempt_other = data.ask_id, data.priority_class, data.preempt_other
    part = _partition(state, data.partition)
    app = _app(part, data.app_id)
    app_id = app.app_id
    if app.state in TERMINAL_STATES:
        raise Rejected("app-completed", f"application {app_id!r} is {app.state}")
    resources = normalized(data.resources)
    if not is_positive(resources):
        raise Rejected("invalid", f"ask {ask_id!r} requests no resources")
    if ask_id in app.allocations:
        raise Rejected("ask-allocated", f"ask {ask_id!r} of {app_id!r} is already allocated")
    too_large = decision_size_problem(resources, ask_id, app_id, app.queue.path)
    if too_large is not None:
        raise Rejected("too-large", f"ask {ask_id!r}: {too_large}")
    existing = app.asks.get(ask_id)
    problem = pending_growth_problem(part, resources, existing.resources if existing is not None else {})
    if problem is not None:
        raise Rejected("overflow", f"ask {ask_id!r}: {problem}")
    problem = resource_types_problem(part, resources)
    if problem is not None:
        raise Rejected("too-many-resource-types", f"ask {ask_id!r}: {problem}")
    if existing is not None:
        part.update_ask(app, existing, resources)
        return
    classes = state.priority_classes
    try:
        priority = classes.resolve(data.priority, priority_class)
    except PriorityError as exc:
        raise Rejected(exc.reason, str(exc)) from None
    time_us = event.time_us
    ask = Ask(
        app_id=app_id,
        ask_id=ask_id,
        resources=resources,
        priority=priority,
        created_us=time_us,
        seq=state.next_seq(),
        required_node=data.required_node,
        priority_class=priority_class,
        tags=dict(data.tags),
        preempt_other=preempt_other if preempt_other is not None else classes.preempts(priority_class),
        allow_preemption=data.allow_preemption,
    )
    if data.constraints is not None:
        ask.constraints = compile_constraints(data.constraints)
    if data.placeholder or data.task_group:
        ask.placeholder, ask.task_group = data.placeholder, data.task_group
        gang.ask_added(app, ask)
    part.add_ask(app, ask)
    if app.state == "New":
        part.transition(app, "Accepted", time_us, state, out)
    elif app.state == "Completing":
        part.transition(app, "Running", time_us, state, out)


def _ask_removed(state: SchedulerState, event: InputEvent, out: list[OutputData]) -> None:
    data = event.data
    assert isinstance(data, AskRemoved)
    part = _partition(state, data.partition)
    app = _app(part, data.app_id)
    ask = app.asks.get(data.ask_id)
    if ask is None:
        raise Rejected("unknown-ask", f"ask {data.ask_id!r} is not pending in {app.app_id!r}")
    part.remove_ask(app, ask, out)
    part.maybe_completing(app, event.time_us, state, out)


def _allocation_released(state: SchedulerState, event: InputEvent, out: list[OutputData]) -> None:
    data = event.data
    assert isinstance(data, AllocationReleased)
    part = _partition(state, data.partition)
    app = _app(part, data.app_id)
    alloc = app.allocations.get(data.ask_id)
    if alloc is None:
        raise Rejected("unknown-ask", f"ask {data.ask_id!r} of {app.app_id!r} has no allocation")
    part.release(app, alloc)
    if alloc.placeholder:
        gang.placeholder_removed(part, app, alloc, event.time_us, state, out, by_owner=True)
    else:
        part.maybe_completing(app, event.time_us, state, out, real_only=True)


def _node_added(state: SchedulerState, event: InputEvent, out: list[OutputData]) -> None:
    data = event.data
    assert isinstance(data, NodeAdded)
    part = _partition(state, data.partition)
    if data.node_id in part.nodes:
        raise Rejected("node-exists", f"node {data.node_id!r} already exists")
    capacity, occupied = normalized(data.capacity), normalized(data.occupied)
    problem = node_change_problem(part, None, data.node_id, capacity, occupied)
    if problem is not None:
        raise Rejected("overflow", problem)
    problem = resource_types_problem(part, capacity | occupied)
    if problem is not None:
        raise Rejected("too-many-resource-types", f"node {data.node_id!r}: {problem}")
    node = Node(
        node_id=data.node_id,
        partition=part.name,
        capacity=capacity,
        occupied=occupied,
        schedulable=data.schedulable,
        attributes=dict(data.attributes),
        seq=state.next_seq(),
    )
    if data.labels:
        node.labels = dict(data.labels)
    if data.taints:
        node.taints = compile_taints(data.taints)
    part.add_node(node)


def _node_updated(state: SchedulerState, event: InputEvent, out: list[OutputData]) -> None:
    data = event.data
    assert isinstance(data, NodeUpdated)
    part = _partition(state, data.partition)
    node = _node(part, data.node_id)
    capacity = normalized(data.capacity) if data.capacity is not None else None
    occupied = normalized(data.occupied) if data.occupied is not None else None
    problem = node_change_problem(
        part, node, data.node_id, node.capacity if capacity is None else capacity,
        node.occupied if occupied is None else occupied,
    )
    if problem is not None:
        raise Rejected("overflow", problem)
    problem = resource_types_problem(
        part, (node.capacity if capacity is None else capacity) | (node.occupied if occupied is None else occupied),
        node,
    )
    if problem is not None:
        raise Rejected("too-many-resource-types", f"node {data.node_id!r}: {problem}")
    if data.labels is not None:
        node.labels = dict(data.labels)
    if data.taints is not None:
        node.taints = compile_taints(data.taints)
    part.update_node(node, capacity, occupied, data.schedulable)


def _node_removed(state: SchedulerState, event: InputEvent, out: list[OutputData]) -> None:
    data = event.data
    assert isinstance(data, NodeRemoved)
    part = _partition(state, data.partition)
    part.remove_node(_node(part, data.node_id), event.time_us, state, out)


def _config_updated(state: SchedulerState, event: InputEvent, out: list[OutputData]) -> None:
    data = event.data
    assert isinstance(data, ConfigUpdated)
    try:
        config = load_config(data.yaml)
    except ConfigError as exc:
        raise Rejected("config-invalid", "; ".join(exc.reasons)) from None
    new_names = {p.name for p in config.partitions}
    problems = [
        f"partition {name!r} still has applications or nodes"
        for name, part in state.partitions.items()
        if name not in new_names and (part.apps or part.nodes)
    ]
    for spec in config.partitions:
        part = state.partitions.get(spec.name)
        if part is not None:
            problems.extend(_dry_run_reconfigure(part, spec))
    if problems:
        raise Rejected("config-invalid", "; ".join(problems))
    # each queue's max and quota delay before the rebuild (yunikorn-1.9's quota preemption timers)
    old_queues = {name: quota_preemption.before_config(part) for name, part in state.partitions.items()}
    for spec in config.partitions:
        part = state.partitions.get(spec.name)
        if part is None:
            state.partitions[spec.name] = PartitionState(
                spec.name, spec.root, spec.node_sort_policy, spec.resource_weights
            )
        else:
            part.reconfigure(spec.root, spec.node_sort_policy, spec.resource_weights, state.config.yaml)
    for spec in config.partitions:
        part = state.partitions[spec.name]
        part.set_profile(state.profile_override or spec.rules)
        quota_preemption.after_config(part, spec.quota_preemption, old_queues.get(spec.name, {}), event.time_us)
    for name in [n for n in state.partitions if n not in new_names]:
        del state.partitions[name]
    state.config = config
    out.append(ConfigApplied.model_construct(checksum=config.checksum))


def _dry_run_reconfigure(part: PartitionState, spec: PartitionSpec) -> list[str]:
    problems = []
    for app in part.apps.values():
        # A dropped queue drains (keeps its place under its old ancestors); it cannot become,
        # or end up under, a leaf of the new config.
        path = app.queue.path
        prefixes = [path[:i] for i, ch in enumerate(path) if ch == "."]
        if any((q := find_queue(spec, p)) is not None and q.is_leaf for p in prefixes) or (
            (queue := find_queue(spec, path)) is not None and not queue.is_leaf
        ):
            problems.append(f"queue {path} still has application {app.app_id} and would become a parent queue "
                            "or sit under a leaf")
    return problems


def _class_upserted(state: SchedulerState, event: InputEvent, out: list[OutputData]) -> None:
    data = event.data
    assert isinstance(data, PriorityClassUpserted)
    try:
        state.priority_classes.upsert(
            PriorityClass(data.name, data.value, data.global_default, data.preemption_policy)
        )
    except PriorityError as exc:
        raise Rejected(exc.reason, str(exc)) from None


def _class_deleted(state: SchedulerState, event: InputEvent, out: list[OutputData]) -> None:
    data = event.data
    assert isinstance(data, PriorityClassDeleted)
    try:
        state.priority_classes.delete(data.name)
    except PriorityError as exc:
        raise Rejected(exc.reason, str(exc)) from None


_HANDLERS: dict[type, Callable[[SchedulerState, InputEvent, list[OutputData]], None]] = {
    AppAdded: _app_added,
    AppRemoved: _app_removed,
    AskAdded: _ask_added,
    AskRemoved: _ask_removed,
    AllocationReleased: _allocation_released,
    NodeAdded: _node_added,
    NodeUpdated: _node_updated,
    NodeRemoved: _node_removed,
    ConfigUpdated: _config_updated,
    PriorityClassUpserted: _class_upserted,
    PriorityClassDeleted: _class_deleted,
}
