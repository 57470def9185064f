"""Gang scheduling: placeholders of task groups, their replacement by real asks, and their timeout.

Following YuniKorn v1.5.2 (``objects/application.go``: ``canReplace``, ``tryPlaceholderAllocate``,
``timeoutPlaceholderProcessing``, ``addAllocationInternal``, ``removeAllocationInternal``,
``ReplaceAllocation``; ``partition.go`` ``tryPlaceholderAllocate``; docs/semantics.md#gang-scheduling):

- A placeholder ask is allocated like any ask. It does not move its app on, except that the
  placeholder that completes the app's ``placeholder_ask`` moves it as an allocation does
  (Accepted → Starting). The first one arms the app's placeholder timer (log time).
- A real ask of a task group that still has placeholders left to replace (asked for, minus
  replaced, minus given up) is not allocated by the walk: the replacement step, tried between
  the reserved asks and the walk, swaps it for an allocated placeholder of its group on that
  placeholder's node (``allocation.revoked`` ``placeholder-replaced``, then the real
  ``allocation.decided`` naming the placeholder). A real ask larger than the placeholder in
  some type is not swapped (YuniKorn releases such a placeholder; see semantics.md).
- The timer: an app past Accepted (Starting, Running, Completing) loses its remaining
  placeholders; an app still Accepted (or New) goes Resuming (``Soft``) or Failing (``Hard``),
  loses every pending ask (``ask.released``) and every placeholder, and then goes back to
  Accepted, or on to Failed (and leaves the partition). Under yunikorn-1.9 that case (any app
  not past Accepted with placeholders allocated) loses its real allocations too (``_release_real``).

The resource manager's side is taken as done at once: a released placeholder is gone when the
step (or the timer) that released it ends, as the conformance harness's shim confirms it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from events.models import AllocationRevoked, AskReleased, OutputData
from events.resources import Resources, equals, is_positive
from scheduler.config.profiles import RulesProfile
from scheduler.core.constrained_nodes import node_admits
from scheduler.core.objects import Allocation, App, Ask, Gang, TaskGroup
from scheduler.core.partition import PartitionState, Timers
from scheduler.core.queues import QueueNode
from scheduler.core.reservations import Step
from scheduler.core.sorting import stateaware_allowed

DEFAULT_TIMEOUT_US: Final = 15 * 60 * 1_000_000  # YuniKorn defaultPlaceholderTimeout
PLACEHOLDER_TIMER: Final = "placeholder"  # the state name a placeholder timer is kept under
RESUMING, FAILING, FAILED = "Resuming", "Failing", "Failed"


def new_gang(placeholder_ask: Resources, style: str, timeout_ms: int) -> Gang:
    """An app's gang from ``app.added`` (a timeout of 0 is YuniKorn's default, 15 minutes)."""
    return Gang(dict(placeholder_ask), style == "Hard", timeout_ms * 1000 if timeout_ms else DEFAULT_TIMEOUT_US)


def sends_gang(placeholder_ask: Resources, style: str, timeout_ms: int) -> bool:
    """Whether an ``app.added`` says anything of gang scheduling (else the app has no gang yet)."""
    return bool(placeholder_ask) or style != "Soft" or timeout_ms != 0


def ensure_gang(app: App) -> Gang:
    """The app's gang, made with YuniKorn's defaults when its ``app.added`` said nothing of one."""
    if app.gang is None:
        app.gang = new_gang({}, "Soft", 0)
    return app.gang


def ask_added(app: App, ask: Ask) -> None:
    """A new placeholder counts in its task group (YuniKorn ``addPlaceholderData``)."""
    gang = ensure_gang(app)
    if ask.placeholder:
        group = gang.groups.get(ask.task_group)
        if group is None:
            group = gang.groups[ask.task_group] = TaskGroup()
        group.count += 1


def can_replace(gang: Gang, ask: Ask) -> bool:
    """A real ask of a task group with placeholders left to replace: the walk leaves it to the
    replacement step (YuniKorn ``canReplace``)."""
    if ask.placeholder or not ask.task_group:
        return False
    group = gang.groups.get(ask.task_group)
    return group is not None and group.count > group.replaced + group.timed_out


def unsupported(leaf: QueueNode, placeholder_ask: Resources) -> str | None:
    """Why a leaf cannot take an app with this placeholder total (YuniKorn ``AddApplication``): only
    fifo and stateaware leaves run task groups, and the total must fit every max below root."""
    if not is_positive(placeholder_ask):
        return None
    if leaf.app_sort_policy not in ("fifo", "stateaware"):
        return (f"queue {leaf.path} cannot run an application with a task group request: "
                f"sort policy {leaf.app_sort_policy} (only fifo and stateaware)")
    for q in leaf.ancestry():
        if q.parent is None or not q.max:
            continue
        for name, qty in placeholder_ask.items():
            limit = q.max.get(name)
            if limit is not None and qty > limit:
                return f"queue {leaf.path} cannot fit the task group request: {name} {qty} > max {limit} of {q.path}"
    return None


# -- the replacement step -----------------------------------------------------------------


def replacement_step(part: PartitionState,
                     children_in_order: Callable[[QueueNode], Iterable[QueueNode]]) -> Step | None:
    """The first real ask that replaces an allocated placeholder: queues in order, their apps
    holding placeholders in app order, each app's real asks of a task group in ask order,
    its placeholders of that group in allocation order (YuniKorn ``TryPlaceholderAllocate``)."""
    leaves = {app.queue.path for app in part.apps.values() if app.gang is not None and app.gang.placeholders}
    if not leaves:
        return None
    return _walk(part, part.root, leaves, children_in_order)


def _walk(part: PartitionState, queue: QueueNode, leaves: set[str],
          children_in_order: Callable[[QueueNode], Iterable[QueueNode]]) -> Step | None:
    if queue.is_leaf:
        return _try_leaf(part, queue) if queue.path in leaves else None
    prefix = queue.path + "."
    if not any(path.startswith(prefix) for path in leaves):
        return None
    for child in children_in_order(queue):
        found = _walk(part, child, leaves, children_in_order)
        if found is not None:
            return found
    return None


def _try_leaf(part: PartitionState, leaf: QueueNode) -> Step | None:
    apps = part.ordered_apps(leaf)
    allowed: set[str] | None = None
    if leaf.app_sort_policy == "stateaware":
        allowed = stateaware_allowed(apps, list(part.starting[leaf.path].values()))
    for app in apps:
        if app.gang is None or not app.gang.placeholders or (allowed is not None and app.app_id not in allowed):
            continue
        found = _try_app(part, app)
        if found is not None:
            return found
    return None


def _try_app(part: PartitionState, app: App) -> Step | None:
    placeholders = sorted((a for a in app.allocations.values() if a.placeholder and not a.preempted),
                          key=lambda a: a.seq)
    for ask in app.sorted_asks:
        if ask.placeholder or not ask.task_group:
            continue
        for ph in placeholders:
            if ph.task_group != ask.task_group or not _covers(ph.resources, ask.resources):
                continue
            node = part.nodes.get(ph.node_id)
            # YuniKorn checks the real ask against the placeholder's node (``preReserveConditions``:
            # the shim's predicates), as the walk checks an ask's constraints against any node
            if node is not None and (ask.constraints is None or node_admits(ask.constraints, node)):
                return Step(app, ask, node, replaces=ph)
    return None


def _covers(placeholder: Resources, real: Resources) -> bool:
    """The placeholder holds at least the real ask of every type."""
    return all(placeholder.get(name, 0) >= qty for name, qty in real.items())


# -- committing: placeholders allocated, replaced, removed ----------------------------------


def placeholder_allocated(app: App, before: Resources, now_us: int, timers: Timers) -> bool:
    """A placeholder was allocated (``before``: the app's placeholders until then): the first arms
    the timer of an Accepted app. True when it completes the app's placeholder total, which moves
    the app on as an allocation does (YuniKorn ``addAllocationInternal``)."""
    gang = ensure_gang(app)
    if not is_positive(before) and gang.timer_us is None and app.state == "Accepted":
        gang.timer_us = now_us + gang.timeout_us
        timers.schedule_placeholder(gang.timer_us, app)
    return equals(gang.placeholders, gang.placeholder_ask)


def allocating_while_accepted(app: App) -> None:
    """After a placeholder's step: an app still Accepted counts as running for maxapplications
    until it leaves Accepted for Starting/Running or leaves its queue (YuniKorn ``setAllocatingAccepted``)."""
    gang = app.gang
    if gang is not None and app.state == "Accepted" and not gang.allocating_accepted:
        gang.allocating_accepted = True
        app.queue.add_allocating_accepted(1)


def replace(part: PartitionState, app: App, ask: Ask, ph: Allocation, decision_id: str, now_us: int,
            timers: Timers, out: list[OutputData]) -> bool:
    """Swap ``ph`` for the real ``ask`` on its node (YuniKorn ``ReplaceAllocation``): the placeholder
    is released first (``placeholder-replaced``; its app may move as a removed placeholder moves it),
    then the real allocation is added. The caller writes the decision, then, when this returns
    True, moves the app on (``run_application``): not for the app's first real allocation, as
    the completed gang moved it already, unless it is Completing."""
    gang = ensure_gang(app)
    part.unreserve(app, ask, "allocated", out)
    part.remove_pending(app, ask)  # YuniKorn updates the ask's repeat when it finds the swap
    _revoke(part, app, ph, "placeholder-replaced", out)
    placeholder_removed(part, app, ph, now_us, timers, out, by_owner=False)
    had_real = is_positive(app.allocated)
    part.allocate(app, ask, part.nodes[ph.node_id], decision_id, pending=False)
    group = gang.groups.get(ph.task_group)
    if group is not None:
        group.replaced += 1
    return had_real or app.state == "Completing"


def run_application(part: PartitionState, app: App, now_us: int, timers: Timers, out: list[OutputData]) -> None:
    """YuniKorn's ``RunApplication`` event after an allocation: Accepted → Starting (→ Running at
    once with the stateaware-disable tag), Starting or Completing → Running, Resuming → Accepted."""
    state = app.state
    if state == "Accepted" and part.profile is RulesProfile.YUNIKORN_1_9:  # no Starting state (YUNIKORN-2495)
        part.transition(app, "Running", now_us, timers, out)
    elif state == "Accepted":
        part.transition(app, "Starting", now_us, timers, out)
        if app.stateaware_disabled:
            part.transition(app, "Running", now_us, timers, out)
    elif state in ("Starting", "Completing"):
        part.transition(app, "Running", now_us, timers, out)
    elif state == RESUMING:
        part.transition(app, "Accepted", now_us, timers, out)


def _revoke(part: PartitionState, app: App, alloc: Allocation, reason: str, out: list[OutputData]) -> None:
    out.append(AllocationRevoked.model_construct(app_id=app.app_id, ask_id=alloc.ask_id, node_id=alloc.node_id,
                                                 reason=reason, decision_id=alloc.decision_id))
    part.release(app, alloc)


def placeholder_removed(part: PartitionState, app: App, alloc: Allocation, now_us: int, timers: Timers,
                        out: list[OutputData], *, by_owner: bool) -> None:
    """After a placeholder left (YuniKorn ``removeAllocationInternal``): one the resource manager
    ended (``by_owner``) counts as given up in its task group; the app's last one clears the timer
    and moves a Failing app to Failed, a Resuming one to Accepted, and one with nothing pending
    and no real allocation to Completing (Completed from Completing)."""
    gang = ensure_gang(app)
    if by_owner:
        group = gang.groups.get(alloc.task_group)
        if group is not None:
            group.timed_out += 1
    if is_positive(gang.placeholders):
        return
    gang.timer_us = None
    if app.state == FAILING:
        fail(part, app, now_us, timers, out)
    elif app.state == RESUMING:
        part.transition(app, "Accepted", now_us, timers, out)
    elif not app.asks and not is_positive(app.allocated):
        if app.state in ("Accepted", "Starting", "Running"):
            part.transition(app, "Completing", now_us, timers, out)
        elif app.state == "Completing":
            part.transition(app, "Completed", now_us, timers, out)
            part.detach(app)


def fail(part: PartitionState, app: App, now_us: int, timers: Timers, out: list[OutputData]) -> None:
    """Failing → Failed: the app leaves its queue and the partition, with any real allocation it
    still holds revoked (``app-failed``; YuniKorn leaves them counted on their nodes)."""
    for alloc in sorted(app.allocations.values(), key=lambda a: a.seq):
        _revoke(part, app, alloc, "app-failed", out)
    part.transition(app, FAILED, now_us, timers, out)
    part.detach(app)


# -- the timer --------------------------------------------------------------------------


def timeout(part: PartitionState, app: App, now_us: int, timers: Timers, out: list[OutputData]) -> None:
    """The placeholder timer fired (YuniKorn ``timeoutPlaceholderProcessing``), at ``now_us``."""
    gang = ensure_gang(app)
    gang.timer_us = None
    placeholders = sorted((a for a in app.allocations.values() if a.placeholder), key=lambda a: a.seq)
    if app.state in ("Starting", "Running", "Completing") and placeholders:
        _release_all(part, app, placeholders, now_us, timers, out)
        return
    if app.state in ("New", "Accepted"):
        part.transition(app, FAILING if gang.hard else RESUMING, now_us, timers, out)
    for ask in list(app.sorted_asks):
        out.append(AskReleased.model_construct(app_id=app.app_id, ask_id=ask.ask_id, reason="placeholder-timeout"))
        drop_ask(part, app, ask, out)
    if part.profile is RulesProfile.YUNIKORN_1_9:
        _release_real(part, app, now_us, timers, out)
    _release_all(part, app, placeholders, now_us, timers, out)


def _release_real(part: PartitionState, app: App, now_us: int, timers: Timers, out: list[OutputData]) -> None:
    """yunikorn-1.9: the timeout's second case releases every allocation of the app, real ones too
    (``application.go:timeoutPlaceholderProcessing`` walks ``sa.allocations``: "all allocations are
    placeholders release them all"; 1.5 released the placeholders only). A real one left is a
    replacement made while the app was still Accepted. Each goes as YuniKorn's
    ``removeAllocationInternal`` takes it: the last one, with nothing pending, completes a Running
    or Accepted app (a Resuming one refuses the event). YuniKorn walks a Go map, so the real ones
    may go before or after the placeholders (yunikorn-core decides this either way); evsched
    releases them first, oldest first: a Resuming app then returns to Accepted with its last
    placeholder, as under 1.5."""
    for alloc in sorted((a for a in app.allocations.values() if not a.placeholder), key=lambda a: a.seq):
        _revoke(part, app, alloc, "placeholder-timeout", out)
        part.maybe_completing(app, now_us, timers, out, real_only=True)


def drop_ask(part: PartitionState, app: App, ask: Ask, out: list[OutputData]) -> None:
    """A pending ask given up at a timeout; a placeholder's counts as given up in its task group."""
    if ask.placeholder and app.gang is not None:
        group = app.gang.groups.get(ask.task_group)
        if group is not None:
            group.timed_out += 1
    part.remove_ask(app, ask, out)


def _release_all(part: PartitionState, app: App, placeholders: Iterable[Allocation], now_us: int, timers: Timers,
                 out: list[OutputData]) -> None:
    for ph in placeholders:
        if ph.ask_id not in app.allocations or part.apps.get(app.app_id) is not app:
            continue  # the app left with an earlier one (Failed, Completed)
        _revoke(part, app, ph, "placeholder-timeout", out)
        group = app.gang.groups.get(ph.task_group) if app.gang is not None else None
        if group is not None:
            group.timed_out += 1
        placeholder_removed(part, app, ph, now_us, timers, out, by_owner=False)


def release_on_completion(part: PartitionState, app: App, out: list[OutputData]) -> None:
    """A Completing app's timer found placeholders left: they are released first (YuniKorn
    ``timeoutStateTimer``), then it completes as usual."""
    for ph in sorted((a for a in app.allocations.values() if a.placeholder), key=lambda a: a.seq):
        _revoke(part, app, ph, "placeholder-timeout", out)
    if app.gang is not None:
        app.gang.timer_us = None


def decided_values(ask: Ask, replaced: Allocation | None) -> dict[str, object]:
    """The gang fields of an ``allocation.decided`` (docs/events.md): only for a placeholder, an
    ask of a task group, or a replacement, so every other decision keeps its bytes."""
    return {"placeholder": ask.placeholder, "task_group": ask.task_group,
            "replaced_ask_id": replaced.ask_id if replaced is not None else None,
            "replaced_decision_id": replaced.decision_id if replaced is not None else None}

