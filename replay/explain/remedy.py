"""What would let a pending ask run: for each thing holding it, the smallest change that would lift it.

Borg answers "why pending?" with guidance on how to change the request; this does that and
more, against the state after a cycle (read only): for a queue's max, the new max (or how
much to release in that queue); for maxapplications, the new limit; for "no node fits", the
one allocation on the nearest node whose release makes room, and the node to add when no
node could ever hold it; for both, the smallest shrink of the ask that fits every max and
some node now; for a reservation, what its node must free. Each remedy names
the rule of the reason it answers; every reason must go before the ask runs, so a remedy
lifts its own reason only. Amounts are exact integers (``change``) with human text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from events.resources import Resources
from replay.explain import format as doc  # ``doc.RULE_*``: the rule each remedy lifts
from replay.explain.format import fmt_res, shortfall
from scheduler.core.objects import Allocation, App, Ask, Node
from scheduler.core.partition import PartitionState

Remedy = dict[str, Any]


def _remedy(kind: str, rule: str, message: str, **change: Any) -> Remedy:
    return {"kind": kind, "rule": rule, "message": message, "change": change}


def _missing(short: Mapping[str, tuple[int, int]]) -> Resources:
    return {name: need - have for name, (need, have) in short.items()}


def headroom_room(part: PartitionState, app: App, request: Resources) -> Resources:
    """Per requested type, the most an ask of the app could take under every max on the way up (root: the cluster)."""
    room: dict[str, int] = {}
    for q in app.queue.ancestry():
        limits = part.cluster_capacity if q.parent is None else q.max
        for name in request:
            if q.parent is None or name in limits:
                left = limits.get(name, 0) - q.allocated.get(name, 0)
                room[name] = min(room.get(name, left), left)
    return room


def headroom_remedies(part: PartitionState, app: App, request: Resources) -> list[Remedy]:
    """Every queue up the tree whose ``max − allocated`` cannot take the request: raise it, or release in it."""
    out: list[Remedy] = []
    for q in app.queue.ancestry():
        limits = part.cluster_capacity if q.parent is None else q.max
        if q.parent is not None and not limits:
            continue
        over: Resources = {}
        for name, qty in sorted(request.items()):
            if q.parent is not None and name not in limits:
                continue
            used, limit = q.allocated.get(name, 0), limits.get(name, 0)
            if used + qty > limit:
                over[name] = used + qty - limit
        if not over:
            continue
        text = fmt_res(over)
        if q.parent is None:
            out.append(_remedy("add-node", doc.RULE_ROOT_MAX, f"add nodes with {text} more capacity (root's max is the "
                               "cluster's capacity), or release that much anywhere in the partition", add=over))
            continue
        raised = {name: limits[name] + more for name, more in over.items()}
        out.append(_remedy("raise-quota", doc.RULE_QUEUE_MAX, f"raise queue {q.path}'s max to {fmt_res(raised)} "
                           f"(+{text}), or release {text} of its allocations", queue=q.path, max=raised,
                           release=over))
    return out


def shrink_remedy(part: PartitionState, ask: Ask, room: Resources, rule: str) -> list[Remedy]:
    """The smallest shrink of the ask (by the sum of each type's fraction given up) that fits the
    queue maxes' ``room`` and some schedulable, unreserved node now; none when nothing positive fits."""
    request = ask.resources
    best: tuple[float, str, Resources] | None = None
    for node_id in part.index.ordered():
        available = part.nodes[node_id].available()
        smaller = {name: min(qty, available.get(name, 0), room.get(name, qty)) for name, qty in request.items()}
        if any(smaller[name] <= 0 < qty for name, qty in request.items()):
            continue
        cost = _relative({n: request[n] - smaller[n] for n in request}, request)
        if best is None or (cost, node_id) < best[:2]:
            best = (cost, node_id, smaller)
    if best is None or best[2] == dict(request):
        return []
    _, node_id, smaller = best
    return [_remedy("shrink-ask", rule, f"ask for {fmt_res(smaller)} instead of {fmt_res(request)}: that fits every "
                    f"max on the way up and node {node_id} now", resources=smaller, node=node_id)]


def max_apps_remedies(app: App) -> list[Remedy]:
    """An Accepted app held by a queue's maxapplications: the limit that lets it start."""
    if app.state != "Accepted":
        return []
    return [
        _remedy("raise-quota", doc.RULE_MAX_APPS, f"raise queue {q.path}'s maxapplications to {q.running_apps + 1}, or "
                f"let one of its {q.running_apps} running apps finish", queue=q.path,
                max_applications=q.running_apps + 1)
        for q in app.queue.ancestry() if q.max_applications and q.running_apps >= q.max_applications
    ]


def user_limit_remedies(part: PartitionState, app: App, request: Resources) -> list[Remedy]:
    """Each user or group limit on the app's path the request (or, Accepted, the app) would pass: its new value."""
    limits = part.limits
    if limits is None:
        return []
    out: list[Remedy] = []
    for q in app.queue.lineage:
        found: list[tuple[str, str, Mapping[str, int], int]] = []
        named = limits.index.user_limit(q.path, app.user)
        if named is not None:
            found.append(("user", app.user, *named[1]))
        if app.limit_group:
            group = limits.index.group_limit(q.path, app.limit_group)
            if group is not None:
                found.append(("group", app.limit_group, *group))
        for kind, name, max_res, max_apps in found:
            usage = limits.usage.get((kind, name, q.path))
            used = usage.resources if usage is not None else {}
            over = {t: used.get(t, 0) + qty - max_res[t] for t, qty in sorted(request.items())
                    if t in max_res and used.get(t, 0) + qty > max_res[t]}
            if over:
                raised = {t: max_res[t] + more for t, more in over.items()}
                out.append(_remedy("raise-quota", doc.RULE_USER_LIMIT, f"raise {kind} {name!r}'s maxresources on "
                                   f"{q.path} to {fmt_res(raised)} (+{fmt_res(over)}), or release {fmt_res(over)} of "
                                   f"that {kind}'s allocations there", **{kind: name}, queue=q.path, max=raised,
                                   release=over))
            running = usage.apps if usage is not None else set()
            if app.state == "Accepted" and max_apps and app.app_id not in running and len(running) + 1 > max_apps:
                out.append(_remedy("raise-quota", doc.RULE_USER_LIMIT, f"raise {kind} {name!r}'s maxapplications on "
                                   f"{q.path} to {len(running) + 1}, or let one of its {len(running)} running apps "
                                   "finish", **{kind: name}, queue=q.path, max_applications=len(running) + 1))
    return out


def _smallest_release(node: Node, need: Resources) -> Allocation | None:
    """The allocation on ``node`` whose release alone frees ``need``: the smallest such, lowest priority first."""
    fitting = [a for a in node.allocations.values() if all(a.resources.get(n, 0) >= q for n, q in need.items())]
    if not fitting:
        return None
    return min(fitting, key=lambda a: (a.priority, sum(a.resources.values()), a.app_id, a.ask_id))


def _release(rule: str, node: Node, missing: Resources, head: str, after: str = "") -> Remedy:
    """A remedy freeing ``missing`` on ``node``, naming the one allocation whose release would do."""
    victim = _smallest_release(node, missing)
    which = victim and f"{victim.app_id}/{victim.ask_id}"
    text = f": releasing allocation {which} ({fmt_res(victim.resources)}) would do" if victim is not None else ""
    return _remedy("release", rule, f"{head}{text}{after}", node=node.node_id, release=missing, allocation=which)


def _relative(missing: Mapping[str, int], request: Mapping[str, int]) -> float:
    return sum(qty / request[name] for name, qty in missing.items() if request.get(name))


def node_remedies(part: PartitionState, ask: Ask) -> list[Remedy]:
    """No node holds the ask: the nearest node's release, a cordoned or reserved node with room, a node to add."""
    request = ask.resources
    if ask.required_node is not None:
        return _required_node_remedies(part, ask)
    out: list[Remedy] = []
    mine = (ask.app_id, ask.ask_id)
    releases: list[tuple[bool, float, str, Resources]] = []  # unreserved nodes first, then the least missing
    for node in part.nodes.values():
        if node.schedulable and not shortfall(request, node.capacity):
            missing = _missing(shortfall(request, node.available()))
            if missing:
                held = node.reserved_for is not None and node.reserved_for != mine
                releases.append((held, _relative(missing, request), node.node_id, missing))
    if releases:
        held, _, node_id, missing = min(releases)
        node = part.nodes[node_id]
        after = (f" (it is reserved for ask {'/'.join(node.reserved_for or ())}: once that ask is placed or its "
                 "reservation ends)" if held else "")
        out.append(_release(doc.RULE_NODE_FIT, node, missing, f"free {fmt_res(missing)} on node {node_id}", after))
    idle = sorted(n.node_id for n in part.nodes.values() if not n.schedulable and not shortfall(request, n.available()))
    if idle:
        out.append(_remedy("schedule-node", doc.RULE_NODE_FIT, f"make node {idle[0]} schedulable: it has room",
                           node=idle[0]))
    room = sorted(n.node_id for n in part.nodes.values() if n.reserved_for is not None and n.schedulable
                  and n.reserved_for != mine and not shortfall(request, n.available()))
    if room:
        out.append(_remedy("wait", doc.RULE_RESERVATION, f"node {room[0]} has room but is reserved for ask "
                           f"{'/'.join(part.nodes[room[0]].reserved_for or ())}: it frees when that ask is placed "
                           "or its reservation ends", node=room[0]))
    if not any(not shortfall(request, n.capacity) for n in part.nodes.values()):
        biggest = max((n.capacity for n in part.nodes.values()), key=lambda c: _relative(c, request), default={})
        have = f" (the largest node has {fmt_res(biggest)})" if biggest else ""
        out.append(_remedy("add-node", doc.RULE_NODE_FIT, f"add a node with at least {fmt_res(request)}: no node could "
                           f"ever hold this ask{have}", capacity=dict(request)))
    return out


def _required_node_remedies(part: PartitionState, ask: Ask) -> list[Remedy]:
    assert ask.required_node is not None
    node = part.nodes.get(ask.required_node)
    if node is None:
        return [_remedy("add-node", doc.RULE_RESERVATION, f"register node {ask.required_node} (the ask requires it)",
                        node=ask.required_node, capacity=dict(ask.resources))]
    if shortfall(ask.resources, node.capacity):
        smaller = {name: min(qty, node.capacity.get(name, 0)) for name, qty in ask.resources.items()}
        return [_remedy("shrink-ask", doc.RULE_RESERVATION, f"ask for at most {fmt_res(smaller)}: required node "
                        f"{node.node_id}'s whole capacity", resources=smaller, node=node.node_id)]
    missing = _missing(shortfall(ask.resources, node.available()))
    if not missing:
        return []
    return [_release(doc.RULE_NODE_FIT, node, missing, f"free {fmt_res(missing)} on required node {node.node_id}")]


def reserved_remedies(part: PartitionState, ask: Ask) -> list[Remedy]:
    """A reserved ask: what its node must free (it is tried there first, every step)."""
    if ask.reserved_node is None:
        return []
    node = part.nodes[ask.reserved_node]
    missing = _missing(shortfall(ask.resources, node.available()))
    if not missing:
        return []
    return [_release(doc.RULE_RESERVATION, node, missing, f"node {node.node_id}, reserved for it, must free "
                     f"{fmt_res(missing)}")]


Shape = tuple[tuple[str, int], ...]


def remedies(part: PartitionState, app: App, ask: Ask, rules: set[str],
             by_shape: dict[Shape, list[Remedy]] | None = None) -> list[Remedy]:
    """What would lift each reason holding the ask (``rules``: the rules of those reasons).

    ``by_shape`` keeps the node remedies of plain asks (no required or reserved node) by their
    request's shape for the next call on the same state: they depend on nothing else.
    """
    out: list[Remedy] = []
    if doc.RULE_STATEAWARE in rules:
        out.append(_remedy("wait", doc.RULE_STATEAWARE, f"stateaware queue {app.queue.path} starts one app at a time: "
                           "the app ahead must get its first allocation (or time out) first"))
    if doc.RULE_MAX_APPS in rules:
        out += max_apps_remedies(app)
    if doc.RULE_USER_LIMIT in rules:
        out += user_limit_remedies(part, app, ask.resources)
    over_max = doc.RULE_QUEUE_MAX in rules or doc.RULE_ROOT_MAX in rules
    no_node = doc.RULE_NODE_FIT in rules or (doc.RULE_RESERVATION in rules and ask.required_node is not None)
    if (over_max or no_node) and ask.required_node is None and ask.reserved_node is None:
        out += shrink_remedy(part, ask, headroom_room(part, app, ask.resources), doc.RULE_QUEUE_MAX if over_max
                             else doc.RULE_NODE_FIT)
    if over_max:
        out += headroom_remedies(part, app, ask.resources)
    if ask.reserved_node is not None:
        out += reserved_remedies(part, ask)
    elif no_node and ask.required_node is None and by_shape is not None:
        shape = tuple(sorted(ask.resources.items()))
        known = by_shape.get(shape)
        if known is None:
            known = by_shape[shape] = node_remedies(part, ask)
        out += known
    elif no_node:
        out += node_remedies(part, ask)
    return out

