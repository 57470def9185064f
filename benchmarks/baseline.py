"""A deliberately simple reference scheduler, the benchmarks' comparison baseline.

It follows docs/semantics.md literally and keeps no derived state: at every allocation step it
recomputes every app's and queue's priority, pending and allocated sums from the raw asks
and allocations, re-sorts the queues, apps and asks, scores and sorts every node, and scans
the nodes linearly for the first fit. The real core (``scheduler.core``) caches and
indexes all of this; on the generated workloads both give the same decisions, which
``tests/unit/test_bench_baseline.py`` checks and every benchmark run re-checks.

Scope: what ``scheduler.simulation.workload`` generates — priority classes, nodes, apps and asks in
one partition; fifo and fair leaves; fences and offsets; queue ``max``; fair and
binpacking nodes; reservations of asks that fit nowhere (when ``now_us`` is given: the
cycle's time, against which the 2 s reservation delay is measured). Anything else
(stateaware, maxapplications, required nodes, removals) raises ``Unsupported`` rather than
deciding differently.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from events.times import parse_time
from scheduler.config import QueueSpec, load_config

RESERVATION_DELAY_US = 2_000_000
MIN_PRIORITY = -(2**31)
MAX_PRIORITY = 2**31 - 1
BUILTIN_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}

Decision = tuple[str, str, str]  # (app_id, ask_id, node_id)


class Unsupported(Exception):
    """The input uses a feature the reference does not model."""


@dataclass
class RefAsk:
    ask_id: str
    resources: dict[str, int]
    priority: int
    created_us: int
    seq: int
    reserved: str | None = None  # node held for this ask


@dataclass
class RefApp:
    app_id: str
    leaf: str
    submit_us: int
    seq: int
    asks: list[RefAsk] = field(default_factory=list)
    allocated: dict[str, int] = field(default_factory=dict)


@dataclass
class RefNode:
    node_id: str
    capacity: dict[str, int]
    occupied: dict[str, int]
    allocated: dict[str, int] = field(default_factory=dict)
    reserved_for: str | None = None  # ask id it is held for

    def available(self, name: str) -> int:
        return self.capacity.get(name, 0) - self.allocated.get(name, 0) - self.occupied.get(name, 0)


def _add(total: dict[str, int], delta: Mapping[str, int]) -> None:
    for k, v in delta.items():
        total[k] = total.get(k, 0) + v


def _positive(res: Mapping[str, int]) -> bool:
    return any(v > 0 for v in res.values())


def _share(used: Mapping[str, int], guaranteed: Mapping[str, int]) -> tuple[float, ...]:
    """used/guaranteed per type (raw used without a guarantee), largest first, zeros out."""
    return tuple(sorted(((q / guaranteed[k] if guaranteed.get(k) else float(q)) for k, q in used.items() if q),
                        reverse=True))


def _dominates(left: Mapping[str, int], right: Mapping[str, int]) -> bool:
    keys = set(left) | set(right)
    return all(left.get(k, 0) >= right.get(k, 0) for k in keys) and any(left.get(k, 0) > right.get(k, 0)
                                                                       for k in keys)


def _adjusted(raw: int, spec: QueueSpec, is_root: bool) -> int:
    if raw == MIN_PRIORITY or is_root:
        return raw
    if spec.priority_fence:
        return spec.priority_offset
    return max(MIN_PRIORITY, min(MAX_PRIORITY, raw + spec.priority_offset))


class ReferenceScheduler:
    """Apply workload events, then ``step()`` one allocation at a time (no caches)."""

    def __init__(self, config_yaml: str, now_us: int | None = None) -> None:
        self.now_us = now_us  # the cycle's time (None: no reservations)
        config = load_config(config_yaml)
        if len(config.partitions) != 1:
            raise Unsupported("one partition only")
        part = config.partitions[0]
        self.partition = part.name
        self.root = part.root
        self.policy = part.node_sort_policy
        self.weights = dict(part.resource_weights)
        self.queues: dict[str, QueueSpec] = {}
        self._collect(self.root)
        self.classes: dict[str, int] = dict(BUILTIN_CLASSES)
        self.default_class: int | None = None
        self.apps: dict[str, RefApp] = {}
        self.nodes: dict[str, RefNode] = {}
        self.seq = 0

    def _collect(self, spec: QueueSpec) -> None:
        if spec.app_sort_policy not in ("fifo", "fair") and spec.is_leaf:
            raise Unsupported(f"application.sort.policy {spec.app_sort_policy!r}")
        if spec.max_applications:
            raise Unsupported("maxapplications")
        self.queues[spec.path] = spec
        for child in spec.children:
            self._collect(child)

    # -- inputs ---------------------------------------------------------------------

    def apply(self, event: Mapping[str, Any]) -> None:
        """Fold one workload event (a plain input dict) into the state."""
        kind, data = event["type"], event["data"]
        time_us = parse_time(event["time"]) if "time" in event else 0
        if data.get("partition", self.partition) != self.partition:
            raise Unsupported("another partition")
        if kind == "priorityclass.upserted":
            self.classes[data["name"]] = data["value"]
            if data.get("global_default"):
                self.default_class = data["value"]
        elif kind == "node.added":
            if not data.get("schedulable", True):
                raise Unsupported("unschedulable nodes")
            occupied = dict(data.get("occupied", {}))
            self.nodes[data["node_id"]] = RefNode(data["node_id"], dict(data["capacity"]), occupied)
        elif kind == "app.added":
            self.seq += 1
            self.apps[data["app_id"]] = RefApp(data["app_id"], data["queue"].lower(), time_us, self.seq)
        elif kind == "ask.added":
            if data.get("required_node") is not None:
                raise Unsupported("required_node")
            cls = data.get("priority_class")
            priority = self.classes[cls] if cls is not None else data.get("priority", self.default_class or 0)
            self.seq += 1
            resources = {k: v for k, v in data["resources"].items() if v}
            self.apps[data["app_id"]].asks.append(RefAsk(data["ask_id"], resources, priority, time_us, self.seq))
        else:
            raise Unsupported(kind)

    # -- one step, everything from scratch ------------------------------------------

    def step(self) -> Decision | None:
        """The next allocation (applied), or None when nothing fits; reservations on the way are applied."""
        while True:
            found = self._one_step()
            if found is None:
                return None
            app, ask, node, reserve = found
            if reserve:
                ask.reserved, node.reserved_for = node.node_id, ask.ask_id
                continue
            if ask.reserved is not None:
                self.nodes[ask.reserved].reserved_for = None
                ask.reserved = None
            app.asks.remove(ask)
            _add(app.allocated, ask.resources)
            _add(node.allocated, ask.resources)
            return app.app_id, ask.ask_id, node.node_id

    def _one_step(self) -> tuple[RefApp, RefAsk, RefNode, bool] | None:
        pending: dict[str, dict[str, int]] = {path: {} for path in self.queues}
        allocated: dict[str, dict[str, int]] = {path: {} for path in self.queues}
        app_priority: dict[str, int] = {}
        for app in self.apps.values():
            app_priority[app.app_id] = max((a.priority for a in app.asks), default=MIN_PRIORITY)
            for path in self._ancestry(app.leaf):
                for ask in app.asks:
                    _add(pending[path], ask.resources)
                _add(allocated[path], app.allocated)
        priority: dict[str, int] = {}
        self._priorities(self.root, app_priority, priority, is_root=True)
        cluster: dict[str, int] = {}
        for node in self.nodes.values():
            _add(cluster, node.capacity)
        if any(n.reserved_for is not None for n in self.nodes.values()):
            found = self._walk(self.root, pending, allocated, priority, app_priority, cluster, reserved=True)
            if found is not None:
                return found
        return self._walk(self.root, pending, allocated, priority, app_priority, cluster, reserved=False)

    def run(self, max_steps: int | None = None) -> list[Decision]:
        """Steps until nothing fits (or ``max_steps``)."""
        out: list[Decision] = []
        while max_steps is None or len(out) < max_steps:
            decision = self.step()
            if decision is None:
                break
            out.append(decision)
        return out

    def _ancestry(self, path: str) -> list[str]:
        parts = path.split(".")
        return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]

    def _priorities(self, spec: QueueSpec, app_priority: Mapping[str, int], out: dict[str, int], is_root: bool) -> int:
        if spec.is_leaf:
            raw = max((p for a, p in app_priority.items() if self.apps[a].leaf == spec.path), default=MIN_PRIORITY)
        else:
            raw = max((self._priorities(c, app_priority, out, False) for c in spec.children), default=MIN_PRIORITY)
        out[spec.path] = _adjusted(raw, spec, is_root)
        return out[spec.path]

    def _walk(
        self, spec: QueueSpec, pending: Mapping[str, dict[str, int]], allocated: Mapping[str, dict[str, int]],
        priority: Mapping[str, int], app_priority: Mapping[str, int], cluster: Mapping[str, int], reserved: bool,
    ) -> tuple[RefApp, RefAsk, RefNode, bool] | None:
        if spec.is_leaf:
            if reserved:
                return self._try_reserved(spec, allocated, app_priority, cluster)
            return self._try_leaf(spec, allocated, app_priority, cluster)
        children = [c for c in spec.children if _positive(pending[c.path])]

        def primary(c: QueueSpec) -> tuple[Any, ...]:
            share = _share(allocated[c.path], c.guaranteed)
            return (-priority[c.path], share) if spec.sort_priority else (share, -priority[c.path])

        children.sort(key=lambda c: (primary(c), spec.children.index(c)))
        ordered: list[QueueSpec] = []
        for child in children:  # stable insertion: more pending (dominating) first among equal keys
            i = len(ordered)
            while (i > 0 and primary(ordered[i - 1]) == primary(child)
                   and _dominates(pending[child.path], pending[ordered[i - 1].path])):
                i -= 1
            ordered.insert(i, child)
        for child in ordered:
            found = self._walk(child, pending, allocated, priority, app_priority, cluster, reserved)
            if found is not None:
                return found
        return None

    def _apps_in_order(self, leaf: QueueSpec, app_priority: Mapping[str, int]) -> list[RefApp]:
        apps = [a for a in self.apps.values() if a.leaf == leaf.path and a.asks]

        def key(a: RefApp) -> tuple[Any, ...]:
            prio = -app_priority[a.app_id]
            if leaf.app_sort_policy == "fair":
                share = _share(a.allocated, leaf.guaranteed)
                return (prio, share, a.submit_us, a.seq) if leaf.sort_priority else (share, prio, a.submit_us, a.seq)
            return (prio, a.submit_us, a.seq) if leaf.sort_priority else (a.submit_us, prio, a.seq)

        return sorted(apps, key=key)

    def _try_leaf(
        self, leaf: QueueSpec, allocated: Mapping[str, dict[str, int]], app_priority: Mapping[str, int],
        cluster: Mapping[str, int],
    ) -> tuple[RefApp, RefAsk, RefNode, bool] | None:
        nodes = [n for n in self._sorted_nodes() if n.reserved_for is None]
        for app in self._apps_in_order(leaf, app_priority):
            for ask in sorted(app.asks, key=lambda k: (-k.priority, k.created_us, k.seq)):
                if not self._headroom(leaf.path, ask.resources, allocated, cluster):
                    continue
                for node in nodes:  # linear scan
                    if all(q <= node.available(k) for k, q in ask.resources.items()):
                        return app, ask, node, False
                waited = self.now_us is not None and self.now_us - ask.created_us > RESERVATION_DELAY_US
                if waited and ask.reserved is None:
                    best, best_score = None, float("inf")
                    for node in nodes:  # capacity holds it; the lowest ask.FitInScore(node.available)
                        if all(q <= node.capacity.get(k, 0) for k, q in ask.resources.items()):
                            score = 0.0
                            for k in node.capacity:
                                have, want = node.available(k), ask.resources.get(k, 0)
                                if have > 0:
                                    score += 1.0 if want <= 0 else (have - want) / have if have > want else 0.0
                            if score < best_score:
                                best, best_score = node, score
                    if best is not None:
                        return app, ask, best, True
        return None

    def _try_reserved(
        self, leaf: QueueSpec, allocated: Mapping[str, dict[str, int]], app_priority: Mapping[str, int],
        cluster: Mapping[str, int],
    ) -> tuple[RefApp, RefAsk, RefNode, bool] | None:
        """Reserved asks first: on their own node, else on the first other unreserved node that fits."""
        nodes = [n for n in self._sorted_nodes() if n.reserved_for is None]
        for app in self._apps_in_order(leaf, app_priority):
            held = [k for k in sorted(app.asks, key=lambda k: (-k.priority, k.created_us, k.seq))
                    if k.reserved is not None and self._headroom(leaf.path, k.resources, allocated, cluster)]
            for ask in held:
                assert ask.reserved is not None
                own = self.nodes[ask.reserved]
                if all(q <= own.available(k) for k, q in ask.resources.items()):
                    return app, ask, own, False
            for ask in held:
                for node in nodes:
                    if all(q <= node.available(k) for k, q in ask.resources.items()):
                        return app, ask, node, False
        return None

    def _headroom(
        self, leaf: str, request: Mapping[str, int], allocated: Mapping[str, dict[str, int]], cluster: Mapping[str, int]
    ) -> bool:
        for path in self._ancestry(leaf):
            used = allocated[path]
            if path == self.root.path:
                if any(used.get(k, 0) + q > cluster.get(k, 0) for k, q in request.items()):
                    return False
            elif self.queues[path].max:
                limits = self.queues[path].max
                if any(k in limits and used.get(k, 0) + q > limits[k] for k, q in request.items()):
                    return False
        return True

    def _sorted_nodes(self) -> list[RefNode]:
        def score(node: RefNode) -> float:
            total = weight_sum = 0.0
            for name in sorted(self.weights):  # the same summation order as the core: floats must agree
                weight, cap = self.weights[name], node.capacity.get(name, 0)
                if weight and cap > 0:
                    total += weight * (1.0 - node.available(name) / cap)
                    weight_sum += weight
            usage = total / weight_sum if weight_sum else 0.0
            return usage if self.policy == "fair" else 1.0 - usage

        return sorted(self.nodes.values(), key=lambda n: (score(n), n.node_id))


def reference_decisions(config_yaml: str, inputs: Iterable[Mapping[str, Any]], max_steps: int | None = None,
                        now_us: int | None = None) -> list[Decision]:
    """Decisions of the reference on a workload: apply every input, then allocate (at ``now_us``)."""
    ref = ReferenceScheduler(config_yaml, now_us)
    for event in inputs:
        ref.apply(event)
    return ref.run(max_steps)
