"""The audit's own picture of the cluster, folded from inputs and decisions without the scheduler core.

Nodes (capacity, occupied, schedulable, what decisions put on them), applications and
their leaf queue, pending asks, live allocations, and per-queue allocated totals rolled
up the queue path. Inputs the scheduler rejected (told by ``input.rejected`` in the same
cycle) or could not apply (unknown app, node, queue) are skipped, as the scheduler does.
Queue limits come from the configuration via ``scheduler.config.load_config`` (parsing,
not decision code). Nothing here imports the scheduler core.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from events.models import (
    AllocationReleased,
    AppAdded,
    AppRemoved,
    AskAdded,
    AskRemoved,
    ConfigUpdated,
    InputEvent,
    NodeAdded,
    NodeRemoved,
    NodeUpdated,
    PriorityClassDeleted,
    PriorityClassUpserted,
)
from events.resources import Resources, add_into, normalized, sub_into
from events.seen import SeenIds
from replay.audit.gang import GangAudit
from replay.audit.user_limits import UserLimitAudit
from scheduler.config import ConfigError, QueueSpec, SchedulerConfig, default_config, load_config

AskKey = tuple[str, str, str]  # partition, app, ask


@dataclass
class NodeView:
    """A node as its events describe it, plus what decisions placed on it."""

    capacity: Resources
    occupied: Resources
    schedulable: bool
    allocated: Resources = field(default_factory=dict)


@dataclass(frozen=True)
class AllocView:
    """A live allocation: where it is, how big, in which queue, by which decision."""

    node_id: str
    resources: Resources
    queue: str
    decision_id: str
    priority: int = 0


@dataclass
class QueueLimits:
    """One partition's configured queues: leaf paths and the max of each queue that sets one."""

    leaves: set[str]
    maxes: dict[str, Resources]


def queue_prefixes(path: str) -> Iterator[str]:
    """``root.a.b`` → ``root``, ``root.a``, ``root.a.b``."""
    parts = path.split(".")
    for i in range(1, len(parts) + 1):
        yield ".".join(parts[:i])


def _limits(config: SchedulerConfig) -> dict[str, QueueLimits]:
    out = {}
    for part in config.partitions:
        limits = QueueLimits(set(), {})
        stack: list[QueueSpec] = [part.root]
        while stack:
            q = stack.pop()
            if q.is_leaf:
                limits.leaves.add(q.path)
            if q.max and q.path != part.root.path:
                limits.maxes[q.path] = dict(q.max)
            stack.extend(q.children)
        out[part.name] = limits
    return out


class AuditState:
    """The audit's fold of inputs and decisions (see the module docstring)."""

    def __init__(self) -> None:
        self.limits = _limits(default_config())
        self.user_limits = UserLimitAudit(default_config())
        self.users: dict[tuple[str, str], tuple[str, list[str]]] = {}  # (partition, app) → user, groups
        self.placed: dict[tuple[str, str], str] = {}  # (partition, app) → queue told by app.placed
        self.nodes: dict[tuple[str, str], NodeView] = {}
        self.apps: dict[tuple[str, str], str] = {}  # (partition, app) → leaf queue path
        self.pending: dict[AskKey, Resources] = {}
        self.allocs: dict[AskKey, AllocView] = {}
        self.queue_allocated: dict[tuple[str, str], Resources] = {}
        self.seen = SeenIds()  # the scheduler's rule (events.seen's windows)
        # Indexes so removals and root checks stay O(affected), not O(cluster).
        self.app_asks: dict[tuple[str, str], set[str]] = {}  # pending or allocated ask ids per app
        self.node_allocs: dict[tuple[str, str], set[AskKey]] = {}
        self.capacity: dict[str, Resources] = {}  # per partition: sum of node capacities
        self.app_partition: dict[str, str] = {}  # app id → partition (allocation.revoked names none)
        self.required: dict[AskKey, str] = {}  # pending asks with a required node → that node
        self.reserved: dict[tuple[str, str], AskKey] = {}  # (partition, node) → the ask it is held for
        # Preemption (replay.audit.preemption): the config's queue specs, priority classes (name →
        # value, global default), pending asks' priorities, and victims not yet released.
        self.config: SchedulerConfig = default_config()
        self.classes: dict[str, int] = {"system-cluster-critical": 2_000_000_000,
                                        "system-node-critical": 2_000_001_000}
        self.default_class: str | None = None
        self.ask_priority: dict[AskKey, int] = {}
        self.preempted: set[AskKey] = set()
        self.gang = GangAudit()  # task groups' budgets and placeholders (replay.audit.gang)

    # -- inputs -----------------------------------------------------------------------

    def apply(self, event: InputEvent) -> None:
        """Fold one input the scheduler did not reject (duplicates are dropped here)."""
        if not self.seen.add(event.source, event.id):
            return
        d = event.data
        if isinstance(d, AppAdded):
            limits = self.limits.get(d.partition)
            placed = self.placed.pop((d.partition, d.app_id), None)
            path = placed or d.queue.lower()
            known = placed is not None or (limits is not None and path in limits.leaves)
            if known and (d.partition, d.app_id) not in self.apps:
                self.apps[(d.partition, d.app_id)] = path
                self.users[(d.partition, d.app_id)] = (d.user, list(d.groups))
                self.app_partition[d.app_id] = d.partition
        elif isinstance(d, AppRemoved):
            self._remove_app(d.partition, d.app_id)
        elif isinstance(d, AskAdded):
            k = (d.partition, d.app_id, d.ask_id)
            res = normalized(d.resources)
            if (d.partition, d.app_id) in self.apps and k not in self.allocs and any(v > 0 for v in res.values()):
                if k not in self.pending and d.required_node is not None:
                    self.required[k] = d.required_node
                self.gang.ask_added(d, k not in self.pending)
                self.pending[k] = res
                self.ask_priority[k] = self._priority(d)
                self.app_asks.setdefault((d.partition, d.app_id), set()).add(d.ask_id)
        elif isinstance(d, AskRemoved):
            self.ask_priority.pop((d.partition, d.app_id, d.ask_id), None)
            if self.pending.pop((d.partition, d.app_id, d.ask_id), None) is not None:
                self.app_asks.get((d.partition, d.app_id), set()).discard(d.ask_id)
        elif isinstance(d, AllocationReleased):
            key = (d.partition, d.app_id, d.ask_id)
            if key in self.allocs:
                self.gang.released_by_owner(key)
                self.release(key)
                self.app_asks.get((d.partition, d.app_id), set()).discard(d.ask_id)
        elif isinstance(d, NodeAdded):
            if (d.partition, d.node_id) not in self.nodes:
                self.nodes[(d.partition, d.node_id)] = NodeView(
                    normalized(d.capacity), normalized(d.occupied), d.schedulable
                )
                add_into(self.capacity.setdefault(d.partition, {}), normalized(d.capacity))
        elif isinstance(d, NodeUpdated):
            self._update_node(d)
        elif isinstance(d, NodeRemoved):
            self._remove_node(d.partition, d.node_id)
        elif isinstance(d, ConfigUpdated):
            with contextlib.suppress(ConfigError):  # an invalid config is rejected; the old one stays
                config = self.config = load_config(d.yaml)
                self.limits = _limits(config)
                self.user_limits.reconfigure(config, {k: g for k, (_, g) in self.users.items()})
        elif isinstance(d, PriorityClassUpserted):
            self.classes[d.name] = d.value
            if d.global_default:
                self.default_class = d.name
            elif self.default_class == d.name:
                self.default_class = None
        elif isinstance(d, PriorityClassDeleted):
            self.classes.pop(d.name, None)
            if self.default_class == d.name:
                self.default_class = None

    def _priority(self, d: AskAdded) -> int:
        """An ask's priority: its class's value, its own, the global default class's, else 0."""
        if d.priority_class is not None and d.priority_class in self.classes:
            return self.classes[d.priority_class]
        if d.priority is not None:
            return d.priority
        return self.classes.get(self.default_class, 0) if self.default_class is not None else 0

    def _update_node(self, d: NodeUpdated) -> None:
        node = self.nodes.get((d.partition, d.node_id))
        if node is None:
            return
        if d.capacity is not None:
            total = self.capacity.setdefault(d.partition, {})
            sub_into(total, node.capacity)
            node.capacity = normalized(d.capacity)
            add_into(total, node.capacity)
        if d.occupied is not None:
            node.occupied = normalized(d.occupied)
        if d.schedulable is not None:
            node.schedulable = d.schedulable

    def remove_app(self, partition: str, app_id: str) -> None:
        """The app leaves (removed, or Completed: its id may be used again)."""
        self._remove_app(partition, app_id)

    def _remove_app(self, partition: str, app_id: str) -> None:
        if self.apps.pop((partition, app_id), None) is None:
            return
        self.gang.app_left(partition, app_id)
        self.users.pop((partition, app_id), None)
        for ask_id in self.app_asks.pop((partition, app_id), set()):
            k = (partition, app_id, ask_id)
            self.pending.pop(k, None)
            self.ask_priority.pop(k, None)
            self.release(k)

    def _remove_node(self, partition: str, node_id: str) -> None:
        node = self.nodes.get((partition, node_id))
        if node is None:
            return
        for k in sorted(self.node_allocs.pop((partition, node_id), set())):
            self.release(k)
        sub_into(self.capacity.setdefault(partition, {}), node.capacity)
        del self.nodes[(partition, node_id)]

    # -- allocations ------------------------------------------------------------------

    def allocate(self, key: AskKey, node_id: str, resources: Resources, queue: str, decision_id: str,
                 priority: int = 0) -> list[str]:
        """Record a decision: the ask stops pending, node and queues take its resources.

        Returns the user/group limits the decision passes (messages)."""
        self.pending.pop(key, None)
        self.required.pop(key, None)
        self.ask_priority.pop(key, None)
        self.allocs[key] = AllocView(node_id, dict(resources), queue, decision_id, priority)
        self.app_asks.setdefault((key[0], key[1]), set()).add(key[2])
        self.node_allocs.setdefault((key[0], node_id), set()).add(key)
        node = self.nodes.get((key[0], node_id))
        if node is not None:
            add_into(node.allocated, resources)
        for path in queue_prefixes(queue):
            add_into(self.queue_allocated.setdefault((key[0], path), {}), resources)
        user, groups = self.users.get((key[0], key[1]), ("", []))
        return self.user_limits.allocate(key, user, groups, queue, resources)

    def release(self, key: AskKey) -> None:
        """An allocation ends (released, revoked, its app or node removed)."""
        alloc = self.allocs.pop(key, None)
        self.preempted.discard(key)
        if alloc is None:
            return
        self.user_limits.release(key)
        self.node_allocs.get((key[0], alloc.node_id), set()).discard(key)
        node = self.nodes.get((key[0], alloc.node_id))
        if node is not None:
            sub_into(node.allocated, alloc.resources)
        for path in queue_prefixes(alloc.queue):
            sub_into(self.queue_allocated.setdefault((key[0], path), {}), alloc.resources)

    # -- facts the checks read --------------------------------------------------------

    def cluster_capacity(self, partition: str) -> Resources:
        """Sum of the partition's node capacities (root's max)."""
        return self.capacity.get(partition, {})

    def queue_max(self, partition: str, path: str) -> Mapping[str, int] | None:
        """The configured max of a queue (None when unset; root: the cluster capacity)."""
        if "." not in path:
            return self.cluster_capacity(partition)
        limits = self.limits.get(partition)
        return limits.maxes.get(path) if limits is not None else None
