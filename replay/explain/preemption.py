"""Explain preemption: the report of one attempt, and what a pending ask that may preempt would find.

``preemption_report`` runs the core's own ``try_preemption`` read-only on a state and turns
its ``Outcome`` into a report: the preemptor, the preemption fence (and where it comes
from), every queue whose guarantee was checked (effective guarantee, allocated, already
preempting, above or within), every node tried with its victims in order and start index,
and why the chosen node won (lowest start index = fewest victims, then node id).

``replay.explain.revocation`` uses it for a victim found in the log.
"""

from __future__ import annotations

from typing import Any

from scheduler.core.cycle import fits_queue_headroom
from scheduler.core.objects import Allocation, App, Ask
from scheduler.core.partition import PartitionState
from scheduler.core.preemption import Outcome, try_preemption

RULE = "docs/semantics.md#preemption"
_WHY = {
    "guarantee": "no set of eligible victims brings the ask's queue within its guarantee",
    "no-node": "no node can be made to fit the ask without pushing a victim's queue below its guarantee",
    "additional": "after the best node's victims the ask's queue would still be outside its guarantee",
    "no-victims": "nothing would have to be preempted",
}


def _victim(a: Allocation, queue: str) -> dict[str, Any]:
    return {"app_id": a.app_id, "ask_id": a.ask_id, "node_id": a.node_id, "decision_id": a.decision_id,
            "queue": queue, "priority": a.priority, "resources": dict(a.resources),
            "allow_preemption": a.allow_preemption}


def _fence_reason(part: PartitionState, leaf: str, fence: str) -> str:
    if part.queues[fence].preemption_policy == "fence":
        return f"{fence} has preemption.policy: fence, so {leaf}'s asks take only from inside it"
    return f"no queue from {leaf} up has preemption.policy: fence, so the fence is root"


def preemption_report(part: PartitionState, app: App, ask: Ask, outcome: Outcome | None = None) -> dict[str, Any]:
    """The report of one attempt (``outcome`` as the core found it; re-run read-only when None)."""
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
        "preemptor": {"app_id": app.app_id, "ask_id": ask.ask_id, "queue": app.queue.path, "priority": ask.priority,
                      "resources": dict(ask.resources)},
        "fence": outcome.fence, "fence_reason": _fence_reason(part, app.queue.path, outcome.fence),
        "queues": queues, "nodes_tried": nodes,
        "node": outcome.node.node_id if outcome.node is not None else None,
        "victims": [_victim(v, queue_of.get(id(v), "")) for v in outcome.victims],
        "additional_victims": [f"{v.app_id}/{v.ask_id}" for v in outcome.victims[len(on_node):]],
        "rule": RULE,
    }
    if outcome.node is None:
        report["failed"] = _WHY.get(outcome.reason, outcome.reason)
    elif len(tried) > 1:
        runner = tried[1]
        report["why_node"] = (f"{tried[0].node_id} needs {tried[0].start_index + 1} victim(s) (start index "
                              f"{tried[0].start_index}); next best {runner.node_id} needs {runner.start_index + 1}"
                              + (", a tie broken by node id" if runner.start_index == tried[0].start_index else ""))
    else:
        report["why_node"] = f"{tried[0].node_id} is the only node where preemption makes the ask fit"
    return report


def pending_preemption(part: PartitionState, app: App, ask: Ask, now_us: int | None) -> dict[str, Any] | None:
    """For a pending ask that may preempt: its preconditions and what an attempt would find now."""
    if not ask.preempt_other:
        return None
    due = ask.created_us + app.queue.preemption_delay_us
    report: dict[str, Any] = {"triggered": ask.preempt_triggered, "delay_us": app.queue.preemption_delay_us,
                              "eligible_from_us": due, "delay_passed": now_us is not None and now_us >= due}
    if not ask.preempt_triggered and ask.required_node is None:
        report["attempt"] = preemption_report(part, app, ask)
    return report
