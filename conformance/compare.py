"""What two runs of a scenario decided, and the first place where they differ.

Both sides' outputs are read in evsched's output form. The compared outcome:

* the ordered allocations (cycle, app, ask, node) with the preemption victims among them
  (node ``(preempted)``), in order;
* app rejections with their reason class (``exists``: the id is taken; ``refused``: no
  queue would take the app — unknown, parent, draining, ACL, placement), in order;
* placements: the leaf each accepted app went to;
* each app's sequence of states (the order of different apps' changes is not compared);
* reservations: each ``ask.reserved`` (cycle, app, ask, node) and ``ask.unreserved``
  (app, ask, node), as sorted lists (reasons are evsched's own and not compared); an ask
  unreserved and reserved again on the same node in one cycle counts as neither, on both
  sides: the harness sees reservations only between allocation steps, so a reservation
  ended and made again within one step (a preemption attempt cancelling it, YUNIKORN-3092,
  and the ask's own turn later in the walk) is invisible there;
* the final state line (queues, apps and nodes: allocated/pending/priority/running apps,
  app states, node vectors, reservations; user and group usage where evsched tracks it,
  i.e. where a partition configures limits).

Output ids, times, digests and messages are not compared.

evsched runs each scenario under the rules profile of the yunikorn-core it is compared
with (``use_profile``; ``make conformance PROFILE=yunikorn-1.9``): every config of the
scenario gets the partition-level ``rules`` key on evsched's side only (yunikorn has no
such key).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from events.codec import dumps, encode_output
from scheduler.simulation.simulate import Simulation

Decision = tuple[int, str, str, str]
Reservation = tuple[str, int, str, str, str]  # kind, cycle (-1 for ask.unreserved), app, ask, node
PREEMPTED = "(preempted)"  # the node of a Decision that is a preemption victim (allocation.revoked)
EXISTS, REFUSED = "exists", "refused"  # app rejection classes


@dataclass(frozen=True)
class Outcome:
    """The comparable result of one run."""

    decisions: tuple[Decision, ...]
    state: dict[str, Any]
    config_rejected: bool = False
    rejections: tuple[tuple[str, str], ...] = ()
    placements: dict[str, str] = field(default_factory=dict)
    app_states: dict[str, tuple[str, ...]] = field(default_factory=dict)
    reservations: tuple[Reservation, ...] = ()


def rejection_class(reason: str) -> str:
    """An app rejection's class from evsched's reason (the harness prints the class's reason)."""
    return EXISTS if reason == "app-exists" else REFUSED


def _cycle_of(obj: dict[str, Any]) -> int:
    """A cycle output's cycle: the harness prints it, evsched's is its id's prefix."""
    d = obj["data"]
    return int(d["cycle"]) if "cycle" in d else int(str(obj.get("id", "0")).split("-", 1)[0])


def parse_outcome(text: bytes, scenario: bytes | None = None) -> Outcome:
    """An outcome from JSONL output (evsched's or the harness's; the state line last).

    ``scenario``: evsched's input, whose ``app.added`` queues are the placements of apps
    without an ``app.placed`` (the harness prints one for every app it accepts).
    """
    decisions: list[Decision] = []
    state: dict[str, Any] = {}
    rejected = False
    rejections: list[tuple[str, str]] = []
    placed: dict[str, str] = {}
    states: dict[str, list[str]] = {}
    reservations: list[Reservation] = []
    cycle = 1  # the cycle the next outputs belong to (outputs of inputs: the next cycle's)
    unreserved_in: dict[tuple[str, str, str], int] = {}  # (app, ask, node) -> cycle of its last ask.unreserved
    last_reason = ""
    for raw in text.splitlines():
        if not raw.strip():
            continue
        obj = json.loads(raw)
        kind = obj.get("type")
        d = obj.get("data") or {}
        if kind == "state":
            state = {k: v for k, v in obj.items() if k != "type"}
        elif kind == "allocation.decided":
            decisions.append((d["cycle"], d["app_id"], d["ask_id"], d["node_id"]))
        elif kind == "allocation.revoked" and d.get("reason") == "preempted":
            decisions.append((_cycle_of(obj), d["app_id"], d["ask_id"], PREEMPTED))
        elif kind == "input.rejected":
            rejected = rejected or d.get("reason") == "config-invalid"
            last_reason = d.get("reason", "")
            if d.get("input_type") == "app.added" and "app_id" in d:  # the harness names the app
                rejections.append((d["app_id"], rejection_class(last_reason)))
        elif kind == "app.state_changed":
            states.setdefault(d["app_id"], []).append(d["to"])
            if d["to"] == "Rejected" and d.get("from") == "New" and scenario is not None:
                rejections.append((d["app_id"], rejection_class(last_reason)))
        elif kind == "app.placed":
            placed[d["app_id"]] = d["queue"]
        elif kind == "cycle.completed":
            cycle += 1
        elif kind == "ask.reserved":
            held = (d["app_id"], d["ask_id"], d["node_id"])
            if unreserved_in.pop(held, None) == cycle:  # ended and made again in this cycle: neither
                reservations.remove(("unreserved", -1, *held))
            else:
                reservations.append(("reserved", _cycle_of(obj), *held))
        elif kind == "ask.unreserved":
            unreserved_in[(d["app_id"], d["ask_id"], d["node_id"])] = cycle
            reservations.append(("unreserved", -1, d["app_id"], d["ask_id"], d["node_id"]))
    if scenario is not None:
        placed = _evsched_placements(scenario, placed, {app for app, _ in rejections})
    return Outcome(tuple(decisions), state, rejected, tuple(rejections), placed,
                   {app: tuple(seq) for app, seq in states.items()}, tuple(sorted(reservations)))


def _evsched_placements(scenario: bytes, placed: dict[str, str], rejected: set[str]) -> dict[str, str]:
    """Every accepted app's leaf: its ``app.placed`` queue, else the queue it named."""
    out: dict[str, str] = {}
    for raw in scenario.splitlines():
        if not raw.strip():
            continue
        obj = json.loads(raw)
        if obj.get("type") != "app.added":
            continue
        app_id, queue = obj["data"]["app_id"], obj["data"].get("queue", "")
        if app_id in placed:
            out[app_id] = placed.pop(app_id)
        elif app_id not in rejected and app_id not in out and queue:
            out[app_id] = queue.lower()
    return out


DEFAULT_PROFILE = "yunikorn-1.5"
_profile = DEFAULT_PROFILE  # the rules profile evsched runs the scenarios under


def use_profile(profile: str) -> None:
    """Run evsched under ``profile`` from now on (yunikorn-1.5: the scenarios as they are)."""
    global _profile
    _profile = profile


def profile_in_use() -> str:
    """The rules profile evsched runs the scenarios under."""
    return _profile


def under_profile(line: bytes, profile: str) -> bytes:
    """A scenario line with its config's partitions set to ``profile`` (any other line as it is).

    The generator writes each config as JSON (a YAML document); one that is not is left alone.
    """
    if profile == DEFAULT_PROFILE or b'"config.updated"' not in line:
        return line
    obj = json.loads(line)
    try:
        config = json.loads(obj["data"]["yaml"])
    except (KeyError, TypeError, ValueError):
        return line
    for part in config.get("partitions") or []:
        if isinstance(part, dict):
            part["rules"] = profile
    obj["data"]["yaml"] = json.dumps(config)
    return json.dumps(obj).encode() + (b"\n" if line.endswith(b"\n") else b"")


def evsched_output(scenario: bytes) -> bytes:
    """``evsched simulate --state`` over the scenario, in process (under the profile in use)."""
    sim = Simulation()
    out: list[bytes] = []
    profile = _profile
    for raw in scenario.splitlines(keepends=True):
        line = under_profile(raw, profile)
        out.extend(encode_output(e) for e in sim.feed(line))
    out.extend(encode_output(e) for e in sim.finish())
    out.append(dumps(sim.engine.state_form()))
    return b"\n".join(out) + b"\n"


def _fmt(d: Decision | None) -> str:
    return "nothing" if d is None else f"{d[1]}/{d[2]} -> {d[3]} (cycle {d[0]})"


def _first_state_difference(path: str, a: Any, b: Any) -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a:
                return f"state {path}{k}: evsched has none, yunikorn {json.dumps(b[k], sort_keys=True)}"
            if k not in b:
                return f"state {path}{k}: evsched {json.dumps(a[k], sort_keys=True)}, yunikorn has none"
            found = _first_state_difference(f"{path}{k}.", a[k], b[k])
            if found:
                return found
        return None
    if a != b:
        ours, theirs = json.dumps(a, sort_keys=True), json.dumps(b, sort_keys=True)
        return f"state {path.rstrip('.')}: evsched {ours}, yunikorn {theirs}"
    return None


def evsched_outcome(scenario: bytes) -> Outcome:
    """evsched's outcome on the scenario."""
    return parse_outcome(evsched_output(scenario), scenario)


def _first_list_difference(what: str, ours: tuple[Any, ...], theirs: tuple[Any, ...]) -> str | None:
    for i in range(max(len(ours), len(theirs))):
        a = ours[i] if i < len(ours) else None
        b = theirs[i] if i < len(theirs) else None
        if a != b:
            return f"{what} {i + 1}: evsched {a or 'nothing'}, yunikorn {b or 'nothing'}"
    return None


def first_difference(evsched: Outcome, yunikorn: Outcome) -> str | None:
    """None when both runs agree; else a one-line description of the first difference."""
    if evsched.config_rejected != yunikorn.config_rejected:
        return f"config rejected: evsched {evsched.config_rejected}, yunikorn {yunikorn.config_rejected}"
    if evsched.config_rejected and not yunikorn.decisions:
        return None  # both reject the first config: yunikorn-core cannot run without one
    ours, theirs = evsched.decisions, yunikorn.decisions
    for i in range(max(len(ours), len(theirs))):
        a = ours[i] if i < len(ours) else None
        b = theirs[i] if i < len(theirs) else None
        if a != b:
            return f"decision {i + 1}: evsched {_fmt(a)}, yunikorn {_fmt(b)}"
    found = (_first_list_difference("app rejection", evsched.rejections, yunikorn.rejections)
             or _first_state_difference("placement ", evsched.placements, yunikorn.placements)
             or _first_state_difference("app states ", evsched.app_states, yunikorn.app_states)
             or _first_list_difference("reservation", evsched.reservations, yunikorn.reservations))
    if found:
        return found
    theirs_state = yunikorn.state
    if "usage" not in evsched.state:  # evsched tracks usage only where limits are configured
        theirs_state = {k: v for k, v in theirs_state.items() if k != "usage"}
    return _first_state_difference("", evsched.state, theirs_state)
