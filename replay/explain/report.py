"""Explanation sections: the explaining walk turned into JSON-ready queue, app, ask and node reports.

Each section lists the candidates in the order the step saw them, with the values the
order was decided on and, for everything passed over, the ``Blocker`` (rule + culprit).
``deciding_*`` functions name the first sort key that separates the winner from the
runner-up, which is what the summary sentence quotes.
"""

from __future__ import annotations

from typing import Any

from events.resources import dominates, normalized
from projections.policies import NodeSortPolicy, usage_score
from replay.explain.format import (
    RULE_APP_SORT,
    RULE_ASK_SORT,
    RULE_NODE_FIT,
    RULE_NODE_SORT,
    RULE_QUEUE_SORT,
    SHOW_ITEMS,
    SHOW_NODES,
    fmt_priority,
    fmt_share,
    fmt_shortfall,
    fmt_time,
    jsonable,
    priority_formula,
    share_list,
    shortfall,
)
from replay.explain.walk import AppTry, AskTry, QueueTry
from scheduler.core.constrained_nodes import node_excludes
from scheduler.core.objects import App, Ask, Node
from scheduler.core.partition import PartitionState
from scheduler.core.queues import QueueNode

QUEUE_ORDER_ENABLED = "priority desc, then fair share asc, then more pending first, then config order"
QUEUE_ORDER_DISABLED = "fair share asc, then priority desc, then more pending first, then config order"
ASK_ORDER = "priority desc, then creation time asc, then arrival order"

# Names of the components of ``app_sort_key`` per (policy, priority sorting), in key order.
_APP_KEY_NAMES = {
    ("fair", True): ["priority", "usage share", "submission time", "arrival order"],
    ("fair", False): ["usage share", "submission time", "priority", "arrival order"],
    ("fifo", True): ["priority", "submission time", "arrival order"],
    ("fifo", False): ["submission time", "priority", "arrival order"],
}


def app_key_names(leaf: QueueNode) -> list[str]:
    """What each component of the leaf's app sort key means (stateaware sorts as fifo)."""
    policy = "fair" if leaf.app_sort_policy == "fair" else "fifo"
    return _APP_KEY_NAMES[(policy, leaf.sort_priority)]


def _outcome(tried: QueueTry | AppTry | AskTry | None, chosen: bool, passed: str) -> tuple[str, dict[str, str] | None]:
    """A candidate's outcome and its blocker: chosen, ``passed`` (tried and failed), or not reached."""
    if chosen:
        return "chosen", None
    if tried is not None:
        return passed, tried.why_not.as_dict() if tried.why_not else None
    return "not reached", None


def ask_dict(ask: Ask) -> dict[str, Any]:
    """An ask's place-deciding values: priority, creation time, resources, required node."""
    return {
        "priority": ask.priority,
        "created": fmt_time(ask.created_us),
        "resources": normalized(ask.resources),
        "required_node": ask.required_node,
    }


def queue_entry(q: QueueNode, position: int, outcome: str, why_not: dict[str, str] | None) -> dict[str, Any]:
    """One candidate child queue with everything its place in the order depends on."""
    return {
        "queue": q.path,
        "position": position,
        "priority": q.priority,
        "raw_priority": q.raw_priority,
        "offset": q.offset,
        "fence": q.fence,
        "priority_formula": priority_formula(q),
        "fair_share": share_list(q.fair_share()),
        "pending": normalized(q.pending),
        "allocated": normalized(q.allocated),
        "guaranteed": normalized(q.guaranteed),
        "max": normalized(q.max),
        "outcome": outcome,
        "why_not": why_not,
    }


def deciding_queue(chosen: QueueNode, other: QueueNode, sort_priority: bool) -> str:
    """Why ``chosen`` sorts before ``other`` under a parent (docs/semantics.md#queues)."""
    cs, os_ = chosen.fair_share(), other.fair_share()
    prio = f"{fmt_priority(chosen.priority)} vs {fmt_priority(other.priority)}"
    share = f"{fmt_share(cs)} vs {fmt_share(os_)}"
    if sort_priority:
        if chosen.priority != other.priority:
            return f"higher priority ({prio})"
        if cs != os_:
            return f"equal priority, lower fair share ({share})"
    else:
        if cs != os_:
            despite = f", despite lower priority ({prio})" if chosen.priority < other.priority else ""
            why = "application.sort.priority is disabled, so fair share comes first"
            return f"lower fair share ({share}){despite}: {why}"
        if chosen.priority != other.priority:
            return f"equal fair share, higher priority ({prio})"
    if dominates(chosen.pending, other.pending):
        return "equal priority and fair share, more pending"
    return "equal priority and fair share, earlier in configuration order"


def queue_levels(root: QueueTry) -> list[dict[str, Any]]:
    """The walk from root down the chosen path: each parent's sorted candidate children."""
    levels: list[dict[str, Any]] = []
    node = root
    while not node.queue.is_leaf:
        parent = node.queue
        tried = {t.queue.path: t for t in node.children}
        chosen = node.children[-1] if node.choice is not None and node.children else None
        entries = []
        for i, q in enumerate(node.order):
            t = tried.get(q.path)
            outcome, why = _outcome(t, t is not None and t is chosen, "skipped")
            if i < SHOW_ITEMS or outcome != "not reached":
                entries.append(queue_entry(q, i + 1, outcome, why))
        level: dict[str, Any] = {
            "parent": parent.path,
            "priority_sorting": parent.sort_priority,
            "order_rule": QUEUE_ORDER_ENABLED if parent.sort_priority else QUEUE_ORDER_DISABLED,
            "rule": RULE_QUEUE_SORT,
            "candidates": entries,
            "not_shown": max(0, len(node.order) - len(entries)),
            "chosen": chosen.queue.path if chosen else None,
            "deciding_factor": None,
        }
        if chosen is not None:
            i = node.order.index(chosen.queue)
            if i + 1 < len(node.order):
                level["deciding_factor"] = deciding_queue(chosen.queue, node.order[i + 1], parent.sort_priority)
            elif i == 0:
                level["deciding_factor"] = "the only child queue with pending resources"
            else:
                level["deciding_factor"] = "every queue sorted before it was skipped"
        levels.append(level)
        if chosen is None:
            break
        node = chosen
    return levels


def leaf_of(root: QueueTry) -> QueueTry | None:
    """The leaf the walk ended in (None when nothing was chosen)."""
    node = root
    while not node.queue.is_leaf:
        if node.choice is None or not node.children:
            return None
        node = node.children[-1]
    return node


def deciding_app(leaf: QueueNode, chosen: App, other: App) -> str:
    """The first sort-key component that puts ``chosen`` before ``other`` in the leaf."""
    names = app_key_names(leaf)
    a, b = chosen.sort_key or (), other.sort_key or ()
    for name, x, y in zip(names, a, b, strict=False):
        if x != y:
            if name == "priority":
                return f"higher priority ({chosen.priority} vs {other.priority})"
            if name == "submission time":
                return f"submitted earlier ({fmt_time(chosen.submit_us)} vs {fmt_time(other.submit_us)})"
            if name == "usage share":
                return f"lower usage share ({jsonable(x)} vs {jsonable(y)})"
            return "earlier arrival in the log"
    return "earlier arrival in the log"


def leaf_section(leaf: QueueTry) -> dict[str, Any]:
    """The leaf's apps in order, with sort keys, state and why each tried app was skipped."""
    q = leaf.queue
    tried = {t.app.app_id: t for t in leaf.app_tries}
    chosen = leaf.app_tries[-1].app if leaf.choice is not None else None
    apps = []
    for i, app in enumerate(leaf.apps):
        t = tried.get(app.app_id)
        outcome, why = _outcome(t, app is chosen, "skipped")
        if i < SHOW_ITEMS or outcome != "not reached":
            apps.append(
                {
                    "app_id": app.app_id,
                    "position": i + 1,
                    "state": app.state,
                    "priority": app.priority,
                    "submitted": fmt_time(app.submit_us),
                    "sort_key": jsonable(app.sort_key),
                    "pending": normalized(app.pending),
                    "allocated": normalized(app.allocated),
                    "outcome": outcome,
                    "why_not": why,
                }
            )
    factor = None
    if chosen is not None:
        i = leaf.apps.index(chosen)
        if i + 1 < len(leaf.apps):
            factor = deciding_app(q, chosen, leaf.apps[i + 1])
        elif i == 0:
            factor = "the only app with pending asks"
        else:
            factor = "every app sorted before it was skipped"
    return {
        "queue": q.path,
        "sort_policy": q.app_sort_policy,
        "priority_sorting": q.sort_priority,
        "sort_key": app_key_names(q),
        "sort_key_order": "ascending; priority is negated so that higher priority sorts first",
        "rule": RULE_APP_SORT,
        "stateaware_allowed": sorted(leaf.allowed) if leaf.allowed is not None else None,
        "apps": apps,
        "not_shown": max(0, len(leaf.apps) - len(apps)),
        "chosen": chosen.app_id if chosen else None,
        "deciding_factor": factor,
    }


def ask_section(attempt: AppTry) -> dict[str, Any]:
    """The chosen app's asks in order: those tried before the winner and why they failed."""
    tried = {t.ask.ask_id: t for t in attempt.asks}
    asks = []
    for i, ask in enumerate(attempt.app.sorted_asks):
        t = tried.get(ask.ask_id)
        outcome, why = _outcome(t, t is not None and t.node is not None, "passed over")
        if i < SHOW_ITEMS or outcome != "not reached":
            asks.append(
                {"ask_id": ask.ask_id, "position": i + 1, **ask_dict(ask), "outcome": outcome, "why_not": why}
            )
    return {"app_id": attempt.app.app_id, "order_rule": ASK_ORDER, "rule": RULE_ASK_SORT, "asks": asks}


def _node_entry(part: PartitionState, node: Node, rank: int | None, outcome: str, why: str | None) -> dict[str, Any]:
    available = node.available()
    return {
        "node_id": node.node_id,
        "rank": rank,
        "usage_score": round(usage_score(node.capacity, available, part.index.weights), 6),
        "sort_key": round(part.index.key_of(node.capacity, available), 6),
        "capacity": normalized(node.capacity),
        "available": normalized(available),
        "outcome": outcome,
        "why_not": {"rule": RULE_NODE_FIT, "message": why} if why else None,
    }


def node_section(part: PartitionState, ask: Ask) -> tuple[dict[str, Any], str | None]:
    """Nodes in index order up to the first that fits; returns the section and that node's id.

    The scan is this module's own (not ``NodeIndex.first_fit``) so the explanation checks
    the index rather than repeating it. Only the first ``SHOW_NODES`` and the winner are
    listed; the rest passed over are counted by reason.
    """
    unschedulable = sorted(n for n, node in part.nodes.items() if not node.schedulable)
    section: dict[str, Any] = {
        "policy": part.index.policy.value,
        "weights": dict(sorted(part.index.weights.items())),
        "order_rule": "usage score asc (least used first), then node id"
        if part.index.policy is NodeSortPolicy.FAIR
        else "1 − usage score asc (most used first), then node id",
        "rule": RULE_NODE_SORT,
        "schedulable": len(part.index),
        "unschedulable": unschedulable[:SHOW_NODES],
        "unschedulable_count": len(unschedulable),
        "required_node": ask.required_node,
        "nodes": [],
        "passed_over_not_shown": 0,
        "passed_over_reasons": {},
        "winner_rank": None,
    }
    if ask.required_node is not None:
        node = part.nodes.get(ask.required_node)
        if node is not None:
            short = shortfall(ask.resources, node.available())
            excluded = node_excludes(ask.constraints, node) if ask.constraints is not None else None
            fit = node.schedulable and not short and excluded is None
            why = None
            if not fit:
                why = "unschedulable" if not node.schedulable else (
                    excluded if excluded is not None else "does not fit: " + fmt_shortfall(short))
            section["nodes"].append(_node_entry(part, node, None, "chosen" if fit else "passed over", why))
            return section, node.node_id if fit else None
        return section, None
    reasons: dict[str, int] = {}
    winner: str | None = None
    for rank, node_id in enumerate(part.index.ordered(), start=1):
        node = part.nodes[node_id]
        short = shortfall(ask.resources, node.available())
        excluded = node_excludes(ask.constraints, node) if ask.constraints is not None and not short else None
        if winner is not None:
            # the runner-up: what the winner beat (on score, or on node id when tied)
            if not short and excluded is None:
                section["nodes"].append(_node_entry(part, node, rank, "runner-up (fits, not reached)", None))
                break
            continue
        if not short and excluded is None:
            section["nodes"].append(_node_entry(part, node, rank, "chosen", None))
            section["winner_rank"] = rank
            winner = node_id
            continue
        why = excluded if excluded is not None else "does not fit: " + fmt_shortfall(short)
        if rank <= SHOW_NODES:
            section["nodes"].append(_node_entry(part, node, rank, "passed over", why))
        else:
            section["passed_over_not_shown"] += 1
            key = excluded if excluded is not None else \
                "does not fit: " + ", ".join(f"{name} short" for name in short)
            reasons[key] = reasons.get(key, 0) + 1
    section["passed_over_reasons"] = dict(sorted(reasons.items()))
    return section, winner
