"""What two runs of a scenario decided, and the first place where they differ.

Both sides' outputs are read in evsched's output form: the compared outcome is the ordered
list of allocations (cycle, app, ask, node) with the preemption victims among them (node
``(preempted)``), and the final state line (queues, apps and
nodes: allocated/pending/priority/running apps, app states, node vectors). Output ids,
times, digests and the order of app state changes within a cycle are not compared.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from events.codec import dumps, encode_output
from scheduler.simulation.simulate import Simulation

Decision = tuple[int, str, str, str]
PREEMPTED = "(preempted)"  # the node of a Decision that is a preemption victim (allocation.revoked)


@dataclass(frozen=True)
class Outcome:
    """The comparable result of one run."""

    decisions: tuple[Decision, ...]
    state: dict[str, Any]
    config_rejected: bool = False


def parse_outcome(text: bytes) -> Outcome:
    """An outcome from JSONL output (evsched's or the harness's; the state line last)."""
    decisions: list[Decision] = []
    state: dict[str, Any] = {}
    rejected = False
    for raw in text.splitlines():
        if not raw.strip():
            continue
        obj = json.loads(raw)
        kind = obj.get("type")
        if kind == "state":
            state = {k: v for k, v in obj.items() if k != "type"}
        elif kind == "allocation.decided":
            d = obj["data"]
            decisions.append((d["cycle"], d["app_id"], d["ask_id"], d["node_id"]))
        elif kind == "allocation.revoked" and obj["data"].get("reason") == "preempted":
            d = obj["data"]  # a preemption victim: node "(preempted)"; evsched's cycle is in its id
            cycle = d["cycle"] if "cycle" in d else int(str(obj.get("id", "0")).split("-", 1)[0])
            decisions.append((cycle, d["app_id"], d["ask_id"], PREEMPTED))
        elif kind == "input.rejected" and obj["data"].get("reason") == "config-invalid":
            rejected = True
    return Outcome(tuple(decisions), state, rejected)


def evsched_output(scenario: bytes) -> bytes:
    """``evsched simulate --state`` over the scenario, in process."""
    sim = Simulation()
    out: list[bytes] = []
    for line in scenario.splitlines(keepends=True):
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
    return _first_state_difference("", evsched.state, yunikorn.state)
