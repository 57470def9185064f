"""One scheduler partition's state and every mutation of it, each keeping all caches right.

The queue tree (``scheduler.core.queues``), the node index (``projections.node_index``), the
per-leaf sorted app lists and the apps' sorted asks are only ever changed here, so each
operation updates all of them together. Operations append their outputs to ``out``.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Mapping
from typing import Protocol

from events.models import AllocationRevoked, AppStateChanged, AskReserved, AskUnreserved, OutputData
from events.resources import Resources, add_into, is_positive, sub_into
from projections.node_index import NodeIndex
from projections.policies import AppKey, AppSortPolicy, NodeSortPolicy
from scheduler.config import QueueSpec
from scheduler.config.profiles import DEFAULT_PROFILE, RulesProfile
from scheduler.core.draining import chain_of, effective_root
from scheduler.core.dynamic_queues import QueueSettings, create_path, prune, settings_from_spec
from scheduler.core.form_cache import FormCache
from scheduler.core.node_constraints import bind_ports
from scheduler.core.objects import Allocation, App, Ask, Node
from scheduler.core.queues import RUNNING_STATES, QueueNode
from scheduler.core.quota_preemption_19 import QuotaClock
from scheduler.core.reserve_candidates import ReserveCandidates
from scheduler.core.sorting import leaf_sort_key
from scheduler.core.user_limits import LimitIndex, UserLimits, charge

STARTING_TIMEOUT_US = 5 * 60 * 1_000_000
COMPLETING_TIMEOUT_US = 30 * 1_000_000
STATEAWARE_DISABLE_TAG = "application.stateaware.disable"


class Timers(Protocol):
    """Where app timers are registered (the scheduler state keeps one heap)."""

    def schedule(self, deadline_us: int, app: App) -> None: ...

    def schedule_placeholder(self, deadline_us: int, app: App) -> None: ...


def build_tree(spec: QueueSpec, parent: QueueNode | None = None, order: int = 0) -> QueueNode:
    """A fresh queue tree (no apps) from a queue spec."""
    node = QueueNode(
        name=spec.name,
        path=spec.path,
        parent=parent,
        is_leaf=spec.is_leaf,
        order=order,
        fence=spec.priority_fence,
        offset=spec.priority_offset,
        sort_priority=spec.sort_priority,
        app_sort_policy=spec.app_sort_policy,
        guaranteed=spec.guaranteed,
        max_resources=spec.max,
        max_applications=spec.max_applications,
        submit_acl=spec.submit_acl,
        admin_acl=spec.admin_acl,
        preemption_policy=spec.preemption_policy,
        preemption_delay_us=spec.preemption_delay_us,
        zero_guaranteed=spec.zero_guaranteed,
        unsched_backoff=spec.unsched_backoff,
        backoff_delay_us=spec.backoff_delay_us,
    )
    node.children = [build_tree(c, node, i) for i, c in enumerate(spec.children)]
    return node


class PartitionState:
    """Queues, apps and nodes of one partition, with their projections."""

    def __init__(self, name: str, root_spec: QueueSpec, node_policy: str, weights: Mapping[str, float]) -> None:
        self.name = name
        self.config_root = root_spec  # the tree the config describes; draining leaves are grafted on
        self.draining: dict[str, str] = {}  # draining leaf path → text of the config it was last in
        self.root = build_tree(root_spec)
        self.queues: dict[str, QueueNode] = {q.path: q for q in self.root.walk()}
        self.apps: dict[str, App] = {}
        self.nodes: dict[str, Node] = {}
        self.index = NodeIndex(NodeSortPolicy(node_policy), weights)
        # The node each waiting request shape would reserve; told of every node change below.
        self.reserve_candidates = ReserveCandidates()
        self.node_changes = 0  # node re-indexes so far: the source of ``Node.version``
        self.cluster_capacity: Resources = {}
        # Resource type → nodes whose capacity or occupied names it (with the roll-ups' pending
        # and allocated: the types in use, which ``bounds.resource_types_problem`` bounds)
        self.node_types: dict[str, int] = {}
        # leaf → its listed apps as (sort key, app id), ascending: a plain list, bisect/insort are C calls
        self.candidates: dict[str, list[tuple[AppKey, str]]] = {p: [] for p, q in self.queues.items() if q.is_leaf}
        self.starting: dict[str, dict[str, App]] = {p: {} for p, q in self.queues.items() if q.is_leaf}
        self.allocation_seq = 0
        # (app, ask) → node held for it, in the order the reservations were made
        self.reservations: dict[tuple[str, str], str] = {}
        # The same reservations per app (ask id → ask), and per queue path the number held by
        # apps at or below it: the reserved step walks to them without a pass over all of them.
        self.reserved_asks: dict[str, dict[str, Ask]] = {}
        self.reserved_under: dict[str, int] = {}
        self.preempting: dict[str, Resources] = {}  # leaf path → resources of victims not yet released
        self.placeholder_allocations = 0  # gang placeholders allocated: the replacement step runs while any
        self.form = FormCache()  # every app/node change below is marked here for the digest
        self.settings: dict[str, QueueSettings] = settings_from_spec(root_spec)
        index = LimitIndex.from_spec(root_spec)
        self.limits: UserLimits | None = UserLimits(index) if index is not None else None
        self.profile: RulesProfile = DEFAULT_PROFILE  # the config's ``rules`` (set by whoever applies it)
        # yunikorn-1.9's quota preemption (scheduler.core.quota_preemption): the config's
        # ``preemption.quotapreemptionenabled``, and per queue path its timer (kept across rebuilds)
        self.quota_preemption = False
        self.quota_clocks: dict[str, QuotaClock] = {}
        # What a settled cycle (``scheduler.core.cycle.settled``) needs to know that no walk could
        # change its outcome with time alone: whether any ask ever added may preempt, and the
        # latest unschedulable-ask backoff.
        self.preempting_asks = False
        self.backoffs_until_us = 0

    def back_off(self, app: App, until_us: int) -> None:
        """yunikorn-1.9's unschedulable-ask backoff: the walk skips ``app`` until ``until_us``."""
        app.backoff_until_us = until_us
        if until_us > self.backoffs_until_us:
            self.backoffs_until_us = until_us

    # -- dynamic queues -------------------------------------------------------------

    def ensure_queue(self, path: str) -> tuple[QueueNode, bool]:
        """The queue at ``path``, creating it (a leaf) and missing parents dynamically.

        The caller checked that the nearest existing ancestor is a parent queue and that
        every new name is valid. Returns the queue and whether it was created.
        """
        existing = self.queues.get(path)
        if existing is not None:
            return existing, False
        created = create_path(self.queues, self.settings, path)
        leaf = created[-1]
        if self.profile is not DEFAULT_PROFILE:
            self._under_profile(created)
        self.candidates[leaf.path] = []
        self.starting[leaf.path] = {}
        return leaf, True

    def _prune(self, queue: QueueNode) -> None:
        """Remove a dynamic queue left without apps, then its emptied dynamic parents."""
        for path in prune(queue, self.queues, self.settings):
            self.candidates.pop(path, None)
            self.starting.pop(path, None)

    # -- applications -------------------------------------------------------------

    def add_app(self, app: App) -> None:
        """Attach a new (New-state, empty) app to its leaf."""
        self.apps[app.app_id] = app
        app.queue.app_added(app)
        if self.limits is not None:
            app.limit_group = self.limits.index.resolve_group(app.queue, app.groups)
        self.form.app_changed(app.app_id)

    def remove_app(self, app: App, out: list[OutputData]) -> None:
        """Remove an app with its asks and allocations; resources return to nodes and queues.

        As YuniKorn ``partition.go:removeApplication``: an Accepted, Starting or Running app
        completes (``→Completing``; no timer, the app is gone), then leaves. One that held no
        allocation goes on to Completed at once, as does a Completing one: YuniKorn's
        ``RemoveAllocationAsk("")`` moves it to Completing and ``RemoveAllAllocations``, with
        nothing pending, sends ``CompleteApplication`` again (an app that held allocations
        took the first one there, and its timer is cleared).
        """
        held = bool(app.allocations)
        for ask in list(app.asks.values()):
            self.unreserve(app, ask, "removed", out)
            self._drop_ask(app, ask)
        for alloc in list(app.allocations.values()):
            self._drop_allocation(app, alloc)
        if app.state in ("Accepted", "Starting", "Running"):
            out.append(AppStateChanged.model_construct(app_id=app.app_id, from_=app.state, to="Completing"))
            self._set_state_quiet(app, "Completing")
        if app.state == "Completing" and not held:
            out.append(AppStateChanged.model_construct(app_id=app.app_id, from_="Completing", to="Completed"))
            self._set_state_quiet(app, "Completed")
        self.detach(app)

    def detach(self, app: App) -> None:
        """The app leaves its queue and the partition (YuniKorn ``moveTerminatedApp``); its id is free.

        A draining queue left without apps disappears (and so do draining ancestors left empty).
        """
        self._refresh(app)
        self._stop_allocating_accepted(app)
        leaf = app.queue
        leaf.app_removed(app)
        self.starting[leaf.path].pop(app.app_id, None)
        del self.apps[app.app_id]
        self.form.app_changed(app.app_id)
        if leaf.path in self.draining and not leaf.apps:
            del self.draining[leaf.path]
            self._rebuild(self.index.policy.value, self.index.weights)
        else:
            self._prune(leaf)

    def transition(self, app: App, to: str, now_us: int, timers: Timers, out: list[OutputData]) -> None:
        """Move an app to a new state, keep running counts, arm timers, emit the change."""
        frm = app.state
        if frm == to:
            return
        self._set_state_quiet(app, to)
        app.state_since_us = now_us
        out.append(AppStateChanged.model_construct(app_id=app.app_id, from_=frm, to=to))
        if to == "Starting":
            timers.schedule(now_us + STARTING_TIMEOUT_US, app)
        elif to == "Completing":
            timers.schedule(now_us + COMPLETING_TIMEOUT_US, app)

    def _set_state_quiet(self, app: App, to: str) -> None:
        was_running = app.state in RUNNING_STATES
        is_running = to in RUNNING_STATES
        if was_running != is_running:
            app.queue.add_running(1 if is_running else -1)
            if self.limits is not None:
                self.limits.set_running(app, is_running)
            if is_running:
                self._stop_allocating_accepted(app)
        starting = self.starting[app.queue.path]
        if to == "Starting":
            starting[app.app_id] = app
        else:
            starting.pop(app.app_id, None)
        app.state = to
        self.form.app_changed(app.app_id)

    def _stop_allocating_accepted(self, app: App) -> None:
        """A gang app counted as allocating while Accepted runs now, or leaves (YuniKorn
        ``incRunningApps``, ``RemoveApplication``): it no longer counts for maxapplications."""
        gang = app.gang
        if gang is not None and gang.allocating_accepted:
            gang.allocating_accepted = False
            app.queue.add_allocating_accepted(-1)

    def maybe_completing(self, app: App, now_us: int, timers: Timers, out: list[OutputData],
                         *, real_only: bool = False) -> None:
        """All asks and allocations gone: the app starts completing. ``real_only`` (a real
        allocation ended): a gang's placeholders left do not count (YuniKorn ``hasZeroAllocations``)."""
        if app.asks or app.state not in ("Accepted", "Starting", "Running"):
            return
        if not app.allocations or (real_only and app.gang is not None and not is_positive(app.allocated)):
            self.transition(app, "Completing", now_us, timers, out)

    # -- asks ---------------------------------------------------------------------

    def add_ask(self, app: App, ask: Ask) -> None:
        """Add a pending ask."""
        if ask.preempt_other:
            self.preempting_asks = True
        app.asks[ask.ask_id] = ask
        app.sorted_asks.add(ask)
        add_into(app.pending, ask.resources)
        app.queue.add_pending(ask.resources)
        self._refresh(app)

    def update_ask(self, app: App, ask: Ask, resources: Resources) -> None:
        """Replace the resources of a pending ask."""
        sub_into(app.pending, ask.resources)
        app.queue.sub_pending(ask.resources)
        app.sorted_asks.set_resources(ask, resources)  # the list counts its asks' shapes
        add_into(app.pending, resources)
        app.queue.add_pending(resources)
        self._refresh(app)

    def remove_ask(self, app: App, ask: Ask, out: list[OutputData]) -> None:
        """Remove a pending ask (and its reservation)."""
        self.unreserve(app, ask, "removed", out)
        self._drop_ask(app, ask)
        self._refresh(app)

    # -- reservations (scheduler.core.reservations decides them) ---------------------

    def reserve(self, app: App, ask: Ask, node: Node, cycle: int, reason: str, out: list[OutputData] | None,
                now_us: int = 0) -> None:
        """Hold ``node`` for ``ask`` (since cycle ``cycle``, at log time ``now_us``): it leaves the node
        index, so no other ask is placed there."""
        ask.reserved_node = node.node_id
        ask.reserved_cycle = cycle
        ask.reserved_us = now_us
        ask.fit_checked = -1
        key = (app.app_id, ask.ask_id)
        if node.reserved_for is None or node.reserved_for == key:
            node.reserved_for = key
        elif node.shared_reservations is None:  # yunikorn-1.9: another required-node ask holds it too
            node.shared_reservations = [key]
        elif key not in node.shared_reservations:
            node.shared_reservations.append(key)
        if (app.app_id, ask.ask_id) not in self.reservations:
            self._count_reservation(app, ask, 1)
        self.reservations[(app.app_id, ask.ask_id)] = node.node_id
        self._reindex(node)
        if out is not None:
            out.append(AskReserved.model_construct(app_id=app.app_id, ask_id=ask.ask_id, node_id=node.node_id,
                                                   reason=reason))

    def unreserve(self, app: App, ask: Ask, reason: str, out: list[OutputData] | None) -> None:
        """End the ask's reservation, if it has one; the node returns to the index."""
        node_id = ask.reserved_node
        if node_id is None:
            return
        ask.reserved_node = None
        ask.reserved_cycle = 0
        ask.reserved_us = 0
        ask.fit_checked = -1
        del self.reservations[(app.app_id, ask.ask_id)]
        self._count_reservation(app, ask, -1)
        node = self.nodes.get(node_id)
        if node is not None:
            key = (app.app_id, ask.ask_id)
            shared = node.shared_reservations
            if node.reserved_for == key:
                node.reserved_for = shared.pop(0) if shared else None
            elif shared is not None and key in shared:
                shared.remove(key)
            if shared is not None and not shared:
                node.shared_reservations = None
            self._reindex(node)
        if out is not None:
            out.append(AskUnreserved.model_construct(app_id=app.app_id, ask_id=ask.ask_id, node_id=node_id,
                                                     reason=reason))

    def _count_reservation(self, app: App, ask: Ask, delta: int) -> None:
        """Keep ``reserved_asks`` and ``reserved_under`` in step with ``reservations``."""
        if delta > 0:
            held = self.reserved_asks.get(app.app_id)
            if held is None:
                held = self.reserved_asks[app.app_id] = {}
            held[ask.ask_id] = ask
        else:
            held = self.reserved_asks[app.app_id]
            del held[ask.ask_id]
            if not held:
                del self.reserved_asks[app.app_id]
        under = self.reserved_under
        for q in app.queue.lineage:
            count = under.get(q.path, 0) + delta
            if count:
                under[q.path] = count
            else:
                del under[q.path]

    def _drop_ask(self, app: App, ask: Ask) -> None:
        del app.asks[ask.ask_id]
        app.sorted_asks.remove(ask)
        sub_into(app.pending, ask.resources)
        app.queue.sub_pending(ask.resources)

    # -- allocations --------------------------------------------------------------

    def remove_pending(self, app: App, ask: Ask) -> None:
        """Take an ask out of pending before it is allocated (a gang's replacement: ``allocate(pending=False)``)."""
        self._drop_ask(app, ask)

    def allocate(self, app: App, ask: Ask, node: Node, decision_id: str, *, settle: bool = True,
                 pending: bool = True) -> Allocation:
        """Turn a pending ask into an allocation on a node (fit already checked).

        ``settle=False`` (folding recorded decisions, where nothing is searched in between)
        leaves the node index and the app's sorted place to one ``settle`` call per cycle.
        A gang's placeholder counts in its gang's placeholders, not in the app's allocated
        resources (YuniKorn ``allocatedPlaceholder``); queues, nodes and user limits count both.
        """
        if pending:
            self._drop_ask(app, ask)
        self.allocation_seq += 1
        alloc = Allocation(
            app.app_id, ask.ask_id, node.node_id, ask.resources, ask.priority, decision_id, self.allocation_seq,
            ask.created_us, ask.allow_preemption, ask.required_node, False, ask.placeholder, ask.task_group,
        )
        app.allocations[ask.ask_id] = alloc
        if ask.placeholder and app.gang is not None:
            add_into(app.gang.placeholders, ask.resources)
            self.placeholder_allocations += 1
        else:
            add_into(app.allocated, ask.resources)
        app.share = None
        app.queue.add_allocated(ask.resources)
        if self.limits is not None:
            self.limits.add_resources(app, ask.resources)
        add_into(node.allocated, ask.resources)
        node.allocations[(app.app_id, ask.ask_id)] = alloc
        if ask.constraints is not None and ask.constraints.host_ports:
            alloc.host_ports = ask.constraints.host_ports
            bind_ports(node.host_ports, alloc.host_ports, 1)
        if settle:
            self._reindex(node)
            self._refresh(app)
        return alloc

    def settle(self, nodes: Iterable[Node], apps: Iterable[App]) -> None:
        """Re-index nodes and re-place apps that ``allocate(settle=False)`` left, once each."""
        for node in nodes:
            if node.node_id in self.nodes:
                self._reindex(node)
        for app in apps:
            self._refresh(app)

    def restore_allocations(self, app: App, allocations: list[Allocation], state: str) -> None:
        """Re-attach an app's allocations and state read from a snapshot, and what they count for
        in its queues: allocated, preempting, a gang allocating while Accepted.

        Nodes are not re-indexed here (``restore_done`` does each once): restoring a
        snapshot must not cost one index move per allocation.
        """
        if app.gang is not None and app.gang.allocating_accepted:
            app.queue.add_allocating_accepted(1)
        for alloc in allocations:
            app.allocations[alloc.ask_id] = alloc
            if alloc.preempted:
                add_into(self.preempting.setdefault(app.queue.path, {}), alloc.resources)
            if alloc.placeholder and app.gang is not None:
                add_into(app.gang.placeholders, alloc.resources)
                self.placeholder_allocations += 1
            else:
                add_into(app.allocated, alloc.resources)
            node = self.nodes[alloc.node_id]
            add_into(node.allocated, alloc.resources)
            node.allocations[(app.app_id, alloc.ask_id)] = alloc
            if alloc.host_ports:
                bind_ports(node.host_ports, alloc.host_ports, 1)
        app.share = None
        app.queue.add_allocated(app.allocated)
        if self.limits is not None:
            self.limits.add_resources(app, app.allocated)
        if app.gang is not None and app.gang.placeholders:
            app.queue.add_allocated(app.gang.placeholders)
            if self.limits is not None:
                self.limits.add_resources(app, app.gang.placeholders)
        self._set_state_quiet(app, state)
        self._refresh(app)

    def restore_done(self) -> None:
        """Index every node once, after all allocations are restored."""
        for node in self.nodes.values():
            self._reindex(node)

    def release(self, app: App, alloc: Allocation) -> None:
        """An allocation ends (released by its owner)."""
        self._drop_allocation(app, alloc)
        self._refresh(app)

    def _drop_allocation(self, app: App, alloc: Allocation) -> None:
        if alloc.preempted:
            sub_into(self.preempting.setdefault(app.queue.path, {}), alloc.resources)
        del app.allocations[alloc.ask_id]
        if alloc.placeholder and app.gang is not None:
            sub_into(app.gang.placeholders, alloc.resources)
            self.placeholder_allocations -= 1
            if not app.gang.placeholders:
                app.gang.timer_us = None  # the last placeholder gone: its timer is cleared (YuniKorn)
        else:
            sub_into(app.allocated, alloc.resources)
        app.share = None
        app.queue.sub_allocated(alloc.resources)
        if self.limits is not None:
            self.limits.sub_resources(app, alloc.resources)
        node = self.nodes.get(alloc.node_id)
        if node is not None:
            sub_into(node.allocated, alloc.resources)
            del node.allocations[(app.app_id, alloc.ask_id)]
            if alloc.host_ports:
                bind_ports(node.host_ports, alloc.host_ports, -1)
            self._reindex(node)

    # -- nodes --------------------------------------------------------------------

    def add_node(self, node: Node) -> None:
        """Add a node to the partition and, when schedulable, to the index."""
        self.nodes[node.node_id] = node
        add_into(self.cluster_capacity, node.capacity)
        self._count_types(node, 1)
        self._reindex(node)

    def _count_types(self, node: Node, sign: int) -> None:
        types = self.node_types
        for name in node.capacity.keys() | node.occupied.keys():
            count = types.get(name, 0) + sign
            if count:
                types[name] = count
            else:
                del types[name]

    def update_node(
        self, node: Node, capacity: Resources | None, occupied: Resources | None, schedulable: bool | None
    ) -> None:
        """Change a node's capacity, occupied resources or schedulability."""
        self._count_types(node, -1)
        if capacity is not None:
            sub_into(self.cluster_capacity, node.capacity)
            node.capacity = capacity
            add_into(self.cluster_capacity, capacity)
        if occupied is not None:
            node.occupied = occupied
        if schedulable is not None:
            node.schedulable = schedulable
        self._count_types(node, 1)
        self._reindex(node)

    def remove_node(self, node: Node, now_us: int, timers: Timers, out: list[OutputData]) -> None:
        """Remove a node, ending its reservation and revoking every allocation on it (oldest first)."""
        while node.reserved_for is not None:  # under yunikorn-1.9 possibly several
            held_app = self.apps[node.reserved_for[0]]
            self.unreserve(held_app, held_app.asks[node.reserved_for[1]], "node-removed", out)
        for alloc in sorted(node.allocations.values(), key=lambda a: a.seq):
            app = self.apps[alloc.app_id]
            self._drop_allocation(app, alloc)
            self._refresh(app)
            out.append(
                AllocationRevoked.model_construct(
                    app_id=alloc.app_id, ask_id=alloc.ask_id, node_id=node.node_id, reason="node-removed"
                )
            )
            self.maybe_completing(app, now_us, timers, out)
        self.index.remove(node.node_id)
        self.reserve_candidates.node_removed(node.node_id)
        sub_into(self.cluster_capacity, node.capacity)
        self._count_types(node, -1)
        del self.nodes[node.node_id]
        self.form.node_changed(node.node_id)

    def _reindex(self, node: Node) -> None:
        self.form.node_changed(node.node_id)  # every node mutation re-indexes, so marks here
        # A version no node of this partition had before, a node removed and added again
        # included: what the reservation caches compare (``ReserveCandidates``, ``Ask.fit_checked``).
        self.node_changes += 1
        node.version = self.node_changes
        available = node.indexed_available = node.available()
        if node.schedulable and node.reserved_for is None:
            self.index.upsert(node.node_id, node.capacity, available)
        else:
            self.index.remove(node.node_id)
        self.reserve_candidates.node_changed(self.index, self.nodes, node)

    # -- per-leaf sorted app lists ------------------------------------------------

    def _refresh(self, app: App) -> None:
        """Re-derive the app's priority and its place in its leaf's sorted app list."""
        self.form.app_changed(app.app_id)  # every pending/allocated change ends here
        leaf = app.queue
        new_priority = app.head_priority()
        listed = is_positive(app.pending) and app.app_id in self.apps
        if new_priority != app.priority:
            old = app.priority
            app.priority = new_priority
            leaf.app_priority_changed(old, new_priority)
        elif listed and app.sort_key is not None and leaf.app_sort_policy != "fair":
            return  # a listed fifo/stateaware app whose priority did not change keeps its key
        candidates = self.candidates[leaf.path]
        new_key = leaf_sort_key(app, AppSortPolicy.parse(leaf.app_sort_policy), leaf.sort_priority) if listed else None
        if new_key == app.sort_key:
            return
        if app.sort_key is not None:
            del candidates[bisect_left(candidates, (app.sort_key, app.app_id))]
        app.sort_key = new_key
        if new_key is not None:
            insort(candidates, (new_key, app.app_id))

    def ordered_apps(self, leaf: QueueNode) -> list[App]:
        """The leaf's apps with pending asks, in its sort policy's order."""
        return [self.apps[app_id] for _, app_id in self.candidates[leaf.path]]

    # -- rules profile ------------------------------------------------------------

    def set_profile(self, profile: RulesProfile) -> None:
        """Run under ``profile`` from now on (the config's ``rules``; a reconfigure rebuilt the tree first)."""
        self.profile = profile
        self._under_profile(list(self.queues.values()))

    def _under_profile(self, queues: list[QueueNode]) -> None:
        """Fresh queues as the partition's profile has them: under yunikorn-1.9 a stateaware
        leaf sorts and schedules as fifo (YUNIKORN-2483: the policy still parses, with a
        warning from ``config check``), and every queue has a fair max (``refresh_fair_max``)."""
        if self.profile is RulesProfile.YUNIKORN_1_9:
            for q in queues:
                if q.app_sort_policy == AppSortPolicy.STATEAWARE.value:
                    q.app_sort_policy = AppSortPolicy.FIFO.value
            self.refresh_fair_max()

    def refresh_fair_max(self) -> None:
        """Under yunikorn-1.9, every queue's fair max (``queue.go:GetFairMaxResource``): the
        cluster's capacity (root's max) with each configured max from root down laid over it,
        type by type; empty while the cluster is (no nodes), whatever the queues' maxes."""
        stack: list[tuple[QueueNode, Resources]] = [(self.root, dict(self.cluster_capacity))]
        while stack:
            q, limit = stack.pop()
            fair_max = limit
            if q.parent is not None and q.max and limit:
                fair_max = {**limit, **q.max}
            q.set_fair_max(fair_max)
            stack.extend((kid, fair_max) for kid in q.children)

    # -- reconfiguration ----------------------------------------------------------

    def reconfigure(
        self, root_spec: QueueSpec, node_policy: str, weights: Mapping[str, float], previous_yaml: str
    ) -> None:
        """Rebuild queues (and the node index if its policy changed), re-attaching apps.

        A leaf the new config drops while it holds apps drains (``scheduler.core.draining``);
        ``previous_yaml`` is the text of the config being replaced, where its settings are.
        Precondition (checked by ``apply`` for every partition before any changes): no app's
        queue becomes a parent queue.
        """
        self.config_root = root_spec
        held = {app.queue.path for app in self.apps.values()}
        draining = {}
        for path in sorted(held):
            chain = chain_of(root_spec, path)
            if chain is None and not self.settings[path].dynamic:  # dropped: drains with its last settings
                draining[path] = self.draining.get(path, previous_yaml)
        self.draining = draining
        self._rebuild(node_policy, weights)

    def restore_draining(self, draining: Mapping[str, str]) -> None:
        """Re-graft the draining leaves a snapshot lists (before its apps are added back)."""
        self.draining = dict(draining)
        self._rebuild(self.index.policy.value, self.index.weights)

    def is_draining(self, path: str) -> bool:
        """True for a leaf the config dropped that still holds apps (no new app may enter it)."""
        return path in self.draining

    def _rebuild(self, node_policy: str, weights: Mapping[str, float]) -> None:
        effective = effective_root(self.config_root, self.name, self.draining)
        root = build_tree(effective)
        queues = {q.path: q for q in root.walk()}
        self.root, self.queues = root, queues
        self.candidates = {p: [] for p, q in queues.items() if q.is_leaf}
        self.starting = {p: {} for p, q in queues.items() if q.is_leaf}
        self.settings = settings_from_spec(effective)
        index = LimitIndex.from_spec(self.config_root)
        self.limits = UserLimits(index) if index is not None else None
        for app in sorted(self.apps.values(), key=lambda a: a.seq):
            leaf, _ = self.ensure_queue(app.queue.path)  # dynamic queues live on (YuniKorn)
            app.queue = leaf
            charge(self.limits, app)
            app.sort_key = None
            app.share = None
            leaf.app_added(app)
            leaf.add_pending(app.pending)
            leaf.add_allocated(app.allocated)
            if app.gang is not None and app.gang.placeholders:
                leaf.add_allocated(app.gang.placeholders)
            if app.state in RUNNING_STATES:
                leaf.add_running(1)
            if app.gang is not None and app.gang.allocating_accepted:
                leaf.add_allocating_accepted(1)
            if app.state == "Starting":
                self.starting[leaf.path][app.app_id] = app
            self._refresh(app)
        if self.profile is not DEFAULT_PROFILE:
            self._under_profile(list(queues.values()))
        if NodeSortPolicy(node_policy) != self.index.policy or dict(weights) != self.index.weights:
            self.index = NodeIndex(NodeSortPolicy(node_policy), weights)
            self.reserve_candidates = ReserveCandidates()  # node order changed: every heap with it
            for node in self.nodes.values():
                self._reindex(node)
