"""Known differences between evsched and yunikorn-core v1.5.2, each with its cause and a test.

``classify`` names the known difference a disagreeing scenario shows: the scenario has the
feature the difference needs, and the same scenario with that feature taken out (fair
leaves made fifo; required nodes dropped) agrees. Otherwise the difference is new (None). docs/conformance.md
keeps the same table with the minimal scenarios; remove an entry once evsched is fixed
and ``make conformance`` agrees on its scenarios.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Lines = list[dict[str, Any]]


@dataclass(frozen=True)
class Known:
    """A documented difference: an id, its cause, where it goes, the feature it needs and its removal."""

    key: str
    cause: str
    route: str
    shows: Callable[[Lines], bool]
    without: Callable[[Lines], Lines]


def _queues(lines: Lines) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """Every configured queue with its properties after inheritance (all but the priority ones)."""
    found: list[tuple[dict[str, Any], dict[str, str]]] = []

    def walk(q: dict[str, Any], inherited: dict[str, str]) -> None:
        own = dict(q.get("properties") or {})
        props = {**{k: v for k, v in inherited.items() if not k.startswith("priority.")}, **own}
        found.append((q, props))
        for child in q.get("queues") or []:
            walk(child, props)

    for line in lines:
        if line.get("type") == "config.updated":
            conf = json.loads(line["data"]["yaml"])
            for part in conf.get("partitions", []):
                for q in part.get("queues", []):
                    walk(q, {})
    return found


def fair_leaf_without_priority(lines: Lines) -> bool:
    """A fair leaf whose application sorting ignores priority (own or inherited property)."""
    return any(not q.get("queues") and props.get("application.sort.policy") == "fair"
               and props.get("application.sort.priority", "").lower() == "disabled"
               for q, props in _queues(lines))


def unknown_required_node(lines: Lines) -> bool:
    """An ask whose required node has not been added when the ask arrives."""
    nodes: set[str] = set()
    for line in lines:
        data = line.get("data") or {}
        if line.get("type") == "node.added":
            nodes.add(data["node_id"])
        elif line.get("type") == "ask.added" and data.get("required_node", next(iter(nodes), "")) not in nodes:
            return True
    return False


def required_node_ask(lines: Lines) -> bool:
    """An ask with a required node."""
    return any(line.get("type") == "ask.added" and (line.get("data") or {}).get("required_node")
               for line in lines)


def _with_config(lines: Lines, edit: Callable[[dict[str, Any], dict[str, str]], None]) -> Lines:
    """The lines with ``edit(queue, effective properties)`` applied to every configured queue."""
    out: Lines = []
    for line in lines:
        if line.get("type") != "config.updated":
            out.append(line)
            continue
        conf = json.loads(line["data"]["yaml"])
        for part in conf.get("partitions", []):
            stack: list[tuple[dict[str, Any], dict[str, str]]] = [(q, {}) for q in part.get("queues", [])]
            while stack:
                q, inherited = stack.pop()
                props = {**{k: v for k, v in inherited.items() if not k.startswith("priority.")},
                         **(q.get("properties") or {})}
                edit(q, props)
                stack.extend((c, props) for c in q.get("queues") or [])
        out.append({"type": "config.updated", "data": {"yaml": json.dumps(conf)}})
    return out


def fair_leaves_made_fifo(lines: Lines) -> Lines:
    """The fair leaves that ignore priority become fifo leaves."""
    def edit(q: dict[str, Any], props: dict[str, str]) -> None:
        if not q.get("queues") and props.get("application.sort.policy") == "fair" \
                and props.get("application.sort.priority", "").lower() == "disabled":
            q.setdefault("properties", {})["application.sort.policy"] = "fifo"
    return _with_config(lines, edit)


def unknown_required_nodes_dropped(lines: Lines) -> Lines:
    """No ask names a required node that is not added yet when the ask arrives."""
    nodes: set[str] = set()
    out: Lines = []
    for line in lines:
        data = line.get("data") or {}
        if line.get("type") == "node.added":
            nodes.add(data["node_id"])
        if line.get("type") == "ask.added" and "required_node" in data and data["required_node"] not in nodes:
            line = {**line, "data": {k: v for k, v in data.items() if k != "required_node"}}
        out.append(line)
    return out


def required_nodes_dropped(lines: Lines) -> Lines:
    """No ask has a required node."""
    return [{**line, "data": {k: v for k, v in line["data"].items() if k != "required_node"}}
            if line.get("type") == "ask.added" else line for line in lines]


KNOWN_DIFFERENCES: tuple[Known, ...] = (
    Known(
        "required-node-unknown",
        "an ask whose required node is not (yet) known: yunikorn-core ends the app's turn there "
        "(Application.tryAllocate returns nil: 'required node is not found (could be transient)'), "
        "so none of the app's lower asks is tried; evsched skips that ask and goes on",
        "issue 16 (required nodes)",
        unknown_required_node,
        unknown_required_nodes_dropped,
    ),
    Known(
        "fair-unprioritised-app-order",
        "a fair leaf with application.sort.priority disabled: yunikorn-core sorts apps by usage "
        "share, then by app priority (sortApplicationsByFairnessAndPriority); evsched breaks "
        "usage-share ties by submission time before priority",
        "issue 16 (fair + priority-disabled app order)",
        fair_leaf_without_priority,
        fair_leaves_made_fifo,
    ),
    Known(
        "required-node-reservation",
        "an ask whose required node it does not fit: yunikorn-core reserves that node for it and "
        "ends the app's turn at that ask on every step (Application.tryAllocate returns the "
        "reservation), so the app's lower asks wait; evsched makes no reservation and goes on "
        "to the app's next ask",
        "issue 16 (reservations)",
        required_node_ask,
        required_nodes_dropped,
    ),
)

# Families whose every scenario has a known difference's feature: left out of the test
# sample (and of `make conformance` unless asked) with the reason printed.
KNOWN: dict[str, str] = {
    "required-nodes": "required-node-reservation, required-node-unknown",
}


def encode(lines: Lines) -> bytes:
    return b"".join(json.dumps(line, separators=(",", ":")).encode() + b"\n" for line in lines)


def classify(scenario: bytes, agree: Callable[[bytes], bool]) -> Known | None:
    """The known difference that explains the scenario's disagreement, or None.

    ``agree(scenario)`` runs both sides; a known difference explains it when the scenario
    has its feature and agrees once that feature (or, failing that, every known feature
    it has) is taken out.
    """
    lines = [json.loads(raw) for raw in scenario.splitlines() if raw.strip()]
    present = [k for k in KNOWN_DIFFERENCES if k.shows(lines)]
    for k in present:  # one feature explains it alone
        if agree(encode(k.without(lines))):
            return k
    neutral = lines
    for k in present:  # several together
        neutral = k.without(neutral)
    return present[0] if present and agree(encode(neutral)) else None
