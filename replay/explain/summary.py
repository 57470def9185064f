"""The one-paragraph summary of a decision explanation, built from its sections.

It reads like: "Ask t1 of app a went to node n2 because queue root.a (priority 8 = offset
5 + 3) was first under root, ahead of root.b: higher priority (8 vs 6); app a was first
in root.a (…); t1 was its first ask (…); n2 was the least used node that fit (score 0.31)."
"""

from __future__ import annotations

from typing import Any

from replay.explain.format import fmt_share, ordinal


def _queue_desc(entry: dict[str, Any], priority_sorting: bool) -> str:
    prio = f"priority {entry['priority_formula']}"
    if priority_sorting:
        return prio
    return f"fair share {fmt_share(entry['fair_share'])}, {prio}"


def _skipped(entries: list[dict[str, Any]], noun: str) -> str:
    """`` (x, y sorted earlier but could not allocate: <first reason>)``, or nothing."""
    skipped = [e for e in entries if e["outcome"] in ("skipped", "passed over")]
    if not skipped:
        return ""
    first = skipped[0]
    names = ", ".join(str(e[noun]) for e in skipped[:3]) + (" …" if len(skipped) > 3 else "")
    why = first["why_not"]["message"] if first.get("why_not") else "it could not allocate"
    return f" ({names} sorted earlier but could not allocate: {why})"


def _first(kind: str, where: str, entries: list[dict[str, Any]]) -> str:
    """``was first in X`` — or, when earlier candidates failed, the first that could allocate."""
    if any(e["outcome"] == "skipped" for e in entries):
        return f"was the first {kind} {where} that could allocate"
    return f"was first {where}"


def queue_clause(level: dict[str, Any]) -> str:
    """``queue root.a (priority 8 = offset 5 + 3) was first under root, ahead of root.b: …``."""
    entries = level["candidates"]
    chosen = next(e for e in entries if e["outcome"] == "chosen")
    sorting = level["priority_sorting"]
    where = f"under {level['parent']}"
    text = f"queue {chosen['queue']} ({_queue_desc(chosen, sorting)}) {_first('queue', where, entries)}"
    text += _skipped(entries, "queue")
    later = [e for e in entries if e["position"] == chosen["position"] + 1]
    if later:
        text += f", ahead of {later[0]['queue']} ({_queue_desc(later[0], sorting)}): {level['deciding_factor']}"
    elif chosen["position"] == 1 and level["deciding_factor"]:
        text += f" ({level['deciding_factor']})"
    return text


def leaf_clause(leaf: dict[str, Any], app_id: str) -> str:
    """``app a was first in root.a (fifo order, priority sorting on): …``."""
    order = f"{leaf['sort_policy']} order, priority sorting {'on' if leaf['priority_sorting'] else 'off'}"
    text = f"app {app_id} {_first('app', 'in ' + leaf['queue'], leaf['apps'])} ({order})"
    text += _skipped(leaf["apps"], "app_id")
    factor = leaf["deciding_factor"]
    if factor and not factor.startswith("every app"):  # that one is what the skipped clause says
        text += f": {factor}"
    return text


def ask_clause(asks: dict[str, Any], ask_id: str) -> str:
    """``ask t1 was its 1st ask (priority 5, created …)``."""
    entry = next(e for e in asks["asks"] if e["ask_id"] == ask_id)
    text = (
        f"ask {ask_id} was its {ordinal(entry['position'])} ask in order "
        f"(priority {entry['priority']}, created {entry['created']}; order: {asks['order_rule']})"
    )
    return text + _skipped(asks["asks"], "ask_id")


def node_clause(nodes: dict[str, Any], node_id: str) -> str:
    """``n2 was the least used node that fit (score 0.31)``."""
    entry = next((e for e in nodes["nodes"] if e["outcome"] == "chosen"), None)
    if nodes["required_node"] is not None:
        return f"{node_id} is the ask's required node and had room"
    which = "least" if nodes["policy"] == "fair" else "most"
    score = f" (score {entry['usage_score']:.4g})" if entry else ""
    text = f"{node_id} was the {which} used node that fit{score} under the {nodes['policy']} node sort policy"
    rank = nodes["winner_rank"] or 1
    if rank > 1:
        passed = [e["node_id"] for e in nodes["nodes"] if e["outcome"] == "passed over"]
        names = f" ({', '.join(passed)})" if rank <= 4 else ""
        text += f"; {'the node' if rank == 2 else f'the {rank - 1} nodes'} before it in order{names} did not fit"
    runner = next((e for e in nodes["nodes"] if e["outcome"].startswith("runner-up")), None)
    if entry is not None and runner is not None:
        if runner["sort_key"] == entry["sort_key"]:
            text += f"; it tied with {runner['node_id']} on score and the lower node id wins"
        else:
            text += f"; next that fit was {runner['node_id']} (score {runner['usage_score']:.4g})"
    return text


def summary(
    chosen: dict[str, str] | None,
    levels: list[dict[str, Any]],
    leaf: dict[str, Any] | None,
    asks: dict[str, Any] | None,
    nodes: dict[str, Any] | None,
    problems: list[str],
) -> str:
    """The paragraph; problems (a mismatch with the engine or the log) come first, loudly."""
    warn = "".join(f"WARNING: {p}. " for p in problems)
    if chosen is None or leaf is None or asks is None or nodes is None:
        why = levels[0]["candidates"] if levels else []
        reasons = "; ".join(e["why_not"]["message"] for e in why if e.get("why_not"))
        return warn + "The re-walk found nothing to allocate at this step" + (f": {reasons}." if reasons else ".")
    clauses = [queue_clause(level) for level in levels]
    clauses.append(leaf_clause(leaf, chosen["app_id"]))
    clauses.append(ask_clause(asks, chosen["ask_id"]))
    clauses.append(node_clause(nodes, chosen["node_id"]))
    head = f"Ask {chosen['ask_id']} of app {chosen['app_id']} went to node {chosen['node_id']} because "
    return warn + head + "; ".join(clauses) + "."
