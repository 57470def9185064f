"""The explaining walk: one allocation step re-walked, recording why each queue, app, ask and node won or lost.

It mirrors ``scheduler.core.cycle``'s walk (docs/semantics.md#one-allocation-step) over the
same state but without a ``CycleMemo``: the memo only skips work known to fail again, so
this walk reaches the same (app, ask, node) — ``replay.explain.decision`` checks that it does. It
only reads the state; every failure is kept as a ``Blocker`` naming its rule and culprit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from events.resources import Resources
from events.times import format_time
from events.units import fmt_quantity as fq
from projections.policies import AppSortPolicy
from replay.explain.format import (
    RULE_MAX_APPS,
    RULE_NODE_CONSTRAINTS,
    RULE_NODE_FIT,
    RULE_QUEUE_MAX,
    RULE_QUOTA_PREEMPTION,
    RULE_RESERVATION,
    RULE_ROOT_MAX,
    RULE_STATEAWARE,
    RULE_USER_LIMIT,
    Blocker,
    fmt_res,
    fmt_shortfall,
    shortfall,
)
from scheduler.core.constrained_nodes import first_admitting, node_excludes
from scheduler.core.node_constraints import Constraints
from scheduler.core.objects import App, Ask, Node
from scheduler.core.partition import PartitionState
from scheduler.core.queues import QueueNode
from scheduler.core.sorting import sort_queues, stateaware_allowed

Choice = tuple[App, Ask, Node]


@dataclass
class AskTry:
    """One ask tried: the node it got, or why none."""

    ask: Ask
    node: Node | None
    why_not: Blocker | None = None


@dataclass
class AppTry:
    """One app tried: its asks in order until one placed, or why it was skipped."""

    app: App
    asks: list[AskTry] = field(default_factory=list)
    why_not: Blocker | None = None

    @property
    def choice(self) -> Choice | None:
        """(app, ask, node) when one of its asks was placed."""
        last = self.asks[-1] if self.asks else None
        if last is None or last.node is None:
            return None
        return self.app, last.ask, last.node


@dataclass
class QueueTry:
    """One queue walked: for a parent its sorted children, for a leaf its apps, in order."""

    queue: QueueNode
    order: list[QueueNode] = field(default_factory=list)  # parent: children with pending, sorted
    children: list[QueueTry] = field(default_factory=list)  # parent: children tried, in order
    apps: list[App] = field(default_factory=list)  # leaf: apps with pending, in sort order
    app_tries: list[AppTry] = field(default_factory=list)  # leaf: apps tried, in order
    allowed: set[str] | None = None  # leaf with stateaware: apps the gate lets through
    choice: Choice | None = None
    why_not: Blocker | None = None


class Walker:
    """Re-walks one partition's step; caches cluster-wide facts the reasons quote."""

    def __init__(self, part: PartitionState) -> None:
        self.part = part
        self._max_available: Resources | None = None
        self._unschedulable: list[Node] | None = None
        self._no_fit: dict[tuple[tuple[str, int], ...], Blocker] = {}  # by request shape: one scan of the nodes each

    # -- facts about nodes ------------------------------------------------------------

    def max_available(self) -> Resources:
        """Per resource type, the most any one schedulable node has available."""
        if self._max_available is None:
            best: Resources = {}
            for node_id in self.part.index.ordered():
                for name, qty in self.part.nodes[node_id].available().items():
                    if qty > best.get(name, 0):
                        best[name] = qty
            self._max_available = best
        return self._max_available

    def no_node_fits(self, request: Resources) -> Blocker:
        """Why no schedulable node holds a request: the short types with their best node."""
        shape = tuple(sorted(request.items()))
        known = self._no_fit.get(shape)
        if known is None:
            known = self._no_fit[shape] = self._why_no_node_fits(request)
        return known

    def _why_no_node_fits(self, request: Resources) -> Blocker:
        block = self._no_node_fits(request)
        if self._unschedulable is None:
            self._unschedulable = sorted(
                (n for n in self.part.nodes.values() if not n.schedulable), key=lambda n: n.node_id
            )
        idle = [n.node_id for n in self._unschedulable if not shortfall(request, n.available())]
        held = sorted(n.node_id for n in self.part.nodes.values()
                      if n.reserved_for is not None and n.schedulable and not shortfall(request, n.available()))
        notes = []
        if idle:
            more = " …" if len(idle) > 3 else ""
            notes.append("unschedulable node(s) " + ", ".join(idle[:3]) + more + " would fit")
        if held:
            notes.append("node(s) " + ", ".join(held[:3]) + (" …" if len(held) > 3 else "")
                         + " would fit but are reserved for other asks")
        if notes:
            return Blocker(block.rule, f"{block.message} ({'; '.join(notes)})")
        return block

    def _no_node_fits(self, request: Resources) -> Blocker:
        if len(self.part.index) == 0:
            return Blocker(RULE_NODE_FIT, "no schedulable node in the partition")
        best = self.max_available()
        short = shortfall(request, best)
        if short:
            parts = [
                f"no node has resource type {name!r} at all"
                if name not in self.part.cluster_capacity
                else f"no schedulable node has {name} {fq(name, need)} available (the most on any node is "
                f"{fq(name, have)})"
                for name, (need, have) in short.items()
            ]
            return Blocker(RULE_NODE_FIT, "; ".join(parts))
        most = ", ".join(f"{name} {fq(name, best.get(name, 0))}" for name in sorted(request))
        return Blocker(
            RULE_NODE_FIT,
            f"each type is available somewhere (most on any one node: {most}) but no single schedulable node has all",
        )

    # -- limits -----------------------------------------------------------------------

    def headroom_block(self, leaf: QueueNode, request: Resources) -> Blocker | None:
        """The first queue up the tree whose ``max − allocated`` cannot take the request."""
        for q in leaf.ancestry():
            if q.parent is None:
                cap = self.part.cluster_capacity
                for name, qty in sorted(request.items()):
                    used = q.allocated.get(name, 0)
                    if name not in cap:
                        why = f"the cluster has no resource type {name!r} (root's max counts it as 0)"
                        return Blocker(RULE_ROOT_MAX, why)
                    if used + qty > cap[name]:
                        return Blocker(
                            RULE_ROOT_MAX,
                            f"root: {name} {fq(name, used)} allocated + {fq(name, qty)} asked exceeds the cluster's "
                            f"capacity {fq(name, cap[name])}",
                        )
            elif q.max:
                for name, qty in sorted(request.items()):
                    limit = q.max.get(name)
                    used = q.allocated.get(name, 0)
                    if limit is not None and used + qty > limit:
                        return Blocker(
                            RULE_QUEUE_MAX,
                            f"queue {q.path} max {name} {fq(name, limit)}: {fq(name, used)} allocated + "
                            f"{fq(name, qty)} asked exceeds it",
                        )
        return None

    def over_max_queue(self, leaf: QueueNode, request: Resources) -> QueueNode | None:
        """The first queue up the tree (not root) whose max ``headroom_block`` would name, or None."""
        for q in leaf.ancestry():
            if q.parent is not None and q.max and any(
                    name in q.max and q.allocated.get(name, 0) + qty > q.max[name] for name, qty in request.items()):
                return q
        return None

    def quota_block(self, leaf: QueueNode, request: Resources, now_us: int | None) -> Blocker | None:
        """What frees the max that holds the request: allocations of the queue revoked and not yet
        released (``preempted`` or yunikorn-1.9's ``quota-preempted``: they count until the resource
        manager releases them), and under yunikorn-1.9 a quota preemption under way — the queue
        over its max with a ``quota.preemption.delay`` timer set (``scheduler.core.quota_preemption``)."""
        q = self.over_max_queue(leaf, request)
        if q is None:
            return None
        part = self.part
        releasing: dict[str, int] = {}
        for path, res in part.preempting.items():
            if path == q.path or path.startswith(q.path + "."):
                for name, value in res.items():
                    releasing[name] = releasing.get(name, 0) + value
        clock = part.quota_clocks.get(q.path)
        # what quota preemption still has to take: usage less what is already being released, over max
        over = {name: left for name, used in q.allocated.items()
                if name in q.max and (left := used - releasing.get(name, 0) - q.max[name]) > 0}
        parts: list[str] = []
        if clock is not None and clock.start_us is not None and over:
            due = format_time(clock.start_us)
            when = (f"due since {due}: the next cycle revokes" if now_us is not None and clock.start_us <= now_us
                    else f"at {due} (quota.preemption.delay {clock.delay_us / 1_000_000:g} s) it revokes")
            parts.append(f"queue {q.path} is over its max by {fmt_res(over)}; quota preemption is under way, "
                         f"{when} allocations until it is within its max (yunikorn-1.9)")
        if any(releasing.values()):
            parts.append(f"{fmt_res(releasing)} of queue {q.path}'s allocations are revoked (preempted) and count "
                         "against its max until the resource manager releases them")
        return Blocker(RULE_QUOTA_PREEMPTION, "; ".join(parts)) if parts else None

    @staticmethod
    def max_apps_block(app: App) -> Blocker | None:
        """An Accepted app held back by its queue's (or an ancestor's) maxapplications."""
        if app.state != "Accepted":
            return None
        for q in app.queue.ancestry():
            if q.max_applications and q.running_apps >= q.max_applications:
                return Blocker(
                    RULE_MAX_APPS,
                    f"app {app.app_id} is Accepted and queue {q.path} already runs "
                    f"{q.running_apps} of its maxapplications {q.max_applications}",
                )
        return None

    def user_limit_block(self, app: App, request: Resources) -> Blocker | None:
        """The user's or group's maxresources on the app's path that the request would pass."""
        limits = self.part.limits
        why = limits.blocking_resources(app, request) if limits is not None else None
        return Blocker(RULE_USER_LIMIT, f"app {app.app_id}: {why}") if why is not None else None

    def user_apps_block(self, app: App) -> Blocker | None:
        """An Accepted app held back by its user's or group's maxapplications."""
        limits = self.part.limits
        if app.state != "Accepted" or limits is None:
            return None
        why = limits.blocking_apps(app)
        return Blocker(RULE_USER_LIMIT, f"app {app.app_id} is Accepted and its {why}") if why is not None else None

    def stateaware_block(self, app: App, allowed: set[str] | None) -> Blocker | None:
        """The stateaware gate of the app's leaf, naming the app that holds it."""
        if allowed is None or app.app_id in allowed:
            return None
        starting = list(self.part.starting[app.queue.path].values())
        if starting:
            oldest = min(starting, key=lambda a: (a.submit_us, a.seq))
            return Blocker(
                RULE_STATEAWARE,
                f"stateaware queue {app.queue.path}: app {oldest.app_id} is Starting, which holds back "
                f"app {app.app_id} ({app.state}) until it runs",
            )
        return Blocker(
            RULE_STATEAWARE,
            f"stateaware queue {app.queue.path}: only the oldest Accepted app may start, "
            f"and app {app.app_id} is not it",
        )

    def stateaware_gate(self, leaf: QueueNode) -> set[str] | None:
        """The apps a stateaware leaf lets through now (None: not stateaware)."""
        if leaf.app_sort_policy != AppSortPolicy.STATEAWARE.value:
            return None
        return stateaware_allowed(self.part.ordered_apps(leaf), list(self.part.starting[leaf.path].values()))

    # -- the walk ---------------------------------------------------------------------

    def try_ask(self, app: App, ask: Ask) -> AskTry:
        """Queue limits first, then the required node or the first node in order that fits."""
        block = self.headroom_block(app.queue, ask.resources) or self.user_limit_block(app, ask.resources)
        if block is not None:
            return AskTry(ask, None, block)
        node, block = self.node_for(ask)
        return AskTry(ask, node, block)

    def node_for(self, ask: Ask) -> tuple[Node | None, Blocker | None]:
        """The required node or the first node in index order that holds the ask, or why none."""
        request = ask.resources
        if ask.required_node is not None:
            node = self.part.nodes.get(ask.required_node)
            turn_ends = f", so app {ask.app_id}'s turn ends here"
            if node is None:
                return None, Blocker(RULE_RESERVATION, f"required node {ask.required_node} does not exist{turn_ends}")
            excluded = node_excludes(ask.constraints, node) if ask.constraints is not None else None
            if excluded is not None:
                return None, Blocker(RULE_NODE_CONSTRAINTS, f"required node {node.node_id} is excluded: {excluded}")
            if shortfall(request, node.capacity):
                why = f"required node {node.node_id} could never hold it (capacity {fmt_res(node.capacity)}){turn_ends}"
                return None, Blocker(RULE_RESERVATION, why)
            holder = self.required_holder(node)
            if holder is not None:
                return None, Blocker(RULE_RESERVATION, f"required node {node.node_id} is reserved for required-node "
                                     f"ask {holder[1]} of app {holder[0]}{turn_ends}")
            short = shortfall(request, node.available())
            if short:
                why = f"required node {node.node_id} does not fit: {fmt_shortfall(short)}"
                return None, Blocker(RULE_NODE_FIT, why)
            return node, None
        node_id = self.part.index.first_fit(request)
        if node_id is None:
            return None, self.no_node_fits(request)
        if ask.constraints is not None:
            admitting = first_admitting(self.part, request, ask.constraints)
            return (admitting, None) if admitting is not None else (None, self.constraints_block(ask.constraints))
        return self.part.nodes[node_id], None

    def constraints_block(self, constraints: Constraints) -> Blocker:
        """Why no node takes an ask that nodes hold but its constraints exclude, as kube-scheduler's
        FailedScheduling counts it: "0/N nodes are available: 600 node selector mismatch, …" (a node
        counted once, under the first filter it fails: unschedulable, then the constraints in
        TaintToleration, NodeAffinity, NodePorts order, then reserved, then its room)."""
        counts: dict[str, int] = {}
        nodes = self.part.nodes
        for node_id in sorted(nodes):
            node = nodes[node_id]
            why = "unschedulable" if not node.schedulable else node_excludes(constraints, node)
            if why is None:
                why = "reserved for other asks" if node.reserved_for is not None else "too little room"
            counts[why] = counts.get(why, 0) + 1
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        listed = ", ".join(f"{count} {why}" for why, count in ranked)
        return Blocker(RULE_NODE_CONSTRAINTS, f"0/{len(nodes)} nodes are available: {listed}")

    def required_holder(self, node: Node) -> tuple[str, str] | None:
        """(app, ask) of the required-node ask holding ``node``, if one does."""
        held = node.reserved_for
        if held is None or self.part.apps[held[0]].asks[held[1]].required_node is None:
            return None
        return held

    def try_app(self, app: App, allowed: set[str] | None) -> AppTry:
        """The gate, then maxapplications, then its asks in order (a failing ask does not block the next)."""
        out = AppTry(app)
        out.why_not = self.stateaware_block(app, allowed) or self.max_apps_block(app) or self.user_apps_block(app)
        if out.why_not is not None:
            return out
        for ask in app.sorted_asks:
            attempt = self.try_ask(app, ask)
            out.asks.append(attempt)
            if attempt.node is not None:
                return out
            if attempt.why_not is not None and attempt.why_not.rule == RULE_RESERVATION:
                out.why_not = attempt.why_not  # a required-node reservation ends the app's turn
                return out
        out.why_not = _summarise(
            f"none of app {app.app_id}'s {len(out.asks)} pending asks fits",
            [(f"ask {t.ask.ask_id}", t.why_not) for t in out.asks],
        )
        return out

    def try_queue(self, queue: QueueNode) -> QueueTry:
        """Depth first in sorted order; the first success ends the walk."""
        out = QueueTry(queue)
        if queue.is_leaf:
            out.apps = self.part.ordered_apps(queue)
            out.allowed = self.stateaware_gate(queue)
            for app in out.apps:
                tried = self.try_app(app, out.allowed)
                out.app_tries.append(tried)
                if tried.choice is not None:
                    out.choice = tried.choice
                    return out
            out.why_not = _summarise(
                f"no app of {queue.path} could allocate", [(f"app {t.app.app_id}", t.why_not) for t in out.app_tries]
            )
            return out
        out.order = sort_queues(queue.children, queue.sort_priority)
        for child in out.order:
            attempt = self.try_queue(child)
            out.children.append(attempt)
            if attempt.choice is not None:
                out.choice = attempt.choice
                return out
        out.why_not = _summarise(
            f"no child queue of {queue.path} could allocate", [(t.queue.path, t.why_not) for t in out.children]
        )
        return out


def _summarise(head: str, parts: list[tuple[str, Blocker | None]], limit: int = 3) -> Blocker:
    """One Blocker for a group of failures: the first few reasons, the rule of the first."""
    reasons = [(who, b) for who, b in parts if b is not None]
    if not reasons:
        return Blocker(RULE_NODE_FIT, f"{head}: nothing to try")
    text = "; ".join(f"{who}: {b.message}" for who, b in reasons[:limit])
    more = f"; and {len(reasons) - limit} more" if len(reasons) > limit else ""
    return Blocker(reasons[0][1].rule, f"{head} — {text}{more}")
