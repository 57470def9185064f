"""State at a cycle: the state form after cycle N, re-derived from the log, and diffs between two.

Cycle 0 is the state before any cycle: the built-in default config and nothing else.
The re-derived state digest after cycle N is compared with the one recorded in cycle N's
``cycle.completed``; ``StateAt.digest_matches`` says whether they agree. Given a
``StartPoint`` (a snapshot at or before the first cycle asked for, see
``replay.snapshot_start``) only the cycles after it are re-derived.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from events.display import printable_lines
from events.units import fmt_quantity
from replay.reader import LogSource
from replay.rederive import Rederiver, StartPoint
from scheduler.core.engine import Engine
from scheduler.core.recorded_cycles import LogStructureError

SECTIONS = ("queues", "apps", "nodes")


class StateError(Exception):
    """The requested cycle cannot be re-derived from this log."""

    def __init__(self, message: str, *, structural: bool = False) -> None:
        super().__init__(message)
        self.structural = structural  # the log itself cannot be replayed (exit 2), not a bad request (exit 1)


@dataclass(frozen=True)
class StateAt:
    """The state form after one cycle, and how its digest compares with the recorded one."""

    cycle: int
    form: dict[str, Any]
    recorded_digest: str | None
    derived_digest: str

    @property
    def digest_matches(self) -> bool:
        """True when the recorded digest equals the re-derived one (cycle 0: always)."""
        return self.cycle == 0 or self.recorded_digest == self.derived_digest


def states_at(source: LogSource, cycles: Iterable[int], start: StartPoint | None = None) -> dict[int, StateAt]:
    """The state after each requested cycle, from one pass over the log (after ``start``)."""
    wanted = sorted(set(cycles))
    if not wanted:
        return {}
    if wanted[0] < 0:
        raise StateError(f"cycle {wanted[0]} does not exist: cycles are numbered from 1 (0 is the initial state)")
    found: dict[int, StateAt] = {}
    if wanted[0] == 0:
        initial = Engine()
        found[0] = StateAt(0, initial.state_form(), None, initial.digest())
    last_complete = 0
    if start is not None:
        held = start.engine.cycle_number
        first = min((n for n in wanted if n > 0), default=held)
        if held > first:
            raise ValueError(f"the start point holds cycle {held}, after cycle {first}")
        last_complete = held
        if held in wanted:
            found[held] = StateAt(held, start.engine.state_form(), start.recorded_digest, start.engine.digest())
    incomplete: int | None = None
    try:
        for step in Rederiver(source, start=start, through_cycle=wanted[-1]).steps():
            if not step.recorded.complete:
                incomplete = step.number
                break
            last_complete = step.number
            if step.number in wanted:
                recorded = (step.recorded.completed_data or {}).get("state_digest")
                found[step.number] = StateAt(
                    step.number, step.engine.state_form(), recorded if isinstance(recorded, str) else None,
                    step.state_digest() or "",
                )
    except LogStructureError as exc:
        raise StateError(f"cannot re-derive the log: {exc.message}", structural=True) from None
    missing = [n for n in wanted if n not in found]
    if missing:
        more = f"; cycle {incomplete} is incomplete (the service will re-run it)" if incomplete is not None else ""
        raise StateError(f"cycle {missing[0]} is not in the log: it holds {last_complete} complete cycles{more}")
    return found


def engine_at(source: LogSource, cycle: int | None, start: StartPoint | None = None) -> Engine:
    """The engine after ``cycle`` (None: the last complete cycle), re-derived after ``start`` (``StateError``)."""
    engine = start.engine if start is not None else Engine()
    last = engine.cycle_number
    if cycle is not None and (cycle < last or cycle < 0):
        raise StateError(f"cycle {cycle} is before the start point (cycle {last})" if cycle >= 0
                         else f"cycle {cycle} does not exist: cycles are numbered from 1 (0 is the initial state)")
    if cycle != last:
        try:
            for step in Rederiver(source, start=start, through_cycle=cycle).steps():
                if not step.recorded.complete:
                    break
                engine, last = step.engine, step.number
        except LogStructureError as exc:
            raise StateError(f"cannot re-derive the log: {exc.message}", structural=True) from None
    if cycle is not None and last != cycle:
        raise StateError(f"cycle {cycle} is not in the log (it holds {last} complete cycles)")
    return engine


def state_at(source: LogSource, cycle: int, start: StartPoint | None = None) -> StateAt:
    """The state after cycle ``cycle`` (re-derived after ``start`` when given)."""
    return states_at(source, [cycle], start)[cycle]


def diff_states(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What changed between two state forms, per section: added, removed and changed entries.

    ``changed`` maps an entry to ``{field: {"from": old, "to": new}}`` for each field that differs.
    """
    out: dict[str, Any] = {}
    for section in SECTIONS:
        old: dict[str, Any] = before.get(section) or {}
        new: dict[str, Any] = after.get(section) or {}
        changed: dict[str, Any] = {}
        for key in sorted(set(old) & set(new)):
            fields = {
                name: {"from": old[key].get(name), "to": new[key].get(name)}
                for name in sorted(set(old[key]) | set(new[key]))
                if old[key].get(name) != new[key].get(name)
            }
            if fields:
                changed[key] = fields
        out[section] = {
            "added": {k: new[k] for k in sorted(set(new) - set(old))},
            "removed": {k: old[k] for k in sorted(set(old) - set(new))},
            "changed": changed,
        }
    return out


def _value(value: Any, raw: bool = False) -> str:
    """A field's value; resource maps ({vcore: 64000}) in human units (``events.units``) unless ``raw``."""
    if isinstance(value, dict):
        return "{" + ", ".join(
            f"{k}: {fmt_quantity(k, v, raw=raw) if isinstance(v, int) and not isinstance(v, bool) else _value(v, raw)}"
            for k, v in sorted(value.items())
        ) + "}"
    return str(value)


def _fields(entry: dict[str, Any], raw: bool) -> str:
    return ", ".join(f"{name} {_value(value, raw)}" for name, value in sorted(entry.items()))


def format_diff(diff: dict[str, Any], first: int, second: int, *, raw: bool = False) -> list[str]:
    """A state diff in words: one header per section, one line per added/removed/changed entry.

    Resource maps are in human units (``memory: 256 GiB``); ``raw`` keeps the exact integers.
    """
    lines = [f"state after cycle {first} → after cycle {second}"]
    for section in SECTIONS:
        part = diff[section]
        added, removed, changed = part["added"], part["removed"], part["changed"]
        lines.append(f"{section}: {len(added)} added, {len(removed)} removed, {len(changed)} changed")
        for key, entry in added.items():
            lines.append(f"  + {key}: {_fields(entry, raw)}")
        for key, entry in removed.items():
            lines.append(f"  - {key}: {_fields(entry, raw)}")
        for key, fields in changed.items():
            text = "; ".join(f"{name} {_value(c['from'], raw)} → {_value(c['to'], raw)}" for name, c in fields.items())
            lines.append(f"  ~ {key}: {text}")
    return printable_lines(lines)
