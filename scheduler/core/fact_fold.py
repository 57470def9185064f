"""Fold a recorded cycle as fact: apply its inputs, then its recorded outputs — no search.

A complete cycle in the output log is what happened: the resource manager started what
``allocation.decided`` said, on the node it named. Recovery therefore rebuilds the state
from the inputs *and* the recorded outputs, whatever rules made them; re-running the
allocation search is verification (``replay verify``), never recovery.

A cycle's outputs come in two phases (``Engine.cycle``): first those made by applying the
inputs (rejections, ``config.applied``, ``New → Accepted``, revocations of a removed node,
…), then those of the cycle itself (timers, then decisions and the state changes they
cause). Applying the inputs again makes the first phase; the second is folded from the
record. Each output type says, in ``FOLDS``, whether it opens the cycle phase and how it
changes the state; a type with no entry (written by a newer evsched) stops the fold with a
``FoldError`` instead of being skipped. Adding an output type means adding its entry.

Timers due at the cycle's time are dropped: the record says which of them fired (the
others found their app moved on, as in ``SchedulerState.fire_timers``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from events.log.port import LogRecord
from events.models import AllocationRevoked, AskReserved, AskUnreserved, OutputData
from events.times import parse_time
from scheduler.config.profiles import RulesProfile
from scheduler.core import gang, preemption, quota_preemption, reservations
from scheduler.core.engine import Engine
from scheduler.core.logged_cycle import apply_batch
from scheduler.core.objects import App, Node
from scheduler.core.partition import PartitionState
from scheduler.core.state import SchedulerState

TIMER_TARGET = {"Starting": "Running", "Completing": "Completed"}
# A gang's placeholder timer: the transitions it starts, and the revocations a gang makes in a cycle
GANG_TIMER = frozenset({("Accepted", "Resuming"), ("Accepted", "Failing"), ("New", "Resuming"), ("New", "Failing")})
GANG_REVOKED = frozenset({"placeholder-replaced", "placeholder-timeout", "app-failed"})
# a preemption step's victim, and yunikorn-1.9's quota preemption's (scheduler.core.quota_preemption)
PREEMPTED = frozenset({"preempted", "quota-preempted"})
COMPLETED_LEAVES_SINCE = 2  # rules version from which a Completed app leaves its queue and partition


class FoldError(Exception):
    """A recorded output cannot be folded into the state (names something that is not there,
    or a type this build does not know)."""


@dataclass
class _Cycle:
    """What the fold of one cycle's outputs has seen so far."""

    state: SchedulerState
    now_us: int
    rules_version: int
    decided: set[tuple[str, str]] = field(default_factory=set)  # (partition, app) allocated this cycle
    unsettled: dict[str, tuple[dict[str, Node], dict[str, App]]] = field(default_factory=dict)  # per partition
    last_partition: str | None = None
    sink: list[OutputData] = field(default_factory=list)  # outputs re-made by the fold: already recorded
    # app → the time of its placeholder timeout, which its transitions in this cycle happened at
    timeout_at: dict[str, int] = field(default_factory=dict)

    def note_timeout(self, app: App) -> None:
        """The app's placeholder timer fired in this cycle (its transitions take the timer's time)."""
        if app.gang is not None and app.gang.timer_us is not None and app.gang.timer_us <= self.now_us:
            self.timeout_at.setdefault(app.app_id, app.gang.timer_us)


@dataclass(frozen=True)
class OutputFold:
    """How one output type enters the state when it is recorded in a complete cycle."""

    opens_cycle_phase: Callable[[Mapping[str, Any]], bool]
    fold: Callable[[_Cycle, Mapping[str, Any]], None] | None  # None: made only by applying inputs


@dataclass(frozen=True)
class Folded:
    """The result of folding one recorded cycle."""

    digest: str
    input_outputs: int  # outputs this code made applying the inputs
    recorded_input_outputs: int  # outputs recorded before the cycle phase


def _partition(cyc: _Cycle, name: str) -> PartitionState:
    part = cyc.state.partitions.get(name)
    if part is None:
        raise FoldError(f"partition {name!r} does not exist")
    return part


def _fold_decided(cyc: _Cycle, data: Mapping[str, Any]) -> None:
    part = _partition(cyc, data["partition"])
    app = part.apps.get(data["app_id"])
    ask = app.asks.get(data["ask_id"]) if app is not None else None
    node = part.nodes.get(data["node_id"])
    if app is None or ask is None or node is None:
        raise FoldError(
            f"decision {data['decision_id']}: ask {data['ask_id']!r} of {data['app_id']!r} or node "
            f"{data['node_id']!r} is not in the state"
        )
    if data.get("replaced_ask_id") is not None:  # the placeholder's revocation came first
        part.allocate(app, ask, node, data["decision_id"], settle=False)
        group = app.gang.groups.get(ask.task_group) if app.gang is not None else None
        if group is not None:
            group.replaced += 1
    elif ask.placeholder:
        before = dict(app.gang.placeholders) if app.gang is not None else {}
        part.allocate(app, ask, node, data["decision_id"], settle=False)
        gang.placeholder_allocated(app, before, cyc.now_us, cyc.state)
        gang.allocating_while_accepted(app)  # a state change recorded after it ends this if it moves on
    else:
        part.allocate(app, ask, node, data["decision_id"], settle=False)
    if part.quota_clocks:  # as cycle.commit: over max starts the queue's quota preemption delay
        quota_preemption.on_allocated(part, app.queue, cyc.now_us)
    nodes, apps = cyc.unsettled.setdefault(part.name, ({}, {}))
    nodes[node.node_id] = node
    apps[app.app_id] = app
    # Timers fire at the cycle's start, before its steps: a state change recorded after one of
    # the app's decisions happened at the cycle's time, not at its placeholder timeout's.
    cyc.timeout_at.pop(app.app_id, None)
    cyc.decided.add((part.name, app.app_id))
    cyc.last_partition = part.name


def _find_app(cyc: _Cycle, app_id: str, frm: str) -> tuple[PartitionState, App]:
    names = sorted(cyc.state.partitions)
    if cyc.last_partition is not None:
        names.insert(0, cyc.last_partition)
    for name in names:
        part = cyc.state.partitions[name]
        app = part.apps.get(app_id)
        if app is not None and app.state == frm:
            return part, app
    raise FoldError(f"no application {app_id!r} in state {frm}")


def _fold_state_changed(cyc: _Cycle, data: Mapping[str, Any]) -> None:
    frm, to = data["from"], data["to"]
    part, app = _find_app(cyc, data["app_id"], frm)
    if (part.name, app.app_id) in cyc.decided or (frm, to) in GANG_TIMER:
        # caused by a decision (cycle.commit), or by a gang's placeholders (scheduler.core.gang)
        if (frm, to) in GANG_TIMER:
            cyc.note_timeout(app)
        cyc.decided.add((part.name, app.app_id))
        part.transition(app, to, cyc.timeout_at.get(app.app_id, cyc.now_us), cyc.state, cyc.sink)
        if to in ("Completed", "Failed"):
            part.detach(app)  # only a gang's placeholders end an app inside a cycle's steps
    elif TIMER_TARGET.get(frm) == to:
        # A timer that fired at the start of the cycle; under rules 1 a Completed app stayed listed.
        cyc.state.expire(part, app, cyc.sink, leave=cyc.rules_version >= COMPLETED_LEAVES_SINCE)
    else:
        raise FoldError(f"application {app.app_id!r}: {frm} → {to} is neither a timer nor after a decision")


def _never(data: Mapping[str, Any]) -> bool:
    return False


def _fold_reserved(cyc: _Cycle, data: Mapping[str, Any]) -> None:
    reservations.fold(cyc.state.partitions, AskReserved.model_validate(data), cyc.state.cycle, cyc.now_us)


def _fold_revoked(cyc: _Cycle, data: Mapping[str, Any]) -> None:
    """A preemption victim (``reason: preempted`` or ``quota-preempted``): marked, counted as
    preempting, its preemptor (if any) marked as having preempted
    (``scheduler.core.preemption.fold``); it stays allocated."""
    revoked = AllocationRevoked.model_validate(data)
    if revoked.reason in GANG_REVOKED:
        _fold_gang_revoked(cyc, revoked)
        return
    if revoked.reason not in PREEMPTED:
        raise FoldError(f"allocation.revoked ({revoked.reason}) is made only by applying inputs")
    try:
        preemption.fold(cyc.state.partitions, revoked)
    except KeyError as exc:
        raise FoldError(f"cannot fold the preemption of {revoked.app_id}/{revoked.ask_id}: {exc}") from None


def _fold_gang_revoked(cyc: _Cycle, revoked: AllocationRevoked) -> None:
    """A gang's placeholder replaced or timed out, or a failed app's allocation: it ends now."""
    for part in _partitions_first(cyc):
        app = part.apps.get(revoked.app_id)
        alloc = app.allocations.get(revoked.ask_id) if app is not None else None
        if app is None or alloc is None or alloc.node_id != revoked.node_id:
            continue
        if revoked.reason == "placeholder-timeout":
            cyc.note_timeout(app)
        if revoked.reason == "placeholder-timeout" and alloc.placeholder and app.gang is not None:
            group = app.gang.groups.get(alloc.task_group)
            if group is not None:
                group.timed_out += 1
        part.release(app, alloc)
        cyc.decided.add((part.name, app.app_id))
        cyc.last_partition = part.name
        return
    raise FoldError(f"allocation.revoked ({revoked.reason}) of {revoked.app_id}/{revoked.ask_id}: no such allocation")


def _partitions_first(cyc: _Cycle) -> list[PartitionState]:
    names = sorted(cyc.state.partitions)
    if cyc.last_partition is not None:
        names.insert(0, cyc.last_partition)
    return [cyc.state.partitions[n] for n in names]


def _fold_ask_released(cyc: _Cycle, data: Mapping[str, Any]) -> None:
    """A pending ask given up at its app's placeholder timeout (``scheduler.core.gang``)."""
    for part in _partitions_first(cyc):
        app = part.apps.get(data["app_id"])
        ask = app.asks.get(data["ask_id"]) if app is not None else None
        if app is not None and ask is not None:
            gang.drop_ask(part, app, ask, cyc.sink)
            cyc.decided.add((part.name, app.app_id))
            return
    raise FoldError(f"ask.released of {data['app_id']}/{data['ask_id']}: no such pending ask")


def _fold_backed_off(cyc: _Cycle, data: Mapping[str, Any]) -> None:
    """yunikorn-1.9's unschedulable-ask backoff: the walk skips the app until the time given."""
    for part in _partitions_first(cyc):
        app = part.apps.get(data["app_id"])
        if app is not None:
            part.back_off(app, parse_time(data["until"]))
            return
    raise FoldError(f"app.backed_off of {data['app_id']}: no such app")


def _fold_unreserved(cyc: _Cycle, data: Mapping[str, Any]) -> None:
    reservations.fold(cyc.state.partitions, AskUnreserved.model_validate(data), cyc.state.cycle)


# ask.unreserved reasons a cycle's steps make (the others come from applying inputs)
_STEP_UNRESERVE = frozenset({"allocated", "required-node", "timeout", "preemption", "preemption-cancelled"})


FOLDS: dict[str, OutputFold] = {
    "allocation.decided": OutputFold(lambda d: True, _fold_decided),
    # Timer transitions open the cycle phase; other changes there follow a decision.
    "app.state_changed": OutputFold(lambda d: TIMER_TARGET.get(d.get("from", "")) == d.get("to")
                                    or (d.get("from"), d.get("to")) in GANG_TIMER, _fold_state_changed),
    "ask.reserved": OutputFold(lambda d: True, _fold_reserved),
    "ask.unreserved": OutputFold(lambda d: d.get("reason") in _STEP_UNRESERVE, _fold_unreserved),
    # node-removed: made by applying node.removed; preempted: a cycle's preemption step; a gang's:
    # a replacement step or a placeholder timer
    "allocation.revoked": OutputFold(lambda d: d.get("reason") in PREEMPTED or d.get("reason") in GANG_REVOKED,
                                     _fold_revoked),
    "ask.released": OutputFold(lambda d: True, _fold_ask_released),
    "app.backed_off": OutputFold(lambda d: True, _fold_backed_off),  # a walk step (yunikorn-1.9)
    "app.placed": OutputFold(_never, None),  # made by applying app.added (placement rules)
    "input.rejected": OutputFold(_never, None),
    "config.applied": OutputFold(_never, None),
}


def _gone_before(state: SchedulerState, obj: Mapping[str, Any]) -> bool:
    """A Completing -> Completed of an app no longer in the state once the inputs are applied:
    ``app.removed`` made it (rules 4: an app removed holding nothing completes at once), not
    the cycle's timer."""
    if obj.get("type") != "app.state_changed":
        return False
    data = obj["data"]
    return not any((app := part.apps.get(data.get("app_id", ""))) is not None and app.state == data.get("from")
                   for part in state.partitions.values())


def _entry(kind: str) -> OutputFold:
    entry = FOLDS.get(kind)
    if entry is None:
        raise FoldError(f"output type {kind!r} is not known to this version of evsched")
    return entry


def fold_recorded_cycle(
    engine: Engine,
    records: Sequence[LogRecord],
    channel_order: Sequence[str],
    now_us: int,
    outputs: Sequence[Mapping[str, Any]],
    rules_version: int,
    admin_channels: Sequence[str] | None = None,
) -> Folded:
    """Apply a complete cycle's inputs, then fold its recorded outputs (between ``cycle.started``
    and ``cycle.completed``, as JSON objects) into the engine; returns the state digest after."""
    apply_batch(engine, records, channel_order, admin_channels=admin_channels)  # as cycle.started recorded
    made = len(engine.pending_outputs)
    engine.pending_outputs = []
    state = engine.state
    state.cycle += 1
    state.cycle_time_us = now_us  # as run_cycle: the previous cycle's time sets preemption attempt ticks
    state.drop_due_timers(now_us)
    for name in sorted(state.partitions):  # the quota preemption tick's walk (its victims are recorded)
        part = state.partitions[name]
        if part.quota_clocks and part.profile is RulesProfile.YUNIKORN_1_9:
            quota_preemption.due_queues(part, now_us)
    cyc = _Cycle(state, now_us, rules_version)
    boundary = len(outputs)
    for i, obj in enumerate(outputs):
        if _entry(obj.get("type", "")).opens_cycle_phase(obj["data"]) and not _gone_before(state, obj):
            boundary = i
            break
    for obj in outputs[boundary:]:
        entry = _entry(obj["type"])
        if entry.fold is None:
            raise FoldError(f"output {obj.get('id')} ({obj['type']}) is not one a cycle makes after its inputs")
        entry.fold(cyc, obj["data"])
    for name, (nodes, apps) in sorted(cyc.unsettled.items()):
        state.partitions[name].settle(nodes.values(), apps.values())
    return Folded(engine.digest(), made, boundary)
