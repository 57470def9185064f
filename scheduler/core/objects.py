"""The scheduler's live objects: asks (``scheduler.core.asks``), allocations, applications and nodes.

Plain mutable records with slots; all behaviour that changes several of them at once
lives in ``scheduler.core.state`` so that every cache is updated in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from events.resources import Resources
from projections.priority import MIN_PRIORITY
from scheduler.core.asks import Ask as Ask
from scheduler.core.asks import AskList
from scheduler.core.node_constraints import HostPorts, Taint
from scheduler.core.queues import QueueNode


@dataclass(slots=True, eq=False)
class Allocation:
    """Resources of one ask placed on one node, until released or revoked."""

    app_id: str
    ask_id: str
    node_id: str
    resources: Resources
    priority: int
    decision_id: str
    seq: int  # order in which allocations were made
    created_us: int = 0  # its ask's creation time (YuniKorn: the pod's creation time)
    allow_preemption: bool = True
    required_node: str | None = None
    preempted: bool = False  # chosen as a victim: counted as "preempting" until released
    placeholder: bool = False  # a gang's placeholder (scheduler.core.gang)
    task_group: str = ""
    # The host ports its ask binds on the node, (protocol, port, address): counted in the node's
    # ``host_ports`` while it lasts (scheduler.core.node_constraints). None: none.
    host_ports: list[tuple[str, int, str]] | None = None

    # Written out (as ``Ask.__init__``): compiled, a native ``__init__``, one per decision.
    def __init__(
        self, app_id: str, ask_id: str, node_id: str, resources: Resources, priority: int, decision_id: str,
        seq: int, created_us: int = 0, allow_preemption: bool = True, required_node: str | None = None,
        preempted: bool = False, placeholder: bool = False, task_group: str = "",
        host_ports: list[tuple[str, int, str]] | None = None,
    ) -> None:
        self.app_id = app_id
        self.ask_id = ask_id
        self.node_id = node_id
        self.resources = resources
        self.priority = priority
        self.decision_id = decision_id
        self.seq = seq
        self.created_us = created_us
        self.allow_preemption = allow_preemption
        self.required_node = required_node
        self.preempted = preempted
        self.placeholder = placeholder
        self.task_group = task_group
        self.host_ports = host_ports


@dataclass(slots=True, eq=False)
class TaskGroup:
    """A gang's task group in its app (YuniKorn ``PlaceholderData``): placeholders asked for,
    replaced by real allocations, and given up (timed out, released by the resource manager)."""

    count: int = 0
    replaced: int = 0
    timed_out: int = 0


@dataclass(slots=True, eq=False)
class Gang:
    """An app's gang scheduling (``app.added``'s gang fields and what its placeholders did):
    present only on apps that use it, so the core without placeholders reads one ``None``."""

    placeholder_ask: Resources  # the total of its placeholder asks, over all task groups
    hard: bool  # gang_scheduling_style Hard: a timeout fails the app (Soft: it resumes)
    timeout_us: int  # how long its placeholders may wait to be replaced, from the first allocated
    placeholders: Resources = field(default_factory=dict)  # allocated placeholders (not in App.allocated)
    groups: dict[str, TaskGroup] = field(default_factory=dict)
    timer_us: int | None = None  # when the placeholder timeout fires (armed at the first placeholder)
    allocating_accepted: bool = False  # allocated placeholders while Accepted (YuniKorn allocatingAcceptedApps)

@dataclass(slots=True, eq=False)
class App:
    """An application in a leaf queue with its pending asks (pre-sorted) and allocations."""

    app_id: str
    partition: str
    queue: QueueNode
    user: str
    groups: list[str]
    tags: dict[str, str]
    submit_us: int
    seq: int
    state: str = "New"
    state_since_us: int = 0
    asks: dict[str, Ask] = field(default_factory=dict)
    sorted_asks: AskList = field(default_factory=AskList)
    pending: Resources = field(default_factory=dict)
    allocated: Resources = field(default_factory=dict)
    allocations: dict[str, Allocation] = field(default_factory=dict)
    priority: int = MIN_PRIORITY
    share: tuple[float, ...] | None = None  # cached usage share vs the leaf's guarantee
    sort_key: tuple[object, ...] | None = None  # key under which the leaf's app list holds it
    stateaware_disabled: bool = False
    limit_group: str = ""  # the group its user/group limits track it under ('' = none)
    gang: Gang | None = None  # gang scheduling: placeholders and task groups (None: none sent)
    # yunikorn-1.9's unschedulable-ask backoff: the walk skips the app until this log time (0: none)
    backoff_until_us: int = 0

    def head_priority(self) -> int:
        """Priority of the first pending ask: the app's priority (MinPriority with none)."""
        return self.sorted_asks[0].priority if self.sorted_asks else MIN_PRIORITY


@dataclass(slots=True, eq=False)
class Node:
    """A node: capacity, usage reported from outside (occupied), and what we allocated."""

    node_id: str
    partition: str
    capacity: Resources
    occupied: Resources
    schedulable: bool
    attributes: dict[str, str]
    seq: int
    allocated: Resources = field(default_factory=dict)
    allocations: dict[tuple[str, str], Allocation] = field(default_factory=dict)
    reserved_for: tuple[str, str] | None = None  # (app, ask) this node is held for (the first, if several)
    # yunikorn-1.9: further required-node asks holding the node too (``node.go:Reserve`` allows
    # several), in the order they reserved it; None under 1.5 and while there is one
    shared_reservations: list[tuple[str, str]] | None = None
    # Set anew on every change (each re-indexes the node: ``PartitionState._reindex``), never
    # to a value it or another node of the partition had; a cache's key, never state (not in
    # the state form or snapshots).
    version: int = 0
    # ``available()`` as of the last re-index (which every change makes): the state digest
    # encodes it for each changed node without building it a second time. A cache, never state.
    indexed_available: Resources = field(default_factory=dict)
    # Where a pod may run (scheduler.core.node_constraints): Kubernetes' labels and taints, and
    # the host ports its allocations bind (kept with them: ``PartitionState.allocate``/``_drop_allocation``).
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)
    host_ports: HostPorts = field(default_factory=dict)

    def reservations(self) -> list[tuple[str, str]]:
        """Every (app, ask) holding the node, in the order they reserved it."""
        if self.reserved_for is None:
            return []
        return [self.reserved_for, *(self.shared_reservations or ())]

    def available(self) -> Resources:
        """capacity − allocated − occupied, zero entries left out (may be negative)."""
        capacity, allocated, occupied = self.capacity, self.allocated, self.occupied
        out: Resources = {}
        for name, cap in capacity.items():
            v = cap - allocated.get(name, 0) - occupied.get(name, 0)
            if v:
                out[name] = v
        # Types used but not in the capacity (rare) go negative; no set union per call.
        for used in (allocated, occupied):
            for name in used:
                if name not in capacity and name not in out:
                    v = -allocated.get(name, 0) - occupied.get(name, 0)
                    if v:
                        out[name] = v
        return out
