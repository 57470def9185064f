"""One allocation cycle: fire timers, then allocate one ask at a time until nothing fits.

A step walks from root: child queues in sorted order, depth first; in a leaf, its apps in
policy order; in an app, its asks in order; for each ask the first node in node order that
fits, provided the allocation also fits every queue's max on the way up. The first success
is applied and the walk starts again from root (so everything is re-sorted: each parent's
child order is kept for the cycle and re-positions the children an allocation changed).

Reservations (``scheduler.core.reservations``): each step first tries the reserved asks;
an ask that fits nowhere may reserve a node instead, which ends that step without a
decision. Within a cycle nothing is released and a reservation only takes a node away, so
failures are permanent until the cycle ends or a reservation ends: an ask that fitted
nowhere, an app none of whose asks fitted, and a queue none of whose children or apps
could allocate are remembered and skipped (and forgotten when a reserved node comes
back); so are the reservations the reserved step already tried, and an app whose every
ask has a shape that fits no free node and has no node to reserve (``_hopeless``). The node
a request shape would reserve is kept by the partition (``scheduler.core.reserve_candidates``:
nodes grouped by capacity and availability, a heap per shape) rather than scanned again per
reservation. A node that comes back starts a fresh memo, but the child orders (kept current
by every step) carry over, and the reserved step reads the partition's own index of the
reservations (per app, per queue) rather than regrouping all of them.
Skipping something that would fail again cannot change which ask wins, only how fast it
is found.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Final

from events.model_construct import construct
from events.models import AllocationDecided, AppBackedOff, GangDecided, OutputData
from events.times import format_time
from projections.policies import AppSortPolicy
from scheduler.config.profiles import RulesProfile
from scheduler.core import gang, quota_preemption
from scheduler.core.asks import Shape, shape_of
from scheduler.core.constrained_nodes import first_admitting, node_admits, reservable_admitting
from scheduler.core.gang import can_replace, replacement_step
from scheduler.core.objects import App, Ask, Node
from scheduler.core.partition import PartitionState
from scheduler.core.preemption import MAX_ATTEMPTS_PER_QUEUE, may_attempt, record_preemption, try_preemption
from scheduler.core.preemption_19 import try_preemption_19
from scheduler.core.preemption_victims import VictimIndex
from scheduler.core.preemption_victims_19 import VictimIndex19
from scheduler.core.queues import QueueNode
from scheduler.core.reservations import (
    RESERVATION_DELAY_US,
    Step,
    required_node_passes,
    required_node_step,
    reservation_stale,
    reserved_step,
)
from scheduler.core.sorting import ChildOrder, child_order, stateaware_allowed
from scheduler.core.state import SchedulerState

DECIDED_FIELDS: Final = frozenset(AllocationDecided.model_fields)
YUNIKORN_1_9: Final = RulesProfile.YUNIKORN_1_9
STATEAWARE: Final = AppSortPolicy.STATEAWARE.value  # read once: an enum's ``.value`` is a slow lookup


@dataclass
class CycleMemo:
    """What is known to fail for the rest of this cycle (see the module docstring)."""

    exhausted_queues: set[str] = field(default_factory=set)
    exhausted_apps: set[str] = field(default_factory=set)
    failed_prefix: dict[str, int] = field(default_factory=dict)  # app → leading asks known to fail
    unplaceable: set[Shape] = field(default_factory=set)  # shapes no node holds
    # Turns ended at a required-node ask: not permanent (once that ask fails its headroom the
    # app's later asks are tried), so an app, leaf or queue that saw one is not exhausted.
    turn_ends: int = 0
    # Preemption (scheduler.core.preemption): enabled for the partition, the previous cycle's
    # time (attempt ticks), asks that attempted this cycle, attempts left in the current leaf.
    preemption: bool = False
    prev_cycle_us: int | None = None
    preempt_tried: set[tuple[str, str]] = field(default_factory=set)
    attempts_left: int = MAX_ATTEMPTS_PER_QUEUE
    # The cycle's candidate victims and node order, built at its first attempt and told of
    # every step after it (``scheduler.core.preemption_victims``).
    victims: VictimIndex | None = None
    victims_19: VictimIndex19 | None = None  # the same under yunikorn-1.9 (``preemption_victims_19``)
    # Each parent's child order, kept across the steps (an allocation changes one lineage).
    child_orders: dict[str, ChildOrder] = field(default_factory=dict)
    # How many of the partition's reservations (in the order they were made) the reserved
    # step has tried and found nothing for. Within a memo's life reservations are only added
    # (ending one brings a node back, and the cycle starts a fresh memo), at the end of the
    # dict, and a reserved ask that failed keeps failing: its headroom only shrinks, its node
    # only fills, its other nodes only fill or leave the index, and its app's hold only tightens.
    reservations_tried: int = 0
    # Some shape had no node to reserve (``PartitionState.reserve_candidates``): only then may
    # an app be hopeless (``_hopeless``), so a cycle with room never asks.
    any_exhausted: bool = False
    # The earliest time at which an ask the walk found too young to reserve is old enough
    # (None: none was): until then a walk of the same state finds the same (``settled``).
    wake_us: int | None = None
    # yunikorn-1.9's unschedulable-ask backoff: (app, unschedulable asks) set during the walk,
    # written out (``app.backed_off``) by the cycle loop before the step it found
    backed_off: list[tuple[App, int]] = field(default_factory=list)
    # yunikorn-1.9: the reservations old enough to time out at this cycle's time, in the order
    # they were made (``expiring``), listed when the cycle opens: the only ones a committed step
    # can end (a reservation made later in the cycle is not old). None: every reservation.
    expiring: list[tuple[str, str]] | None = None
    # yunikorn-1.9: the ``ask.unreserved`` of reservations a preemption attempt cancelled during
    # the walk (YUNIKORN-3092, ``_cancel_stale``), written out by the cycle loop before the step it
    # found; a node came back, so the loop goes on with a fresh memo
    cancelled: list[OutputData] = field(default_factory=list)

    def children_in_order(self, queue: QueueNode) -> Iterator[QueueNode]:
        """``sort_queues`` of a parent's children now, from the order kept for the cycle (read
        in place: to be used before the next step changes it)."""
        order = self.child_orders.get(queue.path)
        if order is None:
            order = self.child_orders[queue.path] = child_order(queue.children, queue.sort_priority)
        return order.in_order()

    def allocated_in(self, leaf: QueueNode) -> None:
        """An allocation changed ``leaf`` and its ancestors: re-order them under their parents."""
        for q in leaf.lineage:
            parent = q.parent
            order = self.child_orders.get(parent.path) if parent is not None else None
            if order is not None:
                order.changed(q)


def decision_id(partition: str, cycle: int, step: int) -> str:
    """Deterministic id of the step-th decision of a cycle: replay yields the same ids."""
    return f"{partition}-{cycle}-{step}"


def held_by_max_applications(app: App) -> bool:
    """An Accepted app waits while its queue or an ancestor has its maxapplications running; a
    gang's Accepted apps holding placeholders count as running, and are never held (YuniKorn
    ``canRunApp``: ``allocatingAcceptedApps``)."""
    if app.state != "Accepted":
        return False
    if app.gang is not None and app.gang.allocating_accepted:
        return False
    return any(q.max_applications and q.running_apps + q.allocating_accepted >= q.max_applications
               for q in app.queue.ancestry())


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


def _preempt(part: PartitionState, app: App, ask: Ask, memo: CycleMemo, nodes_tried: bool,
             now_us: int) -> Step | None:
    """One preemption attempt (YuniKorn ``tryPreemption``): a reservation with victims, or None."""
    if memo.attempts_left <= 0:
        return None
    memo.attempts_left -= 1
    memo.preempt_tried.add((app.app_id, ask.ask_id))
    if part.profile is YUNIKORN_1_9:  # v1.9.0's victim selection (scheduler.core.preemption_19)
        if memo.victims_19 is None:
            memo.victims_19 = VictimIndex19(part)
        found = try_preemption_19(part, app, ask, nodes_tried, now_us=now_us, index=memo.victims_19,
                                  stale_among=memo.expiring)
        if found.cancelled:
            _cancel_stale(part, found.cancelled, memo)
        return None if found.node is None else Step(app, ask, found.node, "preemption", victims=found.victims)
    if memo.victims is None:
        memo.victims = VictimIndex(part)
    outcome = try_preemption(part, app, ask, nodes_tried, index=memo.victims)
    if outcome.node is None:
        return None
    return Step(app, ask, outcome.node, "preemption", victims=outcome.victims)


def _cancel_stale(part: PartitionState, cancelled: list[tuple[App, Ask]], memo: CycleMemo) -> None:
    """yunikorn-1.9 (YUNIKORN-3092, ``preemption.go:initWorkingState``): end the reservations a
    preemption attempt cancels (``ask.unreserved``, reason ``preemption-cancelled``) whether or
    not it then preempts. yunikorn ends them within the attempt and its walk goes on with the
    nodes back, so they end here, in the walk: shapes that fit no node may fit one now."""
    for held_app, held in cancelled:
        part.unreserve(held_app, held, "preemption-cancelled", memo.cancelled)
    memo.unplaceable.clear()
    if memo.victims_19 is not None:
        memo.victims_19.nodes_returned()  # the nodes came back within this walk


def place(part: PartitionState, app: App, ask: Ask, memo: CycleMemo, now_us: int) -> Step | None:
    """Where this ask (without a required node) goes now — a node, a node to reserve, or a
    node to reserve after preempting victims — or None."""
    request = ask.resources
    shape = shape_of(request)
    unplaceable = shape in memo.unplaceable
    # ``_may_preempt``, ``_may_reserve`` and the reservation candidate read nothing this function
    # changes. An ask whose shape fits no free node and that may not preempt can only reserve:
    # when it cannot (too young, or no node to hold) it fails whatever the headroom says,
    # checked first as cheaper than the headroom walk (with a full cluster nearly every
    # waiting ask ends here). The candidate found is kept for the reservation below.
    to_reserve: Node | None = None
    if unplaceable and not _may_preempt(app, ask, memo, now_us):
        if not _may_reserve(ask, now_us, memo):
            return None
        to_reserve = _reservable(part, memo, shape, ask)
        if to_reserve is None:
            return None
    if part.limits is not None and not part.limits.fits(app, request):
        return None  # the user's or group's maxresources (YuniKorn tryAllocate's ugm headroom, checked first)
    if not fits_queue_headroom(part, app.queue, request):
        return _preempt(part, app, ask, memo, False, now_us) if _may_preempt(app, ask, memo, now_us) else None
    if not unplaceable:
        constraints = ask.constraints
        if constraints is None:
            node_id = part.index.first_fit(request)  # schedulable, unreserved nodes
            if node_id is not None:
                return Step(app, ask, part.nodes[node_id])
            memo.unplaceable.add(shape)
        else:  # node constraints (scheduler.core.constrained_nodes): its failure says nothing of the shape
            admitting = first_admitting(part, request, constraints)
            if admitting is not None:
                return Step(app, ask, admitting)
    if _may_reserve(ask, now_us, memo):
        node = to_reserve if to_reserve is not None else _reservable(part, memo, shape, ask)
        if node is not None:
            return Step(app, ask, node, "no-fit")
    return _preempt(part, app, ask, memo, True, now_us) if _may_preempt(app, ask, memo, now_us) else None


def _may_reserve(ask: Ask, now_us: int, memo: CycleMemo) -> bool:
    """Not reserved yet, and older than the reservation delay (log time); an ask too young
    notes in the memo when it comes of age (``settled``)."""
    if ask.reserved_node is not None:
        return False
    of_age = ask.created_us + RESERVATION_DELAY_US + 1
    if now_us >= of_age:
        return True
    if memo.wake_us is None or of_age < memo.wake_us:
        memo.wake_us = of_age
    return False


def _reservable(part: PartitionState, memo: CycleMemo, shape: Shape, ask: Ask) -> Node | None:
    """The node the ask (of ``shape``) would reserve now, or None (noted in the memo)."""
    if ask.constraints is not None:
        return reservable_admitting(part, ask.resources, ask.constraints)
    node = part.reserve_candidates.best(part.index, part.nodes, shape, ask.resources)
    if node is None:
        memo.any_exhausted = True
    return node


def _may_preempt(app: App, ask: Ask, memo: CycleMemo, now_us: int) -> bool:
    """Preemption is on, the ask may attempt now and has not attempted this cycle."""
    return (memo.preemption and may_attempt(ask, app.queue, now_us, memo.prev_cycle_us)
            and (app.app_id, ask.ask_id) not in memo.preempt_tried)


def _try_app(part: PartitionState, app: App, memo: CycleMemo, now_us: int) -> Step | None:
    """The app's first ask that can be placed (or reserves), or None (also: its turn ended)."""
    if app.queue.unsched_backoff and part.profile is YUNIKORN_1_9:
        return _try_app_counting(part, app, memo, now_us)
    asks = app.sorted_asks
    i = memo.failed_prefix.get(app.app_id, 0)
    n = len(asks)
    if i < n and memo.any_exhausted:
        shapes, not_plain = asks.shape_counts()
        if not_plain == 0 and _hopeless(part, shapes, memo):
            memo.failed_prefix[app.app_id] = n  # what the loop below would find, ask by ask
            return None
    app_gang = app.gang
    while i < n:
        ask = asks[i]
        found: Step | None
        if app_gang is not None and can_replace(app_gang, ask):
            found = None  # left to the replacement step (scheduler.core.gang)
        elif ask.required_node is None:
            found = place(part, app, ask, memo, now_us)
        elif not fits_queue_headroom(part, app.queue, ask.resources) or (
            part.limits is not None and not part.limits.fits(app, ask.resources)
        ) or (ask.constraints is not None and _required_node_excludes(part, ask)):
            found = None
        else:
            found = required_node_step(part, app, ask)
            if found is None and part.profile is YUNIKORN_1_9 and required_node_passes(part, ask):
                i += 1
                continue
            if found is None:  # unknown node, or held for a required-node ask: the app's turn ends
                memo.failed_prefix[app.app_id] = i
                memo.turn_ends += 1
                return None
        if found is not None:
            memo.failed_prefix[app.app_id] = i
            return found
        i += 1
    memo.failed_prefix[app.app_id] = i
    return None


def _required_node_excludes(part: PartitionState, ask: Ask) -> bool:
    """The ask's required node is registered and fails its node constraints (it is passed over,
    as an ask beyond its headroom is)."""
    assert ask.constraints is not None and ask.required_node is not None
    node = part.nodes.get(ask.required_node)
    return node is not None and not node_admits(ask.constraints, node)


def _try_app_counting(part: PartitionState, app: App, memo: CycleMemo, now_us: int) -> Step | None:
    """``_try_app`` under yunikorn-1.9 with the leaf's unschedulable-ask backoff on
    (``application.go:tryAllocate``, YUNIKORN-3115): every ask is tried (no ``failed_prefix``,
    no ``_hopeless``: the count needs each failure's reason). An ask counts as unschedulable
    when it passed its user's and its queue's headroom and no node took or reserved it, nor a
    preemption freed one; when the count reaches the leaf's ``unsched_backoff`` and the app
    holds any further request (a pending ask after it, or an allocation of an ask that sorts
    after it: yunikorn keeps allocated asks in its sorted list until released), the app backs
    off: skipped by the walk until the cycle's time plus the leaf's delay (log time where
    yunikorn reads ``time.Now()``)."""
    threshold = app.queue.unsched_backoff
    asks = app.sorted_asks
    n = len(asks)
    app_gang = app.gang
    unschedulable = 0
    for i in range(n):
        ask = asks[i]
        found: Step | None
        if app_gang is not None and can_replace(app_gang, ask):
            continue
        if ask.required_node is None:
            found = place(part, app, ask, memo, now_us)
            if found is not None:
                return found
            if (part.limits is None or part.limits.fits(app, ask.resources)) \
                    and fits_queue_headroom(part, app.queue, ask.resources):
                unschedulable += 1
                if unschedulable >= threshold and _more_requests(app, i):
                    part.back_off(app, now_us + app.queue.backoff_delay_us)
                    memo.backed_off.append((app, unschedulable))
                    return None
            continue
        if not fits_queue_headroom(part, app.queue, ask.resources) or (
            part.limits is not None and not part.limits.fits(app, ask.resources)
        ) or (ask.constraints is not None and _required_node_excludes(part, ask)):
            continue
        found = required_node_step(part, app, ask)
        if found is not None:
            return found
        if required_node_passes(part, ask):
            continue
        memo.turn_ends += 1  # unknown node, or held for a required-node ask: the app's turn ends
        return None
    return None


def _more_requests(app: App, i: int) -> bool:
    """Whether yunikorn's sorted request list holds anything after the app's i-th pending ask:
    a later pending ask, or an allocation whose ask sorts after it (priority desc, creation time
    asc; an equal one counts as after, the order yunikorn's ``sortedRequests.insert`` gives asks
    added later)."""
    if i + 1 < len(app.sorted_asks):
        return True
    ask = app.sorted_asks[i]
    for alloc in app.allocations.values():
        if alloc.priority < ask.priority or (alloc.priority == ask.priority and alloc.created_us >= ask.created_us):
            return True
    return False


def _hopeless(part: PartitionState, shapes: Iterable[Shape], memo: CycleMemo) -> bool:
    """Every shape fits no free node and has no node to reserve (``place``'s first test).

    Then each of an app's plain asks (no required node, may not preempt) of these shapes
    fails ``place`` at that test, which changes nothing, so the app's walk ends at once.
    With a full cluster that is nearly every waiting app, each cycle: the walk costs a look
    per shape instead of a ``place`` per ask.
    """
    unplaceable, candidates = memo.unplaceable, part.reserve_candidates
    nodes = part.nodes
    return all(shape in unplaceable and candidates.exhausted(shape, nodes) for shape in shapes)


def _try_leaf(part: PartitionState, leaf: QueueNode, memo: CycleMemo, now_us: int) -> Step | None:
    memo.attempts_left = MAX_ATTEMPTS_PER_QUEUE
    allowed: set[str] | None = None
    if leaf.app_sort_policy == STATEAWARE:
        allowed = stateaware_allowed(part.ordered_apps(leaf), list(part.starting[leaf.path].values()))
    apps = part.apps
    for _, app_id in part.candidates[leaf.path]:
        if app_id in memo.exhausted_apps or (allowed is not None and app_id not in allowed):
            continue
        app = apps[app_id]
        if app.backoff_until_us > now_us:
            continue  # yunikorn-1.9's unschedulable-ask backoff (``queue.go:TryAllocate``)
        if held_by_max_applications(app):
            continue
        if app.state == "Accepted" and part.limits is not None and part.limits.blocking_apps(app) is not None:
            continue  # the user's or group's maxapplications (YuniKorn ugm CanRunApp)
        ends = memo.turn_ends
        found = _try_app(part, app, memo, now_us)
        if found is not None:
            return found
        if memo.turn_ends == ends:
            memo.exhausted_apps.add(app_id)
    return None


def _walk(part: PartitionState, queue: QueueNode, memo: CycleMemo, now_us: int) -> Step | None:
    if queue.is_leaf:
        return _try_leaf(part, queue, memo, now_us)
    for child in memo.children_in_order(queue):
        if child.path in memo.exhausted_queues:
            continue
        ends = memo.turn_ends
        found = _walk(part, child, memo, now_us)
        if found is not None:
            return found
        if memo.turn_ends == ends:
            memo.exhausted_queues.add(child.path)
    return None


def allocate_step(part: PartitionState, memo: CycleMemo, now_us: int) -> Step | None:
    """The walk from root: the next allocation or reservation of a partition (without applying it)."""
    if part.root.path in memo.exhausted_queues:
        return None
    ends = memo.turn_ends
    found = _walk(part, part.root, memo, now_us)
    if found is None and memo.turn_ends == ends:
        memo.exhausted_queues.add(part.root.path)
    return found


def next_step(part: PartitionState, memo: CycleMemo, now_us: int) -> Step | None:
    """One step: a reserved ask that can be allocated now first, else the walk from root."""
    reservations = part.reservations
    untried = len(reservations) - memo.reservations_tried
    if untried > 0:
        keys: Iterable[tuple[str, str]] | None = None  # all: the partition's own index of them
        if memo.reservations_tried:
            keys = islice(reversed(reservations), untried)  # the newest ``untried`` are the last ones
        found = reserved_step(part, fits_queue_headroom, held_by_max_applications, memo.unplaceable, keys,
                              memo.children_in_order)
        if found is not None:
            return found
        memo.reservations_tried = len(reservations)
    if part.placeholder_allocations:
        replaced = replacement_step(part, memo.children_in_order)
        if replaced is not None:
            return replaced
    return allocate_step(part, memo, now_us)


def commit(
    state: SchedulerState, part: PartitionState, found: Step, step: int, now_us: int, out: list[OutputData],
) -> bool:
    """Apply a found step: its reservation, or its allocation with the decision and any app state
    change (``step`` numbers the decision). True when a reservation ended (a node came back) or a
    gang placeholder was replaced (both may let failed asks fit)."""
    app, ask, node = found.app, found.ask, found.node
    for held_app, held in found.cancel:
        part.unreserve(held_app, held, "required-node", out)
    if found.victims:
        record_preemption(part, app, ask, node, found.victims, state.cycle, out, now_us)
        return bool(found.cancel)
    if found.reserve is not None:
        part.reserve(app, ask, node, state.cycle, found.reserve, out, now_us)
        return bool(found.cancel)
    freed = bool(found.cancel) or ask.reserved_node is not None
    did = decision_id(part.name, state.cycle, step)
    if found.replaces is not None or ask.placeholder or ask.task_group:
        _commit_gang(state, part, found, did, now_us, out)
        if part.quota_clocks:
            quota_preemption.on_allocated(part, app.queue, now_us)
        # a replacement frees what the placeholder held beyond the real ask, and takes another ask
        # than the walk found out of its app's list: a fresh memo, as when a node comes back
        return freed or found.replaces is not None
    part.unreserve(app, ask, "allocated", out)
    part.allocate(app, ask, node, did)
    if part.quota_clocks:  # yunikorn-1.9's quota preemption: over max starts the queue's delay
        quota_preemption.on_allocated(part, app.queue, now_us)
    values = {"decision_id": did, "cycle": state.cycle, "ask_id": ask.ask_id, "app_id": app.app_id,
              "partition": part.name, "queue": app.queue.path, "node_id": node.node_id,
              "resources": dict(ask.resources), "priority": ask.priority}
    out.append(construct(AllocationDecided, values, set(DECIDED_FIELDS)))
    if app.state == "Accepted":
        if part.profile is YUNIKORN_1_9:  # no Starting state (YUNIKORN-2495): Accepted → Running
            part.transition(app, "Running", now_us, state, out)
            return freed
        part.transition(app, "Starting", now_us, state, out)
        if app.stateaware_disabled:
            part.transition(app, "Running", now_us, state, out)
    elif app.state == "Starting":
        part.transition(app, "Running", now_us, state, out)
    return freed


def _commit_gang(state: SchedulerState, part: PartitionState, found: Step, did: str, now_us: int,
                 out: list[OutputData]) -> None:
    """``commit`` of a gang's allocation: a placeholder, an ask of a task group, or a replacement
    (scheduler.core.gang); its decision carries the gang fields."""
    app, ask, node, ph = found.app, found.ask, found.node, found.replaces
    if ph is not None:
        moves_on = gang.replace(part, app, ask, ph, did, now_us, state, out)
    else:
        part.unreserve(app, ask, "allocated", out)
        before = dict(app.gang.placeholders) if app.gang is not None else {}
        part.allocate(app, ask, node, did)
        moves_on = not ask.placeholder or gang.placeholder_allocated(app, before, now_us, state)
    values = {"decision_id": did, "cycle": state.cycle, "ask_id": ask.ask_id, "app_id": app.app_id,
              "partition": part.name, "queue": app.queue.path, "node_id": node.node_id,
              "resources": dict(ask.resources), "priority": ask.priority, **gang.decided_values(ask, ph)}
    out.append(construct(GangDecided, values, set(values)))
    if moves_on:
        gang.run_application(part, app, now_us, state, out)
    if ask.placeholder:
        gang.allocating_while_accepted(app)


def expire_reservations(part: PartitionState, now_us: int, out: list[OutputData],
                        among: list[tuple[str, str]] | None = None) -> list[App]:
    """yunikorn-1.9 (YUNIKORN-3219, ``application.go:tryReservedAllocate``): a reservation of an ask
    without a required node that is more than 60 minutes old (log time) ends when the ask does
    not fit its queue's headroom (or its user's): ``ask.unreserved``, reason ``timeout``. The
    apps whose reservations ended.

    yunikorn checks on each step's reserved pass: here when the cycle opens and after each
    committed step (nothing changes in between), then only ``among`` (``expiring``: a step
    cannot make a reservation old), which loses the ones that end.
    """
    ended: list[App] = []
    keys = list(part.reservations) if among is None else [key for key in among if key in part.reservations]
    for app_id, ask_id in keys:
        app = part.apps[app_id]
        ask = app.asks[ask_id]
        if not reservation_stale(ask, now_us):
            continue
        if fits_queue_headroom(part, app.queue, ask.resources) and (
                part.limits is None or part.limits.fits(app, ask.resources)):
            continue
        part.unreserve(app, ask, "timeout", out)
        ended.append(app)
    if among is not None:
        among[:] = [key for key in keys if key in part.reservations]  # those ended or gone drop out
    return ended


def expiring(part: PartitionState, now_us: int) -> list[tuple[str, str]]:
    """The reservations ``expire_reservations`` may end at ``now_us`` (old enough, no required node), in order."""
    old: list[tuple[str, str]] = []
    for key in part.reservations:
        ask = part.apps[key[0]].asks[key[1]]
        if reservation_stale(ask, now_us):
            old.append(key)
    return old


def cycle_memo(state: SchedulerState, partition: str, prev_cycle_us: int | None,
               memo: CycleMemo | None = None) -> CycleMemo:
    """A fresh memo for a partition's steps; given the old ``memo``, keeps which asks attempted
    preemption and the child orders (kept current by ``allocated_in``, whatever failed)."""
    spec = next((p for p in state.config.partitions if p.name == partition), None)
    if memo is None:
        return CycleMemo(preemption=spec is None or spec.preemption_enabled, prev_cycle_us=prev_cycle_us)
    for index in (memo.victims, memo.victims_19):
        if index is not None:
            index.nodes_returned()
    return CycleMemo(preemption=spec is None or spec.preemption_enabled, prev_cycle_us=prev_cycle_us,
                     preempt_tried=memo.preempt_tried, child_orders=memo.child_orders, victims=memo.victims,
                     victims_19=memo.victims_19, expiring=memo.expiring, wake_us=memo.wake_us)


def commit_step(state: SchedulerState, part: PartitionState, found: Step, step: int, now_us: int,
                out: list[OutputData], memo: CycleMemo) -> CycleMemo:
    """``commit`` a found step; returns the memo for the next step.

    The memo is told what the step changed: its app's queues (and those of the reservations
    it ended). When a reservation ended (a node came back) failures may now succeed: a fresh
    memo, with the child orders kept.
    """
    freed = commit(state, part, found, step, now_us, out)
    expired = (expire_reservations(part, now_us, out, memo.expiring)
               if part.profile is YUNIKORN_1_9 and part.reservations and memo.expiring != [] else [])
    freed = freed or bool(expired)
    for app in (found.app, *(held_app for held_app, _ in found.cancel), *expired):
        memo.allocated_in(app.queue)
    for index in (memo.victims, memo.victims_19):
        if index is not None:
            if found.victims:
                index.taken(found.victims)
            elif found.reserve is None:
                index.changed(found.app.queue)  # an allocation: the leaf may give victims now
    if freed:
        return cycle_memo(state, part.name, memo.prev_cycle_us, memo)
    return memo


def begin_cycle(state: SchedulerState, now_us: int, out: list[OutputData]) -> int | None:
    """Open the next cycle: its number, the app timers due, its time. Returns the previous cycle's
    time, which the steps' memo needs (preemption attempt ticks)."""
    state.cycle += 1
    if state.timer_due(now_us):
        state.settled_cycle = None  # a timer may change an app's state (``settled``)
    state.fire_timers(now_us, out)
    prev_cycle_us, state.cycle_time_us = state.cycle_time_us, now_us
    return prev_cycle_us


CycleStep = tuple[PartitionState, CycleMemo, Step, int]  # partition, its memo, the step found, decisions before it


def cycle_steps(state: SchedulerState, now_us: int, prev_cycle_us: int | None, out: list[OutputData],
                max_allocations: int | None = None) -> Iterator[CycleStep]:
    """The opened cycle's allocation steps, partition by partition, each yielded *before* it is
    committed (committed when the consumer asks for the next one).

    The one loop of a cycle: ``run_cycle`` consumes it whole; ``replay explain`` stops at the step
    it explains and reads the state and memo that step was found in. A decision's id counts the
    cycle's decisions (reservations and preemptions are not decisions), so the yielded count is
    the number of decisions made before this step.
    """
    if settled(state, now_us, prev_cycle_us):
        state.settled_cycle = state.cycle  # the same state, the same bound
        return
    state.settled_cycle = None
    wake_us: int | None = None  # the earliest of the partitions' memos' ``wake_us``
    decisions = 0
    cut = False  # stopped at ``max_allocations``: the walks may have more to do (not settled)
    for name in sorted(state.partitions):
        part = state.partitions[name]
        if part.profile is YUNIKORN_1_9:
            if part.quota_clocks:  # yunikorn-1.9's quota preemption tick (a 1 s goroutine there)
                quota_preemption.tick(part, now_us, out)
            part.refresh_fair_max()  # the cluster's capacity may have changed since
            expire_reservations(part, now_us, out)
        memo = cycle_memo(state, name, prev_cycle_us)
        if part.profile is YUNIKORN_1_9:
            memo.expiring = expiring(part, now_us)
        while True:
            if max_allocations is not None and decisions >= max_allocations:
                cut = True
                break
            found = next_step(part, memo, now_us)
            if memo.backed_off:
                _write_backoffs(memo, out)
            cancelled = bool(memo.cancelled)  # reservations a preemption attempt ended (``_cancel_stale``)
            if cancelled:
                out.extend(memo.cancelled)
                memo.cancelled.clear()
            if found is None:
                if cancelled:  # nodes came back: the next step may find what this one did not
                    memo = cycle_memo(state, name, prev_cycle_us, memo)
                    continue
                if memo.wake_us is not None and (wake_us is None or memo.wake_us < wake_us):
                    wake_us = memo.wake_us
                break
            yield part, memo, found, decisions
            if found.reserve is None:
                decisions += 1
            memo = commit_step(state, part, found, decisions, now_us, out, memo)
            if cancelled:
                memo = cycle_memo(state, name, prev_cycle_us, memo)
    if not cut:
        state.settled_cycle, state.settled_until_us = state.cycle, wake_us


def settled(state: SchedulerState, now_us: int, prev_cycle_us: int | None) -> bool:
    """The walks of a cycle at ``now_us`` would find nothing, known without walking: the previous
    cycle ended with every walk finding nothing, and since then no input was applied and no
    timer fired (``state.settled_cycle``), so the state is the one those walks ended on, and
    nothing a walk reads has changed with time alone.

    A full cluster's cycles are mostly of this kind; walking every waiting leaf again cost each
    of them O(waiting queues) in steps and more in memory touched (issue 32's steady cycle). A
    walk reads the time in three places (yunikorn-1.9's steps before the walk aside: a partition
    under that profile is never skipped):

    * ``_may_reserve``, an ask's age: the walks noted the earliest time an ask they found too
      young comes of age (``CycleMemo.wake_us``, kept in ``state.settled_until_us``);
    * ``may_attempt``, preemption ticks: preemption is off, or no ask ever added may preempt;
    * the unschedulable-ask backoff: every backoff had ended by the previous cycle.

    Within a cycle the memo gives what a walk from scratch would (the module docstring): an ask
    it skips failed earlier on a reason that only hardens within a cycle (no room, headroom,
    limits), or on its age, which the memo noted; so the last walk finding nothing means a
    walk from scratch of the final state finds nothing, and with the time read the same, so
    does the next cycle's. ``tests/unit/test_settled_cycles.py`` compares every cycle with the
    walks run.
    """
    if state.settled_cycle != state.cycle - 1 or prev_cycle_us is None or now_us < prev_cycle_us:
        return False
    until = state.settled_until_us
    if until is not None and now_us >= until:
        return False
    for part in state.partitions.values():
        if part.profile is YUNIKORN_1_9 or part.backoffs_until_us > prev_cycle_us:
            return False
        if part.preempting_asks:
            spec = next((p for p in state.config.partitions if p.name == part.name), None)
            if spec is None or spec.preemption_enabled:
                return False
    return True


def _write_backoffs(memo: CycleMemo, out: list[OutputData]) -> None:
    for app, count in memo.backed_off:
        out.append(AppBackedOff.model_construct(app_id=app.app_id, asks=count, until=format_time(app.backoff_until_us)))
    memo.backed_off.clear()


def run_cycle(state: SchedulerState, now_us: int, max_allocations: int | None = None) -> tuple[list[OutputData], int]:
    """Run the next cycle at time ``now_us``; returns its outputs and decision count."""
    out: list[OutputData] = []
    prev_cycle_us = begin_cycle(state, now_us, out)
    decisions = 0
    for step in cycle_steps(state, now_us, prev_cycle_us, out, max_allocations):
        if step[2].reserve is None:
            decisions += 1
    return out, decisions
