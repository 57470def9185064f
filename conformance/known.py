"""Known differences between evsched and yunikorn-core (v1.5.2, or v1.9.0 under the
yunikorn-1.9 profile), each with its cause and a test.

``classify`` names the known difference a disagreeing scenario shows: the scenario has the
feature the difference needs, and the same scenario with exactly that feature taken out
(only the asks whose required node can never hold them; only the ``maxapplications``
settings) agrees. Otherwise the difference is new (None). docs/conformance.md
keeps the same table with the minimal scenarios; remove an entry once evsched is fixed
and ``make conformance`` agrees on its scenarios. Each entry names the rules profiles it
holds for (``profiles``): a difference v1.9.0 no longer has is not known under yunikorn-1.9.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any

from conformance.compare import PREEMPTED, Outcome, first_difference, profile_in_use

Lines = list[dict[str, Any]]


@dataclass(frozen=True)
class Known:
    """A documented difference: an id, its cause, where it goes, the feature it needs and its removal."""

    key: str
    cause: str
    route: str
    shows: Callable[[Lines], bool]
    without: Callable[[Lines], Lines] | None = None  # the scenario without the feature
    normalise: Callable[[Lines, Outcome], Outcome] | None = None  # an outcome without its trace
    explains: Callable[[Outcome, Outcome], bool] | None = None  # (evsched's, yunikorn's) show the cause
    profiles: frozenset[str] = frozenset({"yunikorn-1.5", "yunikorn-1.9"})  # where it holds


V15 = frozenset({"yunikorn-1.5"})
V19 = frozenset({"yunikorn-1.9"})


def _fits(request: dict[str, int], capacity: dict[str, int]) -> bool:
    return all(v <= capacity.get(k, 0) for k, v in request.items() if v > 0)


def _capacities(lines: Lines) -> dict[str, list[dict[str, int]]]:
    """Every capacity each node has in the scenario (added or updated)."""
    out: dict[str, list[dict[str, int]]] = {}
    for line in lines:
        data = line.get("data") or {}
        if line.get("type") in ("node.added", "node.updated") and data.get("capacity") is not None:
            out.setdefault(data["node_id"], []).append(data["capacity"])
    return out


def too_small_asks(lines: Lines) -> set[tuple[str, str]]:
    """(app, ask) of each ask whose required node joins but never has the capacity to hold it."""
    capacities = _capacities(lines)
    out: set[tuple[str, str]] = set()
    for line in lines:
        data = line.get("data") or {}
        node = data.get("required_node")
        if line.get("type") == "ask.added" and node in capacities and not any(
                _fits(data.get("resources") or {}, cap) for cap in capacities[node]):
            out.add((data["app_id"], data["ask_id"]))
    return out


def too_small_asks_dropped(lines: Lines) -> Lines:
    """The scenario without those asks (nor the lines naming them)."""
    gone = too_small_asks(lines)
    return [line for line in lines
            if ((line.get("data") or {}).get("app_id"), (line.get("data") or {}).get("ask_id")) not in gone]


def _configs(lines: Lines) -> list[dict[str, Any]]:
    return [json.loads(line["data"]["yaml"]) for line in lines if line.get("type") == "config.updated"]


def _queues(tree: Any) -> list[dict[str, Any]]:
    if isinstance(tree, dict):
        return [tree, *(q for child in tree.get("queues") or [] for q in _queues(child))]
    return []


def _leaving(lines: Lines) -> bool:
    """An app may stop running: an allocation released, an ask or app removed."""
    return any(line.get("type") in ("allocation.released", "ask.removed", "app.removed") for line in lines)


def maxapps_clamped(lines: Lines) -> bool:
    """A queue limits its apps (``maxapplications``) and apps leave, or a later config changes it."""
    configs = _configs(lines)
    limits = [{q["name"]: q.get("maxapplications") for p in c.get("partitions") or [] for root in p.get("queues") or []
               for q in _queues(root)} for c in configs]
    limited = any(v for lim in limits for v in lim.values())
    changed = any(a != b for a, b in pairwise(limits))
    return limited and (_leaving(lines) or changed)


def maxapps_dropped(lines: Lines) -> Lines:
    """No queue sets ``maxapplications``."""
    def strip(tree: Any) -> Any:
        if isinstance(tree, dict):
            return {k: strip(v) for k, v in tree.items() if k != "maxapplications"}
        if isinstance(tree, list):
            return [strip(v) for v in tree]
        return tree

    return [{**line, "data": {"yaml": json.dumps(strip(json.loads(line["data"]["yaml"])))}}
            if line.get("type") == "config.updated" else line for line in lines]


def _configured_paths(config: dict[str, Any]) -> set[str]:
    out: set[str] = set()

    def walk(q: dict[str, Any], prefix: str) -> None:
        path = f"{prefix}.{q['name']}".lower() if prefix else str(q["name"]).lower()
        out.add(path)
        for child in q.get("queues") or []:
            walk(child, path)

    for part in config.get("partitions") or []:
        for root in part.get("queues") or []:
            walk(root, "")
    return out


def apps_into_removed_queues(lines: Lines) -> set[str]:
    """Apps naming a queue that an earlier config had and the config in force no longer has."""
    ever: set[str] = set()
    now: set[str] = set()
    out: set[str] = set()
    for line in lines:
        data = line.get("data") or {}
        if line.get("type") == "config.updated":
            now = _configured_paths(json.loads(data["yaml"]))
            ever |= now
        elif line.get("type") == "app.added":
            queue = str(data.get("queue", "")).lower()
            if queue in ever and queue not in now:
                out.add(data["app_id"])
    return out


def removed_queue_apps_dropped(lines: Lines) -> Lines:
    """The scenario without those apps (nor their asks and releases)."""
    gone = apps_into_removed_queues(lines)
    return [line for line in lines if (line.get("data") or {}).get("app_id") not in gone]


def queues_can_empty(lines: Lines) -> bool:
    """A queue may be left empty outside the config: dynamic (placement) or removed by a config."""
    configs = [_configured_paths(json.loads(line["data"]["yaml"]))
               for line in lines if line.get("type") == "config.updated"]
    removed = any(a - b for a, b in pairwise(configs))
    dynamic = any("placementrules" in line["data"]["yaml"] for line in lines if line.get("type") == "config.updated")
    return removed or dynamic


def limits_with_leaving_work(lines: Lines) -> bool:
    """User/group limits are configured and allocations or asks go away (what ugm's history reads)."""
    limited = any('"limits"' in line["data"]["yaml"] for line in lines if line.get("type") == "config.updated")
    return limited and any(line.get("type") in ("allocation.released", "ask.removed") for line in lines)


def usage_running_apps_dropped(_lines: Lines, outcome: Outcome) -> Outcome:
    """The user/group usage without its running-app counts (allocated resources still compared)."""
    usage = outcome.state.get("usage")
    if not isinstance(usage, dict):
        return outcome
    bare: dict[str, dict[str, Any]] = {}
    for kind, names in usage.items():
        for name, queues in names.items():
            held = {q: {"allocated": e["allocated"]} for q, e in queues.items() if e.get("allocated")}
            if held:
                bare.setdefault(kind, {})[name] = held
    return replace(outcome, state={**outcome.state, "usage": bare})


def may_preempt(lines: Lines) -> bool:
    return any(line.get("type") == "ask.added" and (line.get("data") or {}).get("preempt_other") for line in lines)


def victim_picked_twice(ours: Outcome, theirs: Outcome) -> bool:
    """yunikorn-core revoked an allocation it had already revoked (not allocated again since),
    and both sides agree on every decision before that cycle."""
    revoked: set[tuple[str, str]] = set()
    for cycle, app, ask, node in theirs.decisions:
        if node != PREEMPTED:
            revoked.discard((app, ask))
        elif (app, ask) in revoked:
            before = [d for d in theirs.decisions if d[0] < cycle]
            return list(ours.decisions[:len(before)]) == before
        else:
            revoked.add((app, ask))
    return False


def _occupied_lines(lines: Lines) -> list[int]:
    """Indexes of the node lines that set ``occupied``."""
    return [i for i, line in enumerate(lines) if line.get("type") in ("node.added", "node.updated")
            and (line.get("data") or {}).get("occupied") is not None]


def occupied_dropped(lines: Lines) -> Lines:
    """The scenario without ``occupied`` (a node update that only set it goes)."""
    out: Lines = []
    for line in lines:
        data = line.get("data") or {}
        if line.get("type") in ("node.added", "node.updated") and "occupied" in data:
            data = {k: v for k, v in data.items() if k != "occupied"}
            if line["type"] == "node.updated" and set(data) == {"node_id"}:
                continue
            line = {**line, "data": data}
        out.append(line)
    return out


EMPTY_QUEUE = {"allocated": {}, "pending": {}, "running_apps": 0}


def empty_unconfigured_queues_dropped(lines: Lines, outcome: Outcome) -> Outcome:
    """The final state without empty queues that the last config does not name."""
    configs = [line for line in lines if line.get("type") == "config.updated"]
    if not configs or "queues" not in outcome.state:
        return outcome
    named = _configured_paths(json.loads(configs[-1]["data"]["yaml"]))
    queues = {path: q for path, q in outcome.state["queues"].items()
              if path in named or {k: v for k, v in q.items() if k != "priority"} != EMPTY_QUEUE}
    return replace(outcome, state={**outcome.state, "queues": queues})


KNOWN_DIFFERENCES: tuple[Known, ...] = (
    Known(
        "required-node-too-small",
        "an ask whose required node's capacity could never hold it: yunikorn-core 1.5 returns a "
        "reservation of that node on every step, the reservation fails (Node.Reserve needs the "
        "capacity) and the whole step ends, so nothing walked after that app is scheduled; "
        "evsched ends only that app's turn (deliberate, docs/semantics.md#differences-from-yunikorn)",
        "deliberate (docs/semantics.md)",
        lambda lines: bool(too_small_asks(lines)),
        too_small_asks_dropped,
    ),
    Known(
        "maxapplications-running-count",
        "maxapplications: evsched counts a queue's running apps exactly; yunikorn-core 1.5 clamps "
        "the count (and can then admit more than the limit) and ignores a changed limit on a reload "
        "(deliberate, docs/semantics.md#differences-from-yunikorn)",
        "deliberate (docs/semantics.md)",
        maxapps_clamped,
        maxapps_dropped,
    ),
    Known(
        "draining-queue-placement",
        "an app naming a queue the config removed (draining while it holds apps): yunikorn-core "
        "1.5 places it there; evsched rejects it (unknown-queue), as YuniKorn 1.7 does "
        "(YUNIKORN-2991: rules skip draining queues)",
        "deliberate (YuniKorn 1.7 behaviour)",
        lambda lines: bool(apps_into_removed_queues(lines)),
        removed_queue_apps_dropped,
        profiles=V15,
    ),
    Known(
        "queue-cleanup-delay",
        "an empty dynamic queue, or one the config removed, leaves evsched's tree at once; "
        "yunikorn-core 1.5 removes it at its partition manager's next 10 s cleaner tick "
        "(partition_manager.go:cleanRoot), so a state read before the tick still shows it",
        "deliberate (docs/semantics.md: queues go with their last app)",
        queues_can_empty,
        normalise=empty_unconfigured_queues_dropped,
    ),
    Known(
        "ugm-running-apps",
        "user/group running apps: evsched counts an app in Starting or Running; yunikorn-core 1.5's "
        "ugm counts it from its first allocation until an allocation ends leaving it nothing "
        "allocated or pending (an app back from Completing counts only once allocated again; one "
        "whose last ask is removed while it holds nothing is never dropped)",
        "evsched core: a per-app flag kept in snapshots (not routed yet)",
        limits_with_leaving_work,
        normalise=usage_running_apps_dropped,
    ),
    Known(
        "victim-preempted-twice",
        "yunikorn-core 1.5.2 may choose as a victim an allocation it has already preempted (still "
        "held until the RM releases it) for a second preemptor; evsched never chooses one twice "
        "(deliberate, docs/semantics.md#differences-from-yunikorn)",
        "deliberate (docs/semantics.md)",
        may_preempt,
        explains=victim_picked_twice,
        profiles=V15,
    ),
    Known(
        "foreign-allocation-node-order",
        "yunikorn-core 1.9 records what other schedulers' pods use (evsched's occupied) as foreign "
        "allocations, and node.go:addAllocationInternal notifies no listener for a foreign one "
        "(UpdateForeignAllocation none at all), so the partition's sorted node collection keeps the "
        "node at its score from before (node_collection.go:NodeUpdated never runs) until the node's "
        "next own allocation, release or capacity change; evsched orders nodes by what they have "
        "free now (deliberate, docs/semantics.md#yunikorn-19)",
        "deliberate (docs/semantics.md)",
        lambda lines: bool(_occupied_lines(lines)),
        occupied_dropped,
        profiles=V19,
    ),
)

# Families whose every scenario has a known difference's feature: left out of the test
# sample (and of `make conformance` unless asked) with the reason printed.
KNOWN: dict[str, str] = {}


def encode(lines: Lines) -> bytes:
    return b"".join(json.dumps(line, separators=(",", ":")).encode() + b"\n" for line in lines)


Outcomes = Callable[[bytes], tuple[Outcome, list[Outcome]]]


def _explained(lines: Lines, knowns: list[Known], outcomes: Outcomes,
               base: tuple[Outcome, list[Outcome]]) -> bool:
    """Both sides agree once these knowns' features are taken out of the scenario (re-run) and
    their traces out of the outcomes."""
    scenario = lines
    for k in knowns:
        if k.without is not None:
            scenario = k.without(scenario)
    ours, theirs = outcomes(encode(scenario)) if scenario != lines else base
    for k in knowns:
        if k.normalise is not None:
            ours, theirs = k.normalise(scenario, ours), [k.normalise(scenario, t) for t in theirs]
    return any(first_difference(ours, t) is None for t in theirs)


def classify(scenario: bytes, outcomes: Outcomes) -> Known | None:
    """The known difference that explains the scenario's disagreement, or None.

    ``outcomes(scenario)`` runs both sides (evsched's outcome, yunikorn's distinct ones). A
    known difference explains it when the scenario has its feature and the two agree once
    that feature (or, failing that, every known feature it has) is taken out: out of the
    scenario (``without``: re-run) or out of both outcomes (``normalise``).
    """
    lines = [json.loads(raw) for raw in scenario.splitlines() if raw.strip()]
    profile = profile_in_use()
    present = [k for k in KNOWN_DIFFERENCES if profile in k.profiles and k.shows(lines)]
    if not present:
        return None
    base = outcomes(scenario)
    for k in present:  # shown in yunikorn's own outcome
        if k.explains is not None and any(k.explains(base[0], t) for t in base[1]):
            return k
    present = [k for k in present if k.explains is None]
    for k in present:  # one feature explains it alone
        if _explained(lines, [k], outcomes, base):
            return k
    return present[0] if len(present) > 1 and _explained(lines, present, outcomes, base) else None
