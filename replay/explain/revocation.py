"""Explain a revocation: why a victim was preempted, re-derived from the log.

``explain_revocation_from_log`` finds the ``allocation.revoked`` (reason ``preempted``) of a
victim, re-derives the state just before that preemption step (``replay.rederive`` through
the cycle before, then the cycle's own steps with the core's ``next_step``/``commit_step``) and
reports on it with ``replay.explain.preemption.preemption_report``: the preemptor, the fence,
the guarantees checked, every node tried and why the chosen one won. The victims
re-derived there are checked against the core's step.
"""

from __future__ import annotations

from typing import Any

from events.codec import decode_output
from events.models import AllocationRevoked, OutputData
from events.times import parse_time
from replay.explain.decision import CycleBatch, ExplainError
from replay.explain.preemption import preemption_report
from replay.find_cycle import find_cycle
from replay.reader import LogSource, channel_order
from replay.rederive import Rederiver, StartPoint
from scheduler.core.cycle import begin_cycle, cycle_steps
from scheduler.core.engine import Engine
from scheduler.core.logged_cycle import apply_batch


def _revocation(source: LogSource, app_id: str, ask_id: str) -> tuple[int, AllocationRevoked]:
    for rec in source.iter_outputs():
        if b"allocation.revoked" not in rec.value or b"preempted" not in rec.value:
            continue
        event = decode_output(rec.value)
        d = event.data
        if isinstance(d, AllocationRevoked) and d.reason == "preempted" and (d.app_id, d.ask_id) == (app_id, ask_id):
            return int(event.id.split("-", 1)[0]), d
        if isinstance(d, AllocationRevoked) and d.reason == "quota-preempted" and (d.app_id, d.ask_id) == (
                app_id, ask_id):
            raise ExplainError(
                f"{app_id}/{ask_id} was quota-preempted in cycle {event.id.split('-', 1)[0]}: yunikorn-1.9's quota "
                "preemption (YUNIKORN-3193) took it because its queue stayed over a lowered max past its "
                "quota.preemption.delay; there is no preemptor to explain (docs/semantics.md#yunikorn-19)")
    raise ExplainError(f"the log has no preemption of {app_id}/{ask_id}")


def explain_revocation_from_log(source: LogSource, app_id: str, ask_id: str,
                                start: StartPoint | None = None) -> dict[str, Any]:
    """Why victim ``app_id/ask_id`` was preempted (see the module docstring)."""
    number, revoked = _revocation(source, app_id, ask_id)
    cycle = find_cycle(source, number)
    if cycle is None:
        raise ExplainError(f"the log has no cycle {number}")
    rederiver = Rederiver(source, start=start, through_cycle=number - 1)
    for _ in rederiver.steps():
        pass
    started = cycle.started
    records = rederiver.cursor.take(started.inputs_from, started.inputs_through)
    engine = rederiver.engine or Engine()
    batch = CycleBatch(number, parse_time(started.time), started.inputs_from, started.inputs_through, records,
                       channel_order(source, set(started.inputs_through) | set(started.inputs_from)))
    apply_batch(engine, batch.records, batch.channel_order, admin_channels=batch.admin_channels)
    state = engine.state
    out: list[OutputData] = []
    for part, _, found, _ in cycle_steps(state, batch.now_us, begin_cycle(state, batch.now_us, out), out):
        if any((v.app_id, v.ask_id) == (app_id, ask_id) for v in found.victims):
            report = preemption_report(part, found.app, found.ask)
            report["cycle"] = number
            report["revoked"] = revoked.model_dump()
            same = [(v["app_id"], v["ask_id"]) for v in report["victims"]] == [
                (v.app_id, v.ask_id) for v in found.victims]
            report["summary"] = _summary(report, app_id, ask_id, same)
            return report
    raise ExplainError(f"cycle {number} does not re-derive the preemption of {app_id}/{ask_id}")


def _summary(report: dict[str, Any], app_id: str, ask_id: str, same: bool) -> str:
    pre = report["preemptor"]
    guarantees = "; ".join(
        f"{q['queue']} guarantees {q['guaranteed'] or 'nothing'} and has {q['allocated']} allocated"
        + (" (within its guarantee)" if q["within_guarantee"] else "")
        for q in report["queues"] if q["role"] != "ancestor")
    text = (f"{app_id}/{ask_id} was preempted in cycle {report['cycle']} for {pre['app_id']}/{pre['ask_id']} "
            f"(queue {pre['queue']}, priority {pre['priority']}). Fence: {report['fence']} — {report['fence_reason']}. "
            f"Guarantees checked: {guarantees}. Node {report['node']} won: {report.get('why_node', '')}. "
            f"Victims: {', '.join(v['app_id'] + '/' + v['ask_id'] for v in report['victims'])} [{report['rule']}]")
    if not same:
        text = "WARNING: the re-derived victims differ from the core's step. " + text
    return text
