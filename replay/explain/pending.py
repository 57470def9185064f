"""Explain a pending ask: why an ask still waiting after the last cycle has not been allocated.

At the end of a cycle a full walk allocates nothing, so a pending ask is held by at least
one of: the stateaware gate of its leaf, its queue's (or an ancestor's) maxapplications,
a queue max on the way up (root: the cluster's capacity; with what frees it when something
does: revoked allocations not yet released, yunikorn-1.9's quota preemption under way), or
no node that holds it. All
that apply are listed, each naming its rule (a docs/semantics.md section), the queue, app, node or resource
at fault, with the ask's place in the queue, app and ask orders for context (the walk
goes past anything that fails, so order alone never blocks an ask at a cycle's end).
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field
from typing import Any

from events.times import format_time
from replay.explain.format import (
    RULE_BACKOFF,
    RULE_QUEUE_SORT,
    RULE_RESERVATION,
    Blocker,
    fmt_res,
    ordinal,
    priority_formula,
    share_list,
)
from replay.explain.gang import gang_block, gang_note
from replay.explain.preemption import pending_preemption
from replay.explain.report import ASK_ORDER, app_key_names, ask_dict
from replay.explain.walk import Walker
from scheduler.core.engine import Engine
from scheduler.core.objects import App
from scheduler.core.sorting import sort_queues


@dataclass
class PendingExplanation:
    """Why an ask is (still) pending; ``status`` says whether it is pending at all."""

    app_id: str
    ask_id: str
    partition: str | None
    status: str  # pending | allocated | unknown-app | unknown-ask
    after_cycle: int
    summary: str
    queue: str | None = None
    ask: dict[str, Any] | None = None
    queue_path: list[dict[str, Any]] = field(default_factory=list)
    app_position: dict[str, Any] | None = None
    ask_position: dict[str, Any] | None = None
    reasons: list[dict[str, str]] = field(default_factory=list)
    allocatable_now: bool = False
    decision_id: str | None = None
    preemption: dict[str, Any] | None = None  # for an ask that may preempt: what an attempt finds now

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"type": "pending_explanation", **asdict(self)}


def _find(engine: Engine, app_id: str, partition: str | None) -> tuple[str, App] | None:
    names = [partition] if partition is not None else sorted(engine.state.partitions)
    for name in names:
        part = engine.state.partitions.get(name)
        if part is not None and app_id in part.apps:
            return name, part.apps[app_id]
    return None


def _queue_path(app: App) -> list[dict[str, Any]]:
    """For each level under root, where the app's queue sits among its siblings."""
    out = []
    chain = list(app.queue.ancestry())[::-1]
    for parent, q in itertools.pairwise(chain):
        order = sort_queues(parent.children, parent.sort_priority)
        pos = order.index(q) + 1 if q in order else None
        out.append(
            {
                "parent": parent.path,
                "queue": q.path,
                "position": pos,
                "of": len(order),
                "ahead": [o.path for o in order[: (pos or 1) - 1][:5]],
                "priority_formula": priority_formula(q),
                "fair_share": share_list(q.fair_share()),
                "priority_sorting": parent.sort_priority,
                "rule": RULE_QUEUE_SORT,
            }
        )
    return out


def _status(app_id: str, ask_id: str, partition: str | None, status: str, cycle: int, text: str,
            decision_id: str | None = None) -> PendingExplanation:
    return PendingExplanation(app_id, ask_id, partition, status, cycle, text, decision_id=decision_id)


def explain_pending(engine: Engine, app_id: str, ask_id: str, partition: str | None = None, *,
                    walker: Walker | None = None) -> PendingExplanation:
    """Why ask ``ask_id`` of ``app_id`` is pending in the engine's current state (read only).

    ``walker`` (of the ask's partition) may be shared by many calls on one state: it keeps
    the cluster-wide facts the reasons quote.
    """
    cycle = engine.cycle_number
    found = _find(engine, app_id, partition)
    if found is None:
        return _status(app_id, ask_id, partition, "unknown-app", cycle, f"application {app_id} does not exist")
    pname, app = found
    part = engine.state.partitions[pname]
    if ask_id in app.allocations:
        did = app.allocations[ask_id].decision_id
        text = f"ask {ask_id} of app {app_id} is not pending: decision {did} allocated it"
        return _status(app_id, ask_id, pname, "allocated", cycle, text, did)
    ask = app.asks.get(ask_id)
    if ask is None:
        return _status(app_id, ask_id, pname, "unknown-ask", cycle, f"app {app_id} has no pending ask {ask_id}")
    if walker is None or walker.part is not part:
        walker = Walker(part)
    leaf = app.queue
    allowed = walker.stateaware_gate(leaf)
    _, node_block = walker.node_for(ask)
    candidates: list[Blocker | None] = [
        gang_block(app, ask),
        walker.stateaware_block(app, allowed),
        walker.max_apps_block(app),
        walker.user_apps_block(app),
        walker.headroom_block(leaf, ask.resources),
        walker.quota_block(leaf, ask.resources, engine.state.cycle_time_us),
        walker.user_limit_block(app, ask.resources),
        node_block,
    ]
    if ask.reserved_node is not None:
        candidates.insert(0, Blocker(
            RULE_RESERVATION,
            f"reserved on node {ask.reserved_node} since cycle {ask.reserved_cycle}: reserved asks are tried first, "
            "and it is allocated there (or on another node) as soon as it fits",
        ))
    last_cycle_us = engine.state.cycle_time_us
    if app.backoff_until_us and (last_cycle_us is None or app.backoff_until_us > last_cycle_us):
        candidates.insert(0, Blocker(
            RULE_BACKOFF,
            f"app {app_id} backs off until {format_time(app.backoff_until_us)}: its last try met its queue's "
            "application.unschedasks.backoff unschedulable asks, and the walk skips it until then (yunikorn-1.9)",
        ))
    reasons = [b for b in candidates if b is not None]
    apps = part.ordered_apps(leaf)
    asks = list(app.sorted_asks)
    out = PendingExplanation(
        app_id=app_id,
        ask_id=ask_id,
        partition=pname,
        status="pending",
        after_cycle=cycle,
        summary="",
        queue=leaf.path,
        ask=ask_dict(ask),
        queue_path=_queue_path(app),
        app_position={
            "position": apps.index(app) + 1 if app in apps else None,
            "of": len(apps),
            "sort_policy": leaf.app_sort_policy,
            "priority_sorting": leaf.sort_priority,
            "sort_key": app_key_names(leaf),
            "state": app.state,
            "priority": app.priority,
        },
        ask_position={"position": asks.index(ask) + 1, "of": len(asks), "order_rule": ASK_ORDER},
        reasons=[b.as_dict() for b in reasons],
        allocatable_now=not reasons,
    )
    out.preemption = pending_preemption(part, app, ask, engine.state.cycle_time_us)
    out.summary = _summary(out, app)
    note = gang_note(app, ask)
    if note is not None:
        out.summary += " " + note
    if out.preemption is not None and "attempt" in out.preemption:
        attempt = out.preemption["attempt"]
        finds = (f"would preempt {len(attempt['victims'])} on {attempt['node']} ({attempt.get('why_node', '')})"
                 if attempt["node"] else f"finds nothing: {attempt['failed']}")
        if attempt.get("cancels_reservations"):
            finds = (f"first cancels the reservations over an hour old of {', '.join(attempt['cancels_reservations'])} "
                     f"(YUNIKORN-3092), then {finds}")
        out.summary += f" It may preempt; an attempt now (fence {attempt['fence']}) {finds} [{attempt['rule']}]."
    return out


def _summary(out: PendingExplanation, app: App) -> str:
    assert out.ask is not None and out.app_position is not None and out.ask_position is not None
    head = (
        f"Ask {out.ask_id} of app {out.app_id} (queue {out.queue}, priority {out.ask['priority']}, "
        f"asking {fmt_res(out.ask['resources'])}) is still pending after cycle {out.after_cycle}"
    )
    if out.reasons:
        why = "; ".join(f"{r['message']} [{r['rule']}]" for r in out.reasons)
        text = f"{head} because {why}."
    else:
        text = (
            f"{head}, but nothing holds it back now: the next cycle should allocate it "
            "(its inputs arrived after the last cycle, or that cycle was cut short)."
        )
    places = [f"{p['queue']} is {ordinal(p['position'] or 0)} of {p['of']} under {p['parent']}" for p in out.queue_path]
    ap, kp = out.app_position, out.ask_position
    places.append(f"app {app.app_id} ({app.state}) is {ordinal(ap['position'] or 0)} of {ap['of']} in {out.queue}")
    places.append(f"the ask is {ordinal(kp['position'])} of {kp['of']} in its app")
    return text + " Order: " + ", ".join(places) + "."
