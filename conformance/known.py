"""Known differences between evsched and yunikorn-core v1.5.2, each with its cause and a test.

``classify`` names the known difference a disagreeing scenario shows: the scenario has the
feature the difference needs, and the same scenario with that feature taken out (required
nodes dropped) agrees. Otherwise the difference is new (None). docs/conformance.md
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


def required_node_ask(lines: Lines) -> bool:
    """An ask with a required node."""
    return any(line.get("type") == "ask.added" and (line.get("data") or {}).get("required_node")
               for line in lines)


def required_nodes_dropped(lines: Lines) -> Lines:
    """No ask has a required node."""
    return [{**line, "data": {k: v for k, v in line["data"].items() if k != "required_node"}}
            if line.get("type") == "ask.added" else line for line in lines]


KNOWN_DIFFERENCES: tuple[Known, ...] = (
    Known(
        "required-node-too-small",
        "an ask whose required node's capacity could never hold it: yunikorn-core 1.5 returns a "
        "reservation of that node on every step, the reservation fails (Node.Reserve needs the "
        "capacity) and the whole step ends, so nothing walked after that app is scheduled; "
        "evsched ends only that app's turn (deliberate, docs/semantics.md#differences-from-yunikorn)",
        "deliberate (docs/semantics.md)",
        required_node_ask,
        required_nodes_dropped,
    ),
)

# Families whose every scenario has a known difference's feature: left out of the test
# sample (and of `make conformance` unless asked) with the reason printed.
KNOWN: dict[str, str] = {}


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
