"""Explain gang scheduling: why a job waits for its gang, and why a placeholder was released.

``gang_block`` is the pending explanation's reason for a real ask of a task group that still has
placeholders left to replace (the walk leaves it to the replacement step), and ``gang_note``
says where a gang stands (its placeholders allocated against its total, its timeout).
``explain_placeholder_release`` answers ``replay explain --revoked APP/ASK`` for a placeholder
ended by a replacement or a timeout (and for a failed app's allocation), from the output log.
"""

from __future__ import annotations

from typing import Any

from events.codec import decode_output
from events.models import AllocationDecided, AllocationRevoked, AppStateChanged, AskReleased, OutputEvent
from events.times import format_time
from replay.explain.format import Blocker, fmt_res
from replay.reader import LogSource
from scheduler.core.gang import can_replace
from scheduler.core.objects import App, Ask

RULE_GANG = "docs/semantics.md#gang-scheduling"
GANG_REVOKED = ("placeholder-replaced", "placeholder-timeout", "app-failed")


def gang_block(app: App, ask: Ask) -> Blocker | None:
    """A real ask of a task group with placeholders left to replace: it waits for the replacement."""
    gang = app.gang
    if gang is None or not can_replace(gang, ask):
        return None
    group = gang.groups[ask.task_group]
    held = sorted((a for a in app.allocations.values() if a.placeholder and a.task_group == ask.task_group),
                  key=lambda a: a.seq)
    left = group.count - group.replaced - group.timed_out
    if not held:
        where = "none of them is allocated yet (the gang is still waiting for room)"
    elif not any(all(ph.resources.get(n, 0) >= q for n, q in ask.resources.items()) for ph in held):
        where = (f"{len(held)} allocated, none as large as this ask ({fmt_res(held[0].resources)}): "
                 "it waits for its app's placeholder timeout")
    else:
        where = (f"{len(held)} allocated ({', '.join(f'{ph.ask_id} on {ph.node_id}' for ph in held[:5])}): "
                 "the next replacement step swaps it for one of them")
    return Blocker(RULE_GANG, f"it is a real ask of task group {ask.task_group!r}, which has {left} placeholder(s) "
                              f"left to replace — {where}; the walk does not place it")


def gang_note(app: App, ask: Ask) -> str | None:
    """Where the ask's gang stands: placeholders allocated against the total, the timeout."""
    gang = app.gang
    if gang is None:
        return None
    style = "Hard: the app fails" if gang.hard else "Soft: the app resumes and gives up its pending asks"
    timer = (f"its placeholders time out at {format_time(gang.timer_us)} ({style} if still Accepted)"
             if gang.timer_us is not None else
             f"its placeholder timeout ({gang.timeout_us // 1_000_000} s) starts with its first placeholder")
    kind = f"a placeholder of task group {ask.task_group!r}" if ask.placeholder else "an ask of the app"
    return (f"This is {kind} of a gang: {fmt_res(gang.placeholders)} of its placeholder total "
            f"{fmt_res(gang.placeholder_ask)} is allocated; {timer} [{RULE_GANG}].")


def explain_placeholder_release(source: LogSource, app_id: str, ask_id: str) -> dict[str, Any] | None:
    """Why placeholder ``app_id/ask_id`` was released (replaced, timed out) or a failed app's
    allocation revoked, from the output log alone; None when the log has no such revocation."""
    revoked: AllocationRevoked | None = None
    placeholder = True  # the revoked allocation's decision said so (a log cut before it: assumed)
    cycle = -1
    current: list[OutputEvent] = []  # the outputs of the cycle being read, so far
    for rec in source.iter_outputs():
        event = decode_output(rec.value)
        number = int(event.id.split("-", 1)[0])
        if number != cycle:
            if revoked is not None:
                break
            cycle, current = number, []
        current.append(event)
        d = event.data
        if revoked is None and isinstance(d, AllocationDecided) and (d.app_id, d.ask_id) == (app_id, ask_id):
            placeholder = bool(getattr(d, "placeholder", False))
        if revoked is None and isinstance(d, AllocationRevoked) and d.reason in GANG_REVOKED \
                and (d.app_id, d.ask_id) == (app_id, ask_id):
            revoked = d
    if revoked is None:
        return None
    report: dict[str, Any] = {
        "type": "gang_revocation", "app_id": app_id, "ask_id": ask_id, "reason": revoked.reason,
        "node_id": revoked.node_id, "decision_id": revoked.decision_id, "cycle": cycle, "time": current[0].time,
        "rule": RULE_GANG, "replaced_by": None, "released_asks": [], "states": []}
    if revoked.reason == "placeholder-timeout" and not placeholder:
        report["real_allocation"] = True  # yunikorn-1.9's timeout revokes real allocations too
    for d2 in (e.data for e in current):
        if isinstance(d2, AllocationDecided) and getattr(d2, "replaced_ask_id", None) == ask_id and d2.app_id == app_id:
            report["replaced_by"] = {"ask_id": d2.ask_id, "decision_id": d2.decision_id, "node_id": d2.node_id,
                                     "resources": d2.resources}
        elif isinstance(d2, AskReleased) and d2.app_id == app_id:
            report["released_asks"].append(d2.ask_id)
        elif isinstance(d2, AppStateChanged) and d2.app_id == app_id:
            report["states"].append(f"{d2.from_} → {d2.to}")
    report["summary"] = _summary(report)
    return report


def _summary(r: dict[str, Any]) -> str:
    head = f"Allocation {r['app_id']}/{r['ask_id']} ({r['decision_id']}, on {r['node_id']}) ended in cycle {r['cycle']}"
    moves = f" The app moved {', then '.join(r['states'])}." if r["states"] else ""
    if r["reason"] == "placeholder-replaced":
        by = r["replaced_by"]
        if by is None:  # a log cut after the revocation
            return f"{head}: it was a placeholder, replaced by a real ask of its task group [{RULE_GANG}].{moves}"
        return (f"{head}: it was a placeholder, replaced by the real ask {by['ask_id']} of its task group "
                f"({by['decision_id']}, {fmt_res(by['resources'])}) on the same node, in the replacement step "
                f"that runs before the walk [{RULE_GANG}].{moves}")
    if r["reason"] == "placeholder-timeout" and r.get("real_allocation"):
        return (f"{head}: its app's placeholder timeout fired (at {r['time']}, the first cycle at or after it) "
                "before the gang started, and under the rules profile yunikorn-1.9 that releases every allocation "
                "of the app, real ones too (yunikorn-core 1.9 timeoutPlaceholderProcessing; "
                f"docs/semantics.md#yunikorn-19) [{RULE_GANG}].{moves}")
    if r["reason"] == "placeholder-timeout":
        gave_up = (f" Its pending asks were given up too ({', '.join(r['released_asks'])}): the gang had not "
                   "started when the timeout fired." if r["released_asks"] else "")
        return (f"{head}: it was a placeholder not replaced before its app's placeholder timeout fired (at "
                f"{r['time']}, the first cycle at or after it); the app's placeholders are released at the timeout "
                f"[{RULE_GANG}].{gave_up}{moves}")
    return (f"{head}: its app failed — a Hard gang whose placeholders timed out before the gang started; the "
            f"app's real allocations are revoked as it leaves [{RULE_GANG}].{moves}")


def render_gang_revocation(r: dict[str, Any]) -> str:
    """A gang revocation's explanation as text."""
    return str(r["summary"]) + "\n"
