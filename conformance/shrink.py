"""Shrinks a disagreeing scenario to a minimal one that still disagrees (greedy line removal).

The config line stays; every other line is dropped when the two sides still disagree
without it, until no single line can go. The result is what the minimal-repro files under
``make conformance``'s output directory hold (``*.min.jsonl``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from conformance.compare import evsched_output, first_difference, parse_outcome


def disagreement(harness_output: Callable[[bytes], bytes], scenario: bytes) -> str | None:
    """The first difference of the two sides on ``scenario`` (None: they agree)."""
    theirs = parse_outcome(harness_output(scenario))
    return first_difference(parse_outcome(evsched_output(scenario)), theirs)


def dangling(lines: list[bytes]) -> int:
    """How many lines name an app, or a required node, not added on an earlier line.

    Shrinking may not add any, so it cannot trade the difference under study for one
    about unknown names (yunikorn-core ends an app's turn at a required node it does not
    know; a scenario generated with such a node keeps it).
    """
    nodes: set[str] = set()
    apps: set[str] = set()
    count = 0
    for raw in lines:
        obj = json.loads(raw)
        data = obj.get("data") or {}
        kind = obj.get("type")
        if kind == "node.added":
            nodes.add(data["node_id"])
        elif kind == "app.added":
            apps.add(data["app_id"])
        elif kind in ("ask.added", "ask.removed", "allocation.released", "app.removed"):
            count += data.get("app_id") not in apps
            count += "required_node" in data and data["required_node"] not in nodes
    return count


def shrink(harness_output: Callable[[bytes], bytes], scenario: bytes) -> tuple[bytes, str]:
    """A minimal scenario that still disagrees, and its first difference."""
    lines = scenario.splitlines(keepends=True)
    found = disagreement(harness_output, scenario)
    allowed = dangling(lines)
    if found is None:
        raise ValueError("the scenario does not disagree")
    changed = True
    while changed:
        changed = False
        i = len(lines) - 1
        while i >= 1:
            trial = lines[:i] + lines[i + 1:]
            if dangling(trial) > allowed:
                i -= 1
                continue
            diff = disagreement(harness_output, b"".join(trial))
            if diff is not None and not diff.startswith("config rejected"):
                lines, found, changed = trial, diff, True
            i -= 1
    return b"".join(lines), found


def write_minimal(harness_output: Callable[[bytes], bytes], path: Path) -> tuple[Path, str]:
    """Shrink the scenario at ``path`` into ``path``'s ``.min.jsonl`` sibling."""
    small, diff = shrink(harness_output, path.read_bytes())
    target = path.with_name(path.name.removesuffix(".jsonl") + ".min.jsonl")
    target.write_bytes(small)
    return target, diff
