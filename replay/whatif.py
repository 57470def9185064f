"""What-if: re-run the log under another queue configuration, under the current scheduling
rules, or under another rules profile, and report how decisions change.

``profile`` (``replay whatif --rules yunikorn-1.9``) re-runs every partition under that rules
profile whatever its configs name (docs/semantics.md#rules-profiles): the preview of an
upgrade of YuniKorn itself. The report then also lists every cycle whose queue order
changed: the order in which leaf queues received that cycle's decisions.

``config=None`` keeps the recorded configurations: the re-run differs from the record only
where this build's rules (``scheduler.core.rules_version``) decide differently from the
rules that made the log — the preview of an upgrade (``replay whatif --rules current``).
Cycles re-run always use the current rules; cycles before ``from_cycle`` are taken as
recorded (folded as fact when this build cannot re-derive their rules version).

The recorded inputs and cycle boundaries (times, input ranges) stay as they are. From
cycle 1 (the default) the new config replaces the initial one: the engine starts with
it. From a later cycle N, cycles before N run as recorded and the new config is applied
at the start of cycle N like a ``config.updated`` input (it must be acceptable then: no
queue holding apps may disappear). Either way every ``config.updated`` input from cycle
N on is ignored, and the report says how many were.

"Before" is the recorded run, "after" the re-run. Decisions are matched by
``(partition, app_id, ask_id, occurrence)``; one differs when the other run did not make
it, or made it in another cycle, on another node or in another queue. Preemptions
(``allocation.revoked``, reason ``preempted``) are matched by victim and preemptor: the
report lists those the new config removes and those it adds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from events.display import printable_lines
from events.log.port import LogRecord
from events.models import (
    AllocationDecided,
    AllocationRevoked,
    AppStateChanged,
    ConfigUpdated,
    InputEvent,
    InputRejected,
)
from replay.reader import LogSource
from replay.rederive import Rederiver, StartPoint
from scheduler.config import SchedulerConfig
from scheduler.config.profiles import RulesProfile
from scheduler.core.engine import Engine
from scheduler.core.recorded_cycles import LogStructureError, parse_record
from scheduler.core.rules_version import RULES_VERSION

WHATIF_SOURCE = "evsched-replay-whatif"


class WhatIfError(Exception):
    """The what-if run cannot be done (bad --from-cycle, a config the state refuses, a damaged log)."""

    def __init__(self, message: str, *, structural: bool = False) -> None:
        super().__init__(message)
        self.structural = structural  # the log itself cannot be replayed (exit 2), not a bad request (exit 1)


def _key_fields(d: dict[str, Any]) -> tuple[Any, ...]:
    return (d.get("cycle"), d.get("partition"), d.get("app_id"), d.get("ask_id"), d.get("node_id"), d.get("queue"))


def _matched(decisions: list[dict[str, Any]]) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    seen: Counter[tuple[Any, ...]] = Counter()
    out = {}
    for d in decisions:
        ask = (d.get("partition"), d.get("app_id"), d.get("ask_id"))
        out[(*ask, seen[ask])] = (d.get("cycle"), d.get("node_id"), d.get("queue"))
        seen[ask] += 1
    return out


@dataclass
class WhatIfReport:
    """Recorded ("before") and re-run ("after") decisions from ``from_cycle`` on."""

    from_cycle: int
    cycles: int = 0
    last_cycle: int = 0
    ignored_config_updates: int = 0
    before: list[dict[str, Any]] = field(default_factory=list)
    after: list[dict[str, Any]] = field(default_factory=list)
    rejections_before: int = 0
    rejections_after: int = 0
    incomplete_cycle: int | None = None
    warnings: list[str] = field(default_factory=list)
    new_config: bool = True
    recorded_versions: Counter[int] = field(default_factory=Counter)  # rules versions of the cycles re-run
    revoked_before: list[dict[str, Any]] = field(default_factory=list)  # preempted victims, recorded
    revoked_after: list[dict[str, Any]] = field(default_factory=list)
    profile: RulesProfile | None = None  # every partition re-run under it (None: the configs')
    recorded_profiles: Counter[str] = field(default_factory=Counter)  # profile -> cycles re-run made under it
    states_before: dict[str, list[str]] = field(default_factory=dict)  # app -> the states it entered, recorded
    states_after: dict[str, list[str]] = field(default_factory=dict)

    def preemptions(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """``(removed, added)``: preemptions of one run that the other did not make."""
        after = {_revocation_key(d) for d in self.revoked_after}
        before = {_revocation_key(d) for d in self.revoked_before}
        return ([d for d in self.revoked_before if _revocation_key(d) not in after],
                [d for d in self.revoked_after if _revocation_key(d) not in before])

    def queue_orders(self) -> list[tuple[int, list[str], list[str]]]:
        """``(cycle, before, after)`` of each cycle whose queue order changed: the leaf queues in the
        order they received the cycle's decisions (each once)."""
        def orders(decisions: list[dict[str, Any]]) -> dict[int, list[str]]:
            out: dict[int, list[str]] = {}
            for d in decisions:
                queues = out.setdefault(int(d.get("cycle") or 0), [])
                if d.get("queue") not in queues:
                    queues.append(str(d.get("queue")))
            return out

        b, a = orders(self.before), orders(self.after)
        return [(c, b.get(c, []), a.get(c, [])) for c in sorted(set(b) | set(a)) if b.get(c, []) != a.get(c, [])]

    def state_changes(self) -> list[tuple[str, str, int]]:
        """``(before, after, apps)``: each way an app's sequence of states changed (``New > Accepted > …``),
        with how many apps changed that way, most first."""
        ways: Counter[tuple[str, str]] = Counter()
        for app in sorted(set(self.states_before) | set(self.states_after)):
            was, now = self.states_before.get(app, []), self.states_after.get(app, [])
            if was != now:
                ways[(" > ".join(was) or "(none)", " > ".join(now) or "(none)")] += 1
        return [(b, a, n) for (b, a), n in sorted(ways.items(), key=lambda kv: (-kv[1], kv[0]))]

    def per_queue(self) -> dict[str, tuple[int, int]]:
        """Allocation counts per queue: ``{queue: (before, after)}``."""
        b = Counter(str(d.get("queue")) for d in self.before)
        a = Counter(str(d.get("queue")) for d in self.after)
        return {q: (b[q], a[q]) for q in sorted(set(b) | set(a))}

    def differing(self) -> int:
        """How many decisions one run made and the other did not make the same way."""
        b, a = _matched(self.before), _matched(self.after)
        return sum(1 for k in set(b) | set(a) if b.get(k) != a.get(k))

    def changed_decisions(self) -> list[str]:
        """One line per decision one run made and the other did not make the same way (ask order)."""
        b, a = _matched(self.before), _matched(self.after)
        out = []
        for k in sorted(set(b) | set(a), key=lambda k: tuple(str(x) for x in k)):
            was, now = b.get(k), a.get(k)
            if was != now:
                ask = f"{k[1]}/{k[2]}" + (f" (#{k[3] + 1})" if k[3] else "")
                out.append(f"{ask}: {_placed(was)} -> {_placed(now)}")
        return out

    def first_difference(self) -> tuple[int, dict[str, Any] | None, dict[str, Any] | None] | None:
        """``(index, before, after)`` of the first position where the decision sequences differ."""
        for i in range(max(len(self.before), len(self.after))):
            b = self.before[i] if i < len(self.before) else None
            a = self.after[i] if i < len(self.after) else None
            if b is None or a is None or _key_fields(b) != _key_fields(a):
                return i, b, a
        return None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        first = self.first_difference()
        return {
            "from_cycle": self.from_cycle,
            "cycles": self.cycles,
            "last_cycle": self.last_cycle,
            "ignored_config_updates": self.ignored_config_updates,
            "decisions": {"before": len(self.before), "after": len(self.after), "differing": self.differing()},
            "rejections": {"before": self.rejections_before, "after": self.rejections_after},
            "per_queue": {q: {"before": b, "after": a} for q, (b, a) in self.per_queue().items()},
            "first_difference": None if first is None else {"index": first[0], "before": first[1], "after": first[2]},
            "incomplete_cycle": self.incomplete_cycle,
            "warnings": self.warnings,
            "rules": {"current": RULES_VERSION,
                      "recorded": {str(v): n for v, n in sorted(self.recorded_versions.items())}},
            "config": "new" if self.new_config else "recorded",
            "profile": None if self.profile is None else self.profile.value,
            "recorded_profiles": dict(sorted(self.recorded_profiles.items())),
            "queue_orders": [{"cycle": c, "before": b, "after": a} for c, b, a in self.queue_orders()],
            "app_states": [{"before": b, "after": a, "apps": n} for b, a, n in self.state_changes()],
            "preemptions": {"before": len(self.revoked_before), "after": len(self.revoked_after),
                            "removed": self.preemptions()[0], "added": self.preemptions()[1]},
        }

    def lines(self) -> list[str]:
        """The report in words."""
        out = [f"what-if over cycles {self.from_cycle}..{self.last_cycle} ({self.cycles} cycles, recorded boundaries)"]
        made = ", ".join(f"version {v}: {n} cycles" for v, n in sorted(self.recorded_versions.items()))
        out.append(f"rules: current (version {RULES_VERSION}); the cycles were made under {made or 'no rules'}")
        if self.profile is not None:
            recorded = ", ".join(f"{p}: {n} cycles" for p, n in sorted(self.recorded_profiles.items()))
            out.append(f"rules profile: every partition under {self.profile.value}; the cycles were made under "
                       f"{recorded or 'no profile'}")
        if self.new_config:
            place = "the initial config" if self.from_cycle == 1 else f"the config in force at cycle {self.from_cycle}"
            out.append(f"the new config replaces {place}; config.updated events from cycle {self.from_cycle} on are"
                       f" ignored ({self.ignored_config_updates} in the log)")
        else:
            out.append("config: as recorded")
        out.extend(f"warning: {w}" for w in self.warnings)
        out.append(f"decisions: {len(self.before)} before, {len(self.after)} after, {self.differing()} differ")
        out.append(f"input rejections: {self.rejections_before} before, {self.rejections_after} after")
        rows = self.per_queue()
        width = max([len("queue"), *(len(q) for q in rows)])
        out.append(f"  {'queue'.ljust(width)}  {'before':>8}  {'after':>8}  {'change':>8}")
        for q, (b, a) in rows.items():
            out.append(f"  {q.ljust(width)}  {b:>8}  {a:>8}  {a - b:>+8}")
        first = self.first_difference()
        if first is None:
            out.append("no decision differs")
        else:
            index, was, now = first
            out.append(f"first differing decision (#{index + 1} from cycle {self.from_cycle}):")
            out.append(f"  before: {_describe(was)}")
            out.append(f"  after:  {_describe(now)}")
        if self.profile is not None:
            out.append("every decision that differs:" if self.differing() else "every decision is the same")
            out.extend(f"  {line}" for line in self.changed_decisions())
        removed, added = self.preemptions()
        out.append(f"preemptions: {len(self.revoked_before)} before, {len(self.revoked_after)} after")
        out.extend(f"  removed: {_victim(d)}" for d in removed)
        out.extend(f"  added:   {_victim(d)}" for d in added)
        if self.profile is not None:
            changed = self.queue_orders()
            ways = self.state_changes()
            out.append(f"app states: {sum(n for _, _, n in ways)} apps change their sequence of states")
            out.extend(f"  {n} apps: {b}  ->  {a}" for b, a, n in ways)
            out.append(f"queue order: {len(changed)} cycles changed")
            out.extend(f"  cycle {c}: {' > '.join(b) or '(none)'}  ->  {' > '.join(a) or '(none)'}"
                       for c, b, a in changed)
        if self.incomplete_cycle is not None:
            out.append(f"incomplete last cycle {self.incomplete_cycle} left out (the service will re-run it)")
        return printable_lines(out)


def _placed(where: tuple[Any, ...] | None) -> str:
    """A matched decision's (cycle, node, queue) in words."""
    return "not placed" if where is None else f"cycle {where[0]} on {where[1]} in {where[2]}"


def _describe(d: dict[str, Any] | None) -> str:
    if d is None:
        return "(no such decision)"
    return orjson.dumps(d, option=orjson.OPT_SORT_KEYS).decode()


def _revocation_key(d: dict[str, Any]) -> tuple[Any, ...]:
    pre = d.get("preemptor") or {}
    return (d.get("app_id"), d.get("ask_id"), pre.get("app_id"), pre.get("ask_id"))


def _victim(d: dict[str, Any]) -> str:
    pre = d.get("preemptor") or {}
    return (f"{d.get('app_id')}/{d.get('ask_id')} on {d.get('node_id')} for "
            f"{pre.get('app_id')}/{pre.get('ask_id')} ({pre.get('queue')})")


def _is_config_update(rec: LogRecord) -> bool:
    if b"config.updated" not in rec.value:
        return False
    obj = parse_record(rec)
    return obj is not None and obj.get("type") == "config.updated"


def _recorded(records: list[LogRecord]) -> Iterator[dict[str, Any]]:
    for rec in records:
        if (b"allocation.decided" in rec.value or b"input.rejected" in rec.value
                or b"allocation.revoked" in rec.value or b"app.state_changed" in rec.value):
            obj = parse_record(rec)
            if obj is not None and isinstance(obj.get("data"), dict):
                yield obj


def whatif(
    source: LogSource, config: SchedulerConfig | None, *, from_cycle: int = 1, start: StartPoint | None = None,
    profile: RulesProfile | None = None,
) -> WhatIfReport:
    """Re-run ``source`` with ``config`` (None: the recorded ones) and the current rules from
    ``from_cycle`` on, every partition under ``profile`` when given (see the module docstring).

    ``start`` (a snapshot of a cycle before ``from_cycle``) saves re-deriving the cycles
    up to it; they run as recorded either way.
    """
    if from_cycle < 1:
        raise WhatIfError(f"--from-cycle must be at least 1, got {from_cycle}")
    if start is not None and start.engine.cycle_number >= from_cycle:
        raise WhatIfError(f"the start point holds cycle {start.engine.cycle_number}, not one before {from_cycle}")
    report = WhatIfReport(from_cycle, new_config=config is not None, profile=profile)

    def keep(cycle: int, rec: LogRecord) -> bool:
        if config is not None and cycle >= from_cycle and _is_config_update(rec):
            report.ignored_config_updates += 1
            return False
        return True

    def switch(engine: Engine, cycle: int, now_us: int) -> None:
        if profile is not None and cycle == from_cycle:
            engine.override_profile(profile)
        if config is None or cycle != from_cycle or from_cycle == 1:
            return
        event = InputEvent.model_construct(
            id=f"whatif-config-{cycle}", source=WHATIF_SOURCE, type="config.updated", time_us=now_us,
            data=ConfigUpdated(yaml=config.yaml),
        )
        engine.apply(event)
        result = engine.pending_outputs[-1] if engine.pending_outputs else None
        if isinstance(result, InputRejected):
            raise WhatIfError(f"the new config cannot be applied at cycle {cycle}: {result.message}")

    def factory(src: str) -> Engine:
        engine = Engine(config if from_cycle == 1 else None, source=src)
        if profile is not None and from_cycle == 1:
            engine.override_profile(profile)
        return engine

    rederiver = Rederiver(source, start=start, engine_factory=factory, keep=keep, before_cycle=switch,
                          rederive_from=from_cycle)
    try:
        for step in rederiver.steps():
            if not step.recorded.complete:
                report.incomplete_cycle = step.number
                break
            if step.number < from_cycle:
                recorded = (step.recorded.completed_data or {}).get("state_digest")
                if step.state_digest() != recorded and not report.warnings:
                    report.warnings.append(f"cycle {step.number} does not re-derive to its recorded state digest;"
                                           " run `evsched replay verify`")
                continue
            report.cycles += 1
            report.last_cycle = step.number
            report.recorded_versions[step.rules_version] += 1
            recorded_profiles = (step.recorded.completed_data or {}).get("profiles") or {}
            for name in sorted(set(recorded_profiles.values()) if isinstance(recorded_profiles, dict) else ()):
                report.recorded_profiles[str(name)] += 1
            if not recorded_profiles:
                report.recorded_profiles["yunikorn-1.5"] += 1
            for obj in _recorded(step.recorded.records[1:]):
                if obj.get("type") == "allocation.decided":
                    report.before.append(obj["data"])
                elif obj.get("type") == "input.rejected":
                    report.rejections_before += 1
                elif obj.get("type") == "allocation.revoked" and obj["data"].get("reason") == "preempted":
                    report.revoked_before.append(obj["data"])
                elif obj.get("type") == "app.state_changed":
                    app_id, to = str(obj["data"].get("app_id")), str(obj["data"].get("to"))
                    report.states_before.setdefault(app_id, []).append(to)
            for out in step.derived:
                if isinstance(out.data, AllocationDecided):
                    report.after.append(out.data.model_dump())
                elif isinstance(out.data, InputRejected):
                    report.rejections_after += 1
                elif isinstance(out.data, AllocationRevoked) and out.data.reason == "preempted":
                    report.revoked_after.append(out.data.model_dump())
                elif isinstance(out.data, AppStateChanged):
                    report.states_after.setdefault(out.data.app_id, []).append(out.data.to)
    except LogStructureError as exc:
        raise WhatIfError(f"cannot re-derive the log: {exc.message}", structural=True) from None
    if report.cycles == 0:
        raise WhatIfError(f"cycle {from_cycle} is not in the log (no complete cycle from there on)")
    return report
