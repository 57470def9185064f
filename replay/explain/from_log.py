"""Explain from a log: re-derive the cycles before a decision with ``replay.rederive``, then explain it.

``explain_from_log(source, decision_id)`` finds the decision's recorded cycle (bisecting
the output log: ``replay.find_cycle``), runs ``Rederiver`` through the cycle before it (the
service's own ``run_logged_cycle``, from the built-in default config or from a
``StartPoint`` restored from a snapshot at or before that cycle), takes that cycle's
inputs from the rederiver's input cursor and hands everything to
``replay.explain.decision.explain_decision``. Each re-derived cycle's ``state_digest`` is compared
with the recorded one; a mismatch becomes a note. ``explain_ask_from_log`` re-derives
every recorded cycle (after the start point) and explains a pending ask.
No I/O of its own: ``source`` is anything with ``iter_inputs``/``iter_outputs``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from events.codec import decode_input, decode_output
from events.models import AllocationDecided, AskAdded, InputEvent
from events.times import parse_time
from replay.explain.decision import CycleBatch, ExplainError, Explanation, explain_decision, parse_decision_id
from replay.explain.pending import PendingExplanation, explain_pending
from replay.find_cycle import find_cycle
from replay.reader import InputGap, LogSource, channel_order
from replay.rederive import RederivedCycle, Rederiver, StartPoint
from scheduler.core.engine import Engine
from scheduler.core.recorded_cycles import LogStructureError, RecordedCycle
from scheduler.core.rules_version import IMPLEMENTED, RULES_VERSION


def recorded_decisions(cycle: RecordedCycle) -> list[AllocationDecided]:
    """The ``allocation.decided`` records of a recorded cycle (its last attempt), in order."""
    out = []
    for rec in cycle.records:
        try:
            data = decode_output(rec.value).data
        except (ValueError, KeyError):
            continue  # unreadable records are verify's business, not explain's
        if isinstance(data, AllocationDecided):
            out.append(data)
    return out


def _digest_note(step: RederivedCycle) -> str | None:
    logged = step.recorded.completed_data
    derived = step.state_digest()
    if logged is None or derived is None:
        return None
    if logged.get("state_digest") != derived:
        return f"re-derived state after cycle {step.number} differs from the log's state_digest"
    return None


def _find_cycle(source: LogSource, number: int) -> RecordedCycle | None:
    try:
        return find_cycle(source, number)
    except LogStructureError as exc:
        raise ExplainError(f"the output log is malformed: {exc.message}") from None


StartFor = Callable[[int], StartPoint | None]


def explain_from_log(source: LogSource, decision_id: str, start: StartPoint | StartFor | None = None) -> Explanation:
    """Explain a logged decision; ``ExplainError`` when the log has no such decision.

    ``start`` (e.g. a snapshot) must hold a cycle before the decision's; re-derivation
    then begins after it. It may be a function of the last cycle to re-derive, called
    once the decision is found in the log (so an unknown id costs no snapshot restore).
    """
    _, number, _ = parse_decision_id(decision_id)
    cycle = _find_cycle(source, number)
    if cycle is None:
        raise ExplainError(f"unknown decision {decision_id}: the log has no cycle {number}")
    decisions = recorded_decisions(cycle)
    recorded = next((d for d in decisions if d.decision_id == decision_id), None)
    if recorded is None:
        ids = [d.decision_id for d in decisions]
        listed = (", ".join(ids[:5]) + (" …" if len(ids) > 5 else "")) if ids else "none"
        raise ExplainError(f"unknown decision {decision_id}: cycle {number} recorded decisions: {listed}")
    if callable(start):
        start = start(number - 1)
    if start is not None and start.engine.cycle_number >= number:
        raise ExplainError(f"the start point holds cycle {start.engine.cycle_number}, not one before {number}")
    rederiver = Rederiver(source, start=start, through_cycle=number - 1)
    notes = []
    try:
        for step in rederiver.steps():
            note = _digest_note(step)
            if note:
                notes.append(note)
        started = cycle.started
        records = rederiver.cursor.take(started.inputs_from, started.inputs_through)
    except LogStructureError as exc:
        raise ExplainError(f"cannot re-derive cycle {number}: {exc.message}") from None
    except InputGap as exc:
        raise ExplainError(f"cannot re-derive cycle {number}: {exc}") from None
    engine = rederiver.engine or Engine()
    batch = CycleBatch(
        number, parse_time(started.time), started.inputs_from, started.inputs_through, records,
        channel_order(source, set(started.inputs_through) | set(started.inputs_from)), started.admin_channels,
    )
    explanation = explain_decision(engine, batch, decision_id, recorded)
    if started.rules_version not in IMPLEMENTED:
        notes.append(f"cycle {number} was decided under rules version {started.rules_version}; this build walks"
                     f" rules version {RULES_VERSION}, so the walk shown may not be the one that decided")
    explanation.notes.extend(notes)
    return explanation


def explain_ask_from_log(
    source: LogSource, app_id: str, ask_id: str, start: StartPoint | None = None
) -> PendingExplanation:
    """Explain an ask against the state after the last recorded cycle of the log."""
    rederiver = Rederiver(source, start=start)
    try:
        for _ in rederiver.steps():
            pass
    except LogStructureError as exc:
        raise ExplainError(f"cannot re-derive the log: {exc.message}") from None
    out = explain_pending(rederiver.engine or Engine(), app_id, ask_id)
    if out.status in ("unknown-app", "unknown-ask"):
        later = _later_ask(source, rederiver.cursor.positions, app_id, ask_id)
        if later is not None:
            out.summary += f"; its ask.added is at {later}, after the last cycle's inputs: the next cycle will see it"
    return out


def _later_ask(source: LogSource, consumed: Mapping[str, int], app_id: str, ask_id: str) -> str | None:
    for rec in source.iter_inputs(dict(consumed)):
        event = decode_input(rec.value, append_time_us=rec.append_time_us, position=rec.position)
        data = event.data if isinstance(event, InputEvent) else None
        if isinstance(data, AskAdded) and data.app_id == app_id and data.ask_id == ask_id:
            return rec.position
    return None
