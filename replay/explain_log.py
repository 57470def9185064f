"""Explain from a log: split outputs into cycles, re-derive the cycles before one, then explain.

A minimal re-derivation loop (``run_logged_cycle`` per logged cycle, from the built-in
default config) over records the caller has read — no I/O here. A cycle whose outputs
were written twice (re-run after a crash) counts once: its later ``cycle.started`` wins.
Each re-derived cycle's ``state_digest`` is compared with the log's; a mismatch becomes a
note (and the explanation's checks will then likely warn too).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from events.codec import decode_input, decode_output, parse_time
from events.log.port import LogRecord
from events.models import AllocationDecided, AskAdded, CycleCompleted, CycleStarted, InputEvent, OutputEvent
from replay.explain import CycleBatch, ExplainError, Explanation, explain_decision, parse_decision_id
from replay.explain_pending import PendingExplanation, explain_pending
from scheduler.core.engine import Engine
from scheduler.cycle_runner import run_logged_cycle


@dataclass
class LoggedCycle:
    """One cycle as the output log records it."""

    started: CycleStarted
    outputs: list[OutputEvent] = field(default_factory=list)
    completed: CycleCompleted | None = None

    @property
    def number(self) -> int:
        """The cycle number."""
        return self.started.cycle

    def decisions(self) -> list[AllocationDecided]:
        """Its ``allocation.decided`` records, in order."""
        return [o.data for o in self.outputs if isinstance(o.data, AllocationDecided)]


def read_cycles(outputs: Iterable[LogRecord]) -> dict[int, LoggedCycle]:
    """Cycles by number from output records (unreadable records and strays are skipped)."""
    cycles: dict[int, LoggedCycle] = {}
    current: LoggedCycle | None = None
    for rec in outputs:
        try:
            event = decode_output(rec.value)
        except (ValueError, KeyError):
            continue
        data = event.data
        if isinstance(data, CycleStarted):
            current = cycles[data.cycle] = LoggedCycle(data)
        elif current is not None:
            if isinstance(data, CycleCompleted):
                current.completed = data
                current = None
            else:
                current.outputs.append(event)
    return cycles


class InputIndex:
    """Input records by channel and offset, for slicing a cycle's batch out."""

    def __init__(self, records: Iterable[LogRecord]) -> None:
        self.by_channel: dict[str, dict[int, LogRecord]] = {}
        for rec in records:
            self.by_channel.setdefault(rec.channel, {})[rec.offset] = rec

    def between(self, start: Mapping[str, int], end: Mapping[str, int]) -> list[LogRecord]:
        """Records with ``start[ch] <= offset < end[ch]`` (a missing start is 0)."""
        out = []
        for ch, stop in end.items():
            recs = self.by_channel.get(ch, {})
            out.extend(recs[o] for o in range(start.get(ch, 0), stop) if o in recs)
        return out


def _batch(c: LoggedCycle, inputs: InputIndex, channel_order: Sequence[str]) -> CycleBatch:
    s = c.started
    return CycleBatch(
        s.cycle, parse_time(s.time), s.inputs_from, s.inputs_through,
        inputs.between(s.inputs_from, s.inputs_through), tuple(channel_order),
    )


def rederive(
    cycles: Mapping[int, LoggedCycle], inputs: InputIndex, through: int, channel_order: Sequence[str] = ("inputs",)
) -> tuple[Engine, list[str]]:
    """An engine after cycle ``through``, re-derived from cycle 1; notes on digest mismatches."""
    engine = Engine()
    notes: list[str] = []
    for k in range(1, through + 1):
        c = cycles.get(k)
        if c is None:
            raise ExplainError(f"the output log has no cycle {k}: cannot re-derive cycle {through}")
        b = _batch(c, inputs, channel_order)
        outs = run_logged_cycle(engine, b.records, b.channel_order, b.now_us, b.inputs_from, b.inputs_through)
        done = outs[-1].data
        if c.completed is not None and isinstance(done, CycleCompleted) and done.state_digest != c.completed.state_digest:
            notes.append(f"re-derived state after cycle {k} differs from the log's state_digest")
    return engine, notes


def explain_from_log(
    outputs: Iterable[LogRecord],
    inputs: Iterable[LogRecord],
    decision_id: str,
    channel_order: Sequence[str] = ("inputs",),
) -> Explanation:
    """Explain a logged decision; ``ExplainError`` when the log has no such decision."""
    _, cycle, _ = parse_decision_id(decision_id)
    cycles = read_cycles(outputs)
    c = cycles.get(cycle)
    if c is None:
        raise ExplainError(f"unknown decision {decision_id}: the log has no cycle {cycle}")
    recorded = next((d for d in c.decisions() if d.decision_id == decision_id), None)
    if recorded is None:
        ids = [d.decision_id for d in c.decisions()]
        listed = ", ".join(ids[:5]) + (" …" if len(ids) > 5 else "") if ids else "none"
        raise ExplainError(f"unknown decision {decision_id}: cycle {cycle} recorded decisions {listed}")
    index = InputIndex(inputs)
    engine, notes = rederive(cycles, index, cycle - 1, channel_order)
    explanation = explain_decision(engine, _batch(c, index, channel_order), decision_id, recorded)
    explanation.notes.extend(notes)
    return explanation


def explain_ask_from_log(
    outputs: Iterable[LogRecord],
    inputs: Iterable[LogRecord],
    app_id: str,
    ask_id: str,
    channel_order: Sequence[str] = ("inputs",),
) -> PendingExplanation:
    """Explain an ask against the state after the last completed cycle of the log."""
    cycles = read_cycles(outputs)
    last = 0
    while last + 1 in cycles and cycles[last + 1].completed is not None:
        last += 1
    index = InputIndex(inputs)
    engine, _ = rederive(cycles, index, last, channel_order)
    out = explain_pending(engine, app_id, ask_id)
    if out.status in ("unknown-app", "unknown-ask") and last:
        consumed = cycles[last].started.inputs_through
        later = _later_ask(index, consumed, app_id, ask_id)
        if later is not None:
            out.summary += f"; its ask.added is at {later}, after the last cycle's inputs: the next cycle will see it"
    return out


def _later_ask(index: InputIndex, consumed: Mapping[str, int], app_id: str, ask_id: str) -> str | None:
    for ch, recs in index.by_channel.items():
        for offset in sorted(o for o in recs if o >= consumed.get(ch, 0)):
            rec = recs[offset]
            event = decode_input(rec.value, append_time_us=rec.append_time_us, position=rec.position)
            if isinstance(event, InputEvent) and isinstance(event.data, AskAdded):
                if event.data.app_id == app_id and event.data.ask_id == ask_id:
                    return rec.position
    return None
