"""Shared vocabulary of explanations: the rules they cite (docs/semantics.md sections) and value formatting.

Every reason an explanation gives carries one of the ``RULE_*`` names, so a reader can look
the rule up in docs/semantics.md (the part after ``#`` is the section's anchor). Formatting helpers turn resources,
priorities, fair shares and times into the short phrases the summaries use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from events.times import format_time
from events.units import fmt_quantity, fmt_resources
from projections.priority import MIN_PRIORITY
from scheduler.core.queues import QueueNode

RULE_QUEUE_SORT = "docs/semantics.md#queues"
RULE_APP_SORT = "docs/semantics.md#apps-in-a-leaf"
RULE_STATEAWARE = "docs/semantics.md#stateaware"
RULE_ASK_SORT = "docs/semantics.md#asks-in-an-app"
RULE_NODE_SORT = "docs/semantics.md#nodes"
RULE_NODE_CONSTRAINTS = "docs/semantics.md#node-constraints"
RULE_NODE_FIT = "docs/semantics.md#choosing-a-node"
RULE_QUEUE_MAX = "docs/semantics.md#queue-max"
RULE_ROOT_MAX = "docs/semantics.md#queue-max (root: the sum of node capacities)"
RULE_MAX_APPS = "docs/semantics.md#maxapplications"
RULE_USER_LIMIT = "docs/semantics.md#user-and-group-limits"
RULE_STEP = "docs/semantics.md#one-allocation-step"
RULE_RESERVATION = "docs/semantics.md#reservations"
RULE_BACKOFF = "docs/semantics.md#yunikorn-19 (unschedulable-ask backoff)"
RULE_QUOTA_PREEMPTION = "docs/semantics.md#yunikorn-19 (quota preemption)"

# Explanations list at most this many nodes, apps and queues in order; the rest are counted.
SHOW_NODES = 10
SHOW_ITEMS = 20


@dataclass(frozen=True)
class Blocker:
    """Why something was passed over: the rule (a docs/semantics.md section) and a sentence naming the culprit."""

    rule: str
    message: str

    def as_dict(self) -> dict[str, str]:
        """JSON form."""
        return {"rule": self.rule, "message": self.message}


def fmt_res(res: Mapping[str, int], *, raw: bool = False) -> str:
    """``{vcore: 1000, memory: 2**30}`` → ``memory 1 GiB, vcore 1 core`` (``events.units``; ``raw``: exact)."""
    return fmt_resources(res, raw=raw)


def fmt_priority(value: int) -> str:
    """A priority, with MinPriority spelled out."""
    return "none (nothing pending)" if value == MIN_PRIORITY else str(value)


def fmt_share(share: Sequence[float]) -> str:
    """A fair-share vector (largest component first) as text; ``0`` when nothing is allocated."""
    return "(" + ", ".join(f"{x:.4g}" for x in share) + ")" if share else "0"


def fmt_time(us: int) -> str:
    """Microseconds since the epoch as RFC 3339."""
    return format_time(us)


def share_list(share: Sequence[float]) -> list[float]:
    """A fair-share vector for JSON, rounded so goldens do not depend on float noise."""
    return [round(x, 6) for x in share]


def priority_formula(q: QueueNode) -> str:
    """How a queue's priority came about (docs/semantics.md#queue-priority: adjusted value).

    ``8 = offset 5 + 3``, ``100 = fenced at offset 100, raw 0 ignored``, ``3`` or
    ``none (nothing pending)``.
    """
    if q.raw_priority == MIN_PRIORITY:
        return fmt_priority(MIN_PRIORITY)
    if q.parent is None:
        return str(q.priority)
    if q.fence:
        return f"{q.priority} = fenced at offset {q.offset}, raw {q.raw_priority} ignored"
    if q.offset:
        return f"{q.priority} = offset {q.offset} + {q.raw_priority}"
    return str(q.priority)


def shortfall(request: Mapping[str, int], available: Mapping[str, int]) -> dict[str, tuple[int, int]]:
    """Per requested type that does not fit: (needed, available)."""
    return {
        name: (qty, available.get(name, 0))
        for name, qty in sorted(request.items())
        if qty > 0 and qty > available.get(name, 0)
    }


def fmt_shortfall(short: Mapping[str, tuple[int, int]]) -> str:
    """``vcore short: needs 2 cores, has 1500m`` for each short type (human units; JSON fields stay exact)."""
    return "; ".join(
        f"{name} short: needs {fmt_quantity(name, need)}, has {fmt_quantity(name, have)}"
        for name, (need, have) in short.items()
    )


def ordinal(n: int) -> str:
    """1 → 1st, 2 → 2nd, 11 → 11th."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def jsonable(value: object) -> object:
    """Sort keys (tuples, possibly nested, floats) in a JSON-friendly, stable form."""
    if isinstance(value, tuple | list):
        return [jsonable(v) for v in value]
    if isinstance(value, float):
        return round(value, 6)
    return value
