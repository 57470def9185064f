"""Explain preemption: the report of one attempt, and what a pending ask that may preempt would find.

``preemption_report`` runs the core's own ``try_preemption`` read-only on a state and turns
its ``Outcome`` into a report: the preemptor, the preemption fence (and where it comes
from), every queue whose guarantee was checked (effective guarantee, allocated, already
preempting, above or within), every node tried with its victims in order and start index,
and why the chosen node won (lowest start index = fewest victims, then node id).

``replay.explain.revocation`` uses it for a victim found in the log. A partition under the
yunikorn-1.9 profile is reported from ``scheduler.core.preemption_19``'s attempt: each queue
with its remaining guarantee, the fence's cause (policy, root or max), and the rule that took
or kept each candidate the chosen node and the additional pass looked at (``victim_rules``).
"""

from __future__ import annotations

from typing import Any

from scheduler.config.profiles import RulesProfile
from scheduler.core import preemption_19 as v19
from scheduler.core.cycle import fits_queue_headroom
from scheduler.core.objects import Allocation, App, Ask
from scheduler.core.partition import PartitionState
from scheduler.core.preemption import NodeTry, Outcome, try_preemption
from scheduler.core.preemption_queues_19 import none_negative

RULE = "docs/semantics.md#preemption"
RULE_19 = "docs/semantics.md#yunikorn-19"
_WHY = {
    "guarantee": "no set of eligible victims brings the ask's queue within its guarantee",
    "no-node": "no node can be made to fit the ask without pushing a victim's queue below its guarantee",
    "additional": "after the best node's victims the ask's queue would still be outside its guarantee",
    "no-victims": "nothing would have to be preempted",
    "shortfall": "the victims on the chosen node do not add up to the ask (v1.9.0 TryPreemption)",
}
_WHY_19 = {
    **_WHY,
    "guarantee": "the ask's queue cannot get under its guarantee in the ask's resource types, whatever is "
                 "preempted (v1.9.0 checkPreemptionQueueGuarantees)",
    "no-node": "no node can be made to fit the ask: no usable candidate, or the ask's queue has no room for "
               "one (v1.9.0 calculateVictimsByNode)",
    "additional": "the additional victims leave the ask's queue over its guarantee in a type the ask needs "
                  "(v1.9.0 calculateAdditionalVictims)",
}
# The rule behind each verdict of ``scheduler.core.preemption_19``'s trace.
_VERDICTS = {
    v19.TAKEN: "taken: its queue's remaining guarantee (ancestors included) is below zero in a type the ask "
               "needs, or it has none, and the ask's queue has room for it (YUNIKORN-3113, 3240, 2769)",
    v19.TAKEN_LAST: "usable, but it does not shrink the ask's shortfall on the node: tried last",
    v19.KEPT_GUARANTEE: "kept: its queue's remaining guarantee (ancestors included) is not below zero in any "
                        "type the ask needs (YUNIKORN-3113, 3240)",
    v19.KEPT_ASK_QUEUE: "kept, and the list ends here: the ask's queue's remaining guarantee cannot hold it "
                        "(v1.9.0 calculateVictimsByNode/calculateAdditionalVictims)",
    v19.KEPT_NO_CHANGE: "kept: taking it would not change the ask's queue's remaining guarantee",
    v19.NOT_REACHED: "not reached: an earlier candidate ended the list",
}


def _victim(a: Allocation, queue: str) -> dict[str, Any]:
    return {"app_id": a.app_id, "ask_id": a.ask_id, "node_id": a.node_id, "decision_id": a.decision_id,
            "queue": queue, "priority": a.priority, "resources": dict(a.resources),
            "allow_preemption": a.allow_preemption}


def _fence_reason(part: PartitionState, leaf: str, fence: str) -> str:
    if part.queues[fence].preemption_policy == "fence":
        return f"{fence} has preemption.policy: fence, so {leaf}'s asks take only from inside it"
    return f"no queue from {leaf} up has preemption.policy: fence, so the fence is root"


def _fence_reason_19(part: PartitionState, leaf: str, fence: str, fence_by: str) -> str:
    if fence_by == "max":
        return (f"{fence}'s usage plus the ask would exceed its max, so {leaf}'s asks take only from inside it "
                "(YUNIKORN-3241)")
    return _fence_reason(part, leaf, fence)


def _why_node(tried: list[NodeTry]) -> str:
    if len(tried) > 1:
        runner = tried[1]
        return (f"{tried[0].node_id} needs {tried[0].start_index + 1} victim(s) (start index "
                f"{tried[0].start_index}); next best {runner.node_id} needs {runner.start_index + 1}"
                + (", a tie broken by node id" if runner.start_index == tried[0].start_index else ""))
    return f"{tried[0].node_id} is the only node where preemption makes the ask fit"


def _preemptor(app: App, ask: Ask) -> dict[str, Any]:
    """The report's ``preemptor`` entry: the ask that tried to preempt."""
    return {"app_id": app.app_id, "ask_id": ask.ask_id, "queue": app.queue.path, "priority": ask.priority,
            "resources": dict(ask.resources)}


def _concluded(report: dict[str, Any], failed: str | None, tried: list[NodeTry]) -> dict[str, Any]:
    """The report with why the attempt failed (``failed``) or, when it found a node, why that node."""
    if failed is not None:
        report["failed"] = failed
    else:
        report["why_node"] = _why_node(tried)
    return report


def preemption_report_19(part: PartitionState, app: App, ask: Ask, now_us: int | None = None) -> dict[str, Any]:
    """The report of one attempt under the yunikorn-1.9 profile (re-run read-only, traced); at log
    time ``now_us``, the reservations it would cancel first (YUNIKORN-3092) are listed."""
    outcome = v19.try_preemption_19(part, app, ask, fits_queue_headroom(part, app.queue, ask.resources),
                                    exhaustive=True, explain=True, now_us=now_us)
    queue_of = {id(v): path for path, snap in outcome.queues.items() for v in snap.victims}
    queues = []
    for path, snap in outcome.queues.items():
        remaining = snap.remaining()
        within = remaining is not None and none_negative(remaining)
        queues.append({
            "queue": path, "guaranteed": snap.get_guaranteed(), "allocated": dict(snap.allocated),
            "preempting": dict(snap.preempting), "remaining_guarantee": remaining,
            "candidate_victims": len(snap.victims), "within_guarantee": within, "at_or_above_guarantee": not within,
            "role": "preemptor" if path == app.queue.path else ("victims" if snap.victims else "ancestor"),
        })
    tried = sorted(outcome.tried, key=lambda t: (t.start_index, t.node_id))
    chosen_node = outcome.node.node_id if outcome.node is not None else None
    nodes = [{"node_id": t.node_id, "start_index": t.start_index, "victims_needed": t.start_index + 1,
              "victims": [f"{v.app_id}/{v.ask_id}" for v in t.victims], "chosen": t.node_id == chosen_node}
             for t in tried]
    final = {id(v) for v in outcome.victims}
    rules = [{"stage": stage, "victim": f"{app_id}/{ask_id}", "verdict": verdict, "rule": _VERDICTS[verdict]}
             for stage, app_id, ask_id, verdict in outcome.trace]
    rules += [{"stage": "final", "victim": f"{v.app_id}/{v.ask_id}", "verdict": "dropped",
               "rule": "dropped: not on the chosen node, or the ask was already covered (v1.9.0 TryPreemption)"}
              for v in outcome.collected if id(v) not in final]
    on_node = {id(v) for t in tried if t.node_id == chosen_node for v in t.victims[: t.start_index + 1]}
    report: dict[str, Any] = {
        "profile": RulesProfile.YUNIKORN_1_9.value,
        "preemptor": _preemptor(app, ask),
        "fence": outcome.fence, "fence_by": outcome.fence_by,
        "fence_reason": _fence_reason_19(part, app.queue.path, outcome.fence, outcome.fence_by),
        "queues": queues, "nodes_tried": nodes, "node": chosen_node,
        "victims": [_victim(v, queue_of.get(id(v), "")) for v in outcome.victims],
        "additional_victims": [f"{v.app_id}/{v.ask_id}" for v in outcome.victims if id(v) not in on_node],
        "victim_rules": rules,
        "rule": RULE_19,
    }
    if outcome.cancelled:  # over an hour old and of lower priority: the attempt ends them first
        report["cancels_reservations"] = [f"{held_app.app_id}/{held.ask_id} on {held.reserved_node}"
                                          for held_app, held in outcome.cancelled]
    failed = _WHY_19.get(outcome.reason, outcome.reason) if outcome.node is None else None
    return _concluded(report, failed, tried)


def preemption_report(part: PartitionState, app: App, ask: Ask, outcome: Outcome | None = None,
                      now_us: int | None = None) -> dict[str, Any]:
    """The report of one attempt (``outcome`` as the core found it; re-run read-only when None; at
    log time ``now_us`` under yunikorn-1.9, with the reservations it would cancel)."""
    if part.profile is RulesProfile.YUNIKORN_1_9:
        return preemption_report_19(part, app, ask, now_us)
    if outcome is None:
        outcome = try_preemption(part, app, ask, fits_queue_headroom(part, app.queue, ask.resources), exhaustive=True)
    queue_of = {id(v): path for path, snap in outcome.queues.items() for v in snap.victims}
    queues = []
    for path, snap in outcome.queues.items():
        queues.append({
            "queue": path, "guaranteed": snap.get_guaranteed(), "allocated": dict(snap.allocated),
            "preempting": dict(snap.preempting), "candidate_victims": len(snap.victims),
            "within_guarantee": snap.within_guaranteed(), "at_or_above_guarantee": snap.at_or_above_guaranteed(),
            "role": "preemptor" if path == app.queue.path else ("victims" if snap.victims else "ancestor"),
        })
    tried = sorted(outcome.tried, key=lambda t: (t.start_index, t.node_id))
    nodes = [{"node_id": t.node_id, "start_index": t.start_index, "victims_needed": t.start_index + 1,
              "victims": [f"{v.app_id}/{v.ask_id}" for v in t.victims],
              "chosen": outcome.node is not None and t.node_id == outcome.node.node_id} for t in tried]
    chosen_try = tried[0] if tried and outcome.node is not None else None
    on_node = chosen_try.victims[: chosen_try.start_index + 1] if chosen_try else []
    report: dict[str, Any] = {
        "preemptor": _preemptor(app, ask),
        "fence": outcome.fence, "fence_reason": _fence_reason(part, app.queue.path, outcome.fence),
        "queues": queues, "nodes_tried": nodes,
        "node": outcome.node.node_id if outcome.node is not None else None,
        "victims": [_victim(v, queue_of.get(id(v), "")) for v in outcome.victims],
        "additional_victims": [f"{v.app_id}/{v.ask_id}" for v in outcome.victims[len(on_node):]],
        "rule": RULE,
    }
    failed = _WHY.get(outcome.reason, outcome.reason) if outcome.node is None else None
    return _concluded(report, failed, tried)


def pending_preemption(part: PartitionState, app: App, ask: Ask, now_us: int | None) -> dict[str, Any] | None:
    """For a pending ask that may preempt: its preconditions and what an attempt would find now."""
    if not ask.preempt_other:
        return None
    due = ask.created_us + app.queue.preemption_delay_us
    report: dict[str, Any] = {"triggered": ask.preempt_triggered, "delay_us": app.queue.preemption_delay_us,
                              "eligible_from_us": due, "delay_passed": now_us is not None and now_us >= due}
    if not ask.preempt_triggered and ask.required_node is None:
        report["attempt"] = preemption_report(part, app, ask, now_us=now_us)
    return report
