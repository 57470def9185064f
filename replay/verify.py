"""Verify: re-derive every recorded cycle and compare every output byte for byte.

Each re-derived output is encoded canonically (``events.codec.encode_output``) and
compared with the recorded record's bytes, ``cycle.started`` and ``cycle.completed``
(with its ``state_digest``) included. The first difference stops the walk and is
returned as a ``Divergence`` with its coordinates. A trailing cycle that has a
``cycle.started`` but no ``cycle.completed`` is not a divergence: the service re-runs it
on restart (its records so far must still match). An interrupted attempt followed by a
re-run of the same cycle must be a prefix of the re-run.

Rules versions: only cycles made under a rules version this build implements are
re-derived. An older (or newer) cycle cannot be, honestly: it is folded as fact (its
inputs and recorded outputs, as recovery does), its folded state must equal its recorded
``state_digest``, and its recorded outputs are checked against the audit's invariants
(``replay.audit``: pending asks, node capacity, queue max, cycle sequence, …). The report
counts, per rules version, the cycles it re-derived and those it could only check.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from events.codec import encode_output
from events.display import printable_lines
from events.log.port import LogRecord
from events.models import AllocationDecided, CycleCompleted
from replay.audit.checks import Auditor
from replay.reader import LogSource, OrderedChannels, read_range
from replay.rederive import RederivedCycle, Rederiver, StartPoint, inputs_range
from scheduler.core.recorded_cycles import LogStructureError
from scheduler.core.rules_version import RULES_VERSION

MAX_FIELD_DIFFS = 8


@dataclass(frozen=True)
class Divergence:
    """The first place where the log and its re-derivation disagree.

    ``index`` is the position in the cycle's batch: 0 is ``cycle.started``, ``i`` is the
    engine's output ``i - 1`` (envelope id ``<cycle>-<i-1>``).
    """

    reason: str
    cycle: int | None = None
    index: int | None = None
    output_offset: int | None = None
    recorded: bytes | None = None
    derived: bytes | None = None
    inputs: str = ""
    details: tuple[str, ...] = ()

    @property
    def output_id(self) -> str | None:
        """The envelope id the output at these coordinates has (or should have)."""
        if self.cycle is None or self.index is None:
            return None
        return f"{self.cycle}-start" if self.index == 0 else f"{self.cycle}-{self.index - 1}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (recorded/derived as parsed JSON when they parse, else text)."""
        return {
            "reason": self.reason,
            "cycle": self.cycle,
            "output_id": self.output_id,
            "output_offset": self.output_offset,
            "inputs": self.inputs,
            "recorded": _as_json(self.recorded),
            "rederived": _as_json(self.derived),
            "details": list(self.details),
        }

    def lines(self) -> list[str]:
        """The divergence in words, for people."""
        where = [f"cycle {self.cycle}" if self.cycle is not None else "the log"]
        if self.output_id is not None:
            where.append(f"output {self.output_id}")
        if self.output_offset is not None:
            where.append(f"output log offset {self.output_offset}")
        out = [f"DIVERGENCE at {', '.join(where)}: {self.reason}"]
        if self.inputs:
            out.append(f"  inputs of the cycle: {self.inputs}")
        if self.recorded is not None or self.derived is not None:
            out.append(f"  recorded:   {_text(self.recorded)}")
            out.append(f"  re-derived: {_text(self.derived)}")
        out.extend(f"  {line}" for line in self.details)
        return printable_lines(out)


def _as_json(raw: bytes | None) -> Any:
    if raw is None:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode("utf-8", "replace")


def _text(raw: bytes | None) -> str:
    return "(nothing)" if raw is None else raw.decode("utf-8", "replace")


def field_diffs(recorded: Any, derived: Any, path: str = "") -> list[str]:
    """``path: recorded vs re-derived`` for every leaf that differs (dicts walked, the rest whole)."""
    if isinstance(recorded, dict) and isinstance(derived, dict):
        out: list[str] = []
        for key in sorted(set(recorded) | set(derived), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in recorded:
                out.append(f"{sub}: missing in the recorded output, re-derived {_short(derived[key])}")
            elif key not in derived:
                out.append(f"{sub}: recorded {_short(recorded[key])}, missing in the re-derived output")
            else:
                out.extend(field_diffs(recorded[key], derived[key], sub))
        return out
    if recorded == derived:
        return []
    return [f"{path or 'record'}: recorded {_short(recorded)}, re-derived {_short(derived)}"]


def _short(value: Any) -> str:
    text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    return text if len(text) <= 200 else text[:197] + "..."


def verified_before(cycles: int) -> str:
    """How many cycles verified before a divergence, in words.

    >>> verified_before(0), verified_before(1), verified_before(12)
    ('(no cycle verified before it)', '(1 cycle verified before it)', '(12 cycles verified before it)')
    """
    if cycles == 0:
        return "(no cycle verified before it)"
    return f"({cycles} cycle{'' if cycles == 1 else 's'} verified before it)"


@dataclass
class VerifyReport:
    """What a verify run found."""

    cycles: int = 0
    inputs: int = 0
    outputs: int = 0
    divergence: Divergence | None = None
    incomplete_cycle: int | None = None
    rerun_cycles: list[int] = field(default_factory=list)
    unconsumed_inputs: int = 0
    rederived: Counter[int] = field(default_factory=Counter)  # rules version → cycles re-derived
    checked: Counter[int] = field(default_factory=Counter)  # rules version → cycles only checked
    # (first cycle, its rules version) and the last cycle's version: parallel ranges are joined by them
    first_rules: tuple[int, int] | None = None
    last_rules_version: int | None = None

    @property
    def ok(self) -> bool:
        """True when nothing diverged."""
        return self.divergence is None

    def summary_lines(self) -> list[str]:
        """The outcome in words (the divergence itself comes from ``Divergence.lines``)."""
        if self.divergence is not None:
            return [*self.divergence.lines(), verified_before(self.cycles)]
        out = [f"ok: {self.cycles} cycles verified ({self.inputs} inputs, {self.outputs} outputs)"]
        if self.cycles == 0 and self.incomplete_cycle is None:
            out = ["ok: no cycles recorded"]
        if self.checked:
            out.append(f"re-derived under rules version {RULES_VERSION} (this build): "
                       f"{sum(self.rederived.values())} cycles")
            out.append(f"checked only, not re-derived: {sum(self.checked.values())} cycles made under rules "
                       f"version {_versions(self.checked)} — their recorded outputs were folded as fact and "
                       "meet the audit's invariants and their recorded state digests")
        if self.rerun_cycles:
            out.append(f"cycles re-run after an interruption (identical): {_numbers(self.rerun_cycles)}")
        if self.incomplete_cycle is not None:
            out.append(f"incomplete last cycle {self.incomplete_cycle} (the service will re-run it)")
        if self.unconsumed_inputs:
            out.append(f"{self.unconsumed_inputs} inputs after the last cycle, not yet consumed")
        return out


def _versions(counts: Mapping[int, int]) -> str:
    return ", ".join(f"{v} ({n} cycles)" if len(counts) > 1 else str(v) for v, n in sorted(counts.items()))


def _numbers(values: list[int]) -> str:
    shown = ", ".join(str(v) for v in values[:20])
    return shown + (f" (+{len(values) - 20} more)" if len(values) > 20 else "")


def _context(step: RederivedCycle, index: int, recorded: bytes | None, derived: bytes | None) -> tuple[str, ...]:
    """Field differences, the state digests, and for decisions the state around them."""
    rec_obj, der_obj = _as_json(recorded), _as_json(derived)
    lines = []
    if recorded is not None and derived is not None:
        diffs = field_diffs(rec_obj, der_obj)
        lines += ["differs in: " + diffs[0], *("            " + d for d in diffs[1:MAX_FIELD_DIFFS])]
    completed = step.recorded.completed_data
    final = step.derived[-1].data
    der_digest = final.state_digest if isinstance(final, CycleCompleted) else None
    rec_digest = completed.get("state_digest") if completed is not None else None
    verdict = "equal" if rec_digest == der_digest else "DIFFERENT"
    lines.append(f"state digest after cycle {step.number}: recorded {rec_digest}, re-derived {der_digest} ({verdict})")
    if step.number > 1:
        lines.append(f"state before cycle {step.number} matched the recorded digest of cycle {step.number - 1}")
    decision = [
        obj["data"] for obj in (rec_obj, der_obj)
        if isinstance(obj, dict) and obj.get("type") == "allocation.decided" and isinstance(obj.get("data"), dict)
    ]
    if decision:
        before = sum(1 for o in step.derived[1:index] if isinstance(o.data, AllocationDecided))
        lines.append(f"decision step {before + 1} of the cycle; the re-derived state after the cycle:")
        form = step.engine.state_form()
        seen: set[tuple[str, str]] = set()
        for data in decision:
            keys = (("apps", data.get("app_id")), ("queues", data.get("queue")), ("nodes", data.get("node_id")))
            for kind, key in keys:
                if not isinstance(key, str) or (kind, key) in seen:
                    continue
                seen.add((kind, key))
                section = form.get(kind)
                entry = section.get(key) if isinstance(section, dict) else None
                lines.append(f"  {kind[:-1]} {key}: {_short(entry) if entry is not None else '(absent)'}")
    return tuple(lines)


def _divergence(
    step: RederivedCycle, index: int, recs: list[LogRecord], derived: list[bytes], reason: str
) -> Divergence:
    rec = recs[index] if index < len(recs) else None
    der = derived[index] if index < len(derived) else None
    offset = rec.offset if rec is not None else (recs[-1].offset + 1 if recs else None)
    started = step.recorded.started
    return Divergence(
        reason=reason, cycle=step.number, index=index, output_offset=offset,
        recorded=rec.value if rec is not None else None, derived=der,
        inputs=inputs_range(started.inputs_from, started.inputs_through),
        details=_context(step, index, rec.value if rec is not None else None, der),
    )


def _first_mismatch(recs: list[LogRecord], derived: list[bytes]) -> int | None:
    for i, rec in enumerate(recs):
        if i >= len(derived) or rec.value != derived[i]:
            return i
    return None


def compare_step(step: RederivedCycle) -> Divergence | None:
    """The first disagreement inside one cycle (an incomplete cycle's missing tail is fine)."""
    derived = [encode_output(o) for o in step.derived]
    for attempt in step.recorded.attempts:
        i = _first_mismatch(attempt, derived)
        if i is not None:
            reason = "an interrupted earlier run of this cycle wrote a different output"
            return _divergence(step, i, attempt, derived, reason)
    recs = step.recorded.records
    i = _first_mismatch(recs, derived)
    if i is not None:
        reason = "output differs" if i < len(derived) else "the log holds an output the re-derivation does not produce"
        return _divergence(step, i, recs, derived, reason)
    if step.recorded.complete and len(recs) < len(derived):
        return _divergence(step, len(recs), recs, derived, "the re-derivation produces an output the log does not hold")
    return None


def verify(
    source: LogSource,
    *,
    start: StartPoint | None = None,
    progress: Callable[[VerifyReport], None] | None = None,
    through_cycle: int | None = None,
) -> VerifyReport:
    """Re-derive and compare every cycle of ``source``; stops at the first divergence.

    With ``start`` the cycles after it are verified; with ``through_cycle`` the walk stops
    after that cycle (and does not count the inputs left after it): one range of a
    parallel verification (``replay.verify_parallel``).
    """
    return verify_with(Rederiver(source, start=start, through_cycle=through_cycle), progress=progress)


class _Audit:
    """The audit's invariants over the output log, fed from its start up to each checked cycle."""

    def __init__(self, source: LogSource) -> None:
        order = list((source.input_channel_order if isinstance(source, OrderedChannels) else None) or ["inputs"])
        self.source = source
        self.auditor = Auditor(lambda a, b: self._inputs(a, b), channel_order=order)
        self.offset = 0
        self.reported = 0

    def _inputs(self, start: Mapping[str, int], end: Mapping[str, int]) -> Iterator[LogRecord]:
        return read_range(self.source, start, end)

    def through(self, step: RederivedCycle) -> Divergence | None:
        """Feed the outputs through ``step``'s cycle; its first new violation, if any."""
        last = step.recorded.records[-1].offset
        for rec in self.source.iter_outputs(self.offset):
            if rec.offset > last:
                break
            self.auditor.feed(rec)
            self.offset = rec.offset + 1
        fresh = self.auditor.violations[self.reported:]
        self.reported = len(self.auditor.violations)
        if not fresh:
            return None
        v = fresh[0]
        more = [f"{w.rule}: {w.message}" for w in fresh[1:MAX_FIELD_DIFFS]]
        return Divergence(
            reason=f"recorded outputs break an invariant ({v.rule}): {v.message}", cycle=v.cycle,
            details=(f"cycle {step.number} was made under rules version {step.rules_version}: checked, not "
                     "re-derived", *more),
        )


def _check_folded(step: RederivedCycle, audit: _Audit) -> Divergence | None:
    recorded = (step.recorded.completed_data or {}).get("state_digest")
    if step.folded_digest != recorded:
        return Divergence(
            reason="the state folded from the recorded outputs differs from the recorded state_digest",
            cycle=step.number, output_offset=step.recorded.records[-1].offset,
            inputs=inputs_range(step.recorded.started.inputs_from, step.recorded.started.inputs_through),
            details=(f"recorded {recorded}, folded {step.folded_digest}",
                     f"cycle {step.number} was made under rules version {step.rules_version}"),
        )
    return audit.through(step)


def verify_with(rederiver: Rederiver, *, progress: Callable[[VerifyReport], None] | None = None) -> VerifyReport:
    """``verify`` over a given ``Rederiver`` (whose engine the caller may inspect afterwards)."""
    report = VerifyReport()
    incomplete: tuple[RederivedCycle, list[bytes]] | None = None
    audit: _Audit | None = None
    try:
        for step in rederiver.steps():
            if report.first_rules is None:
                report.first_rules = (step.number, step.rules_version)
            report.last_rules_version = step.rules_version
            if step.folded:
                audit = audit or _Audit(rederiver.source)
                report.inputs, report.outputs = rederiver.inputs_consumed, rederiver.outputs_read
                report.divergence = _check_folded(step, audit)
                if report.divergence is not None:
                    return report
                report.checked[step.rules_version] += 1
                report.cycles += 1
                if progress is not None:
                    progress(report)
                continue
            if incomplete is not None:
                prev, derived = incomplete
                report.divergence = _divergence(
                    prev, len(prev.recorded.records), prev.recorded.records, derived,
                    "cycle.completed missing: the next recorded cycle starts before this one completed",
                )
                return report
            report.inputs, report.outputs = rederiver.inputs_consumed, rederiver.outputs_read
            divergence = compare_step(step)
            if divergence is not None:
                report.divergence = divergence
                return report
            if step.recorded.attempts:
                report.rerun_cycles.append(step.number)
            if step.recorded.complete:
                report.cycles += 1
                report.rederived[step.rules_version] += 1
            else:
                incomplete = (step, [encode_output(o) for o in step.derived])
            if progress is not None:
                progress(report)
    except LogStructureError as exc:
        report.divergence = Divergence(reason=exc.message, cycle=exc.cycle, output_offset=exc.output_offset)
        return report
    if incomplete is not None:
        report.incomplete_cycle = incomplete[0].number
    if rederiver.through_cycle is None:
        report.unconsumed_inputs = rederiver.cursor.remaining()
    return report
