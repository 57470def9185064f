"""Read-only JSON views of an engine, shaped like YuniKorn's REST API (``/ws/v1/...``).

Pure functions of an ``Engine``: the HTTP server calls them between cycles (the live
service) or over an engine re-derived from a log (``evsched serve``). Quantities stay
exact integers (memory in bytes, vcore in millicores); the page renders human units.

Example: a partition with one leaf ``root.a`` gives ``queues_view(engine, "default")`` =
``{"queuename": "root", "partition": "default", "isLeaf": False, "children": [{"queuename":
"root.a", ...}], ...}`` — the same nesting as YuniKorn's ``/ws/v1/partition/default/queues``.
"""

from __future__ import annotations

from typing import Any

from events.resources import normalized
from events.times import format_time
from scheduler.core.engine import Engine
from scheduler.core.objects import App, Node
from scheduler.core.partition import PartitionState
from scheduler.core.queues import QueueNode


class UnknownPartition(KeyError):
    """The partition named in a request does not exist."""


def partition_of(engine: Engine, name: str) -> PartitionState:
    """The named partition, or ``UnknownPartition``."""
    part = engine.state.partitions.get(name)
    if part is None:
        raise UnknownPartition(name)
    return part


def partitions_view(engine: Engine) -> list[dict[str, Any]]:
    """``/ws/v1/partitions``: each partition with its totals."""
    out = []
    for name in sorted(engine.state.partitions):
        part = engine.state.partitions[name]
        out.append({
            "name": name,
            "nodeSortingPolicy": {"type": part.index.policy.value},
            "rulesProfile": part.profile.value,  # evsched's own: the config's rules (docs/semantics.md#rules-profiles)
            "capacity": {
                "capacity": normalized(part.cluster_capacity),
                "usedCapacity": normalized(part.root.allocated),
            },
            "totalNodes": len(part.nodes),
            "totalApplications": len(part.apps),
            "pendingResource": normalized(part.root.pending),
            "lastCycle": engine.cycle_number,
        })
    return out


def queue_view(q: QueueNode, partition: str) -> dict[str, Any]:
    """One queue and its subtree."""
    return {
        "queuename": q.path,
        "partition": partition,
        "isLeaf": q.is_leaf,
        "guaranteedResource": normalized(q.guaranteed),
        "maxResource": normalized(q.max),
        "allocatedResource": normalized(q.allocated),
        "pendingResource": normalized(q.pending),
        "runningApps": q.running_apps,
        "maxApplications": q.max_applications,
        "currentPriority": q.priority,
        "properties": {
            "application.sort.policy": q.app_sort_policy,
            "application.sort.priority": "enabled" if q.sort_priority else "disabled",
            "priority.policy": "fence" if q.fence else "default",
            "priority.offset": str(q.offset),
        },
        "children": [queue_view(c, partition) for c in q.children],
    }


def queues_view(engine: Engine, partition: str) -> dict[str, Any]:
    """``/ws/v1/partition/{p}/queues``: the queue tree from the root."""
    return queue_view(partition_of(engine, partition).root, partition)


def app_view(app: App) -> dict[str, Any]:
    """One application with its asks and allocations."""
    return {
        "applicationID": app.app_id,
        "partition": app.partition,
        "queueName": app.queue.path,
        "applicationState": app.state,
        "submissionTime": format_time(app.submit_us),
        "user": app.user,
        "groups": list(app.groups),
        "currentPriority": app.priority,
        "pendingResource": normalized(app.pending),
        "allocatedResource": normalized(app.allocated),
        "requests": [
            {"allocationKey": ask.ask_id, "resource": normalized(ask.resources), "priority": ask.priority,
             "requiredNodeId": ask.required_node}
            for ask in app.sorted_asks
        ],
        "allocations": [
            {"allocationKey": alloc.ask_id, "nodeId": alloc.node_id, "resource": normalized(alloc.resources)}
            for alloc in app.allocations.values()
        ],
    }


def applications_view(engine: Engine, partition: str, queue: str | None = None) -> list[dict[str, Any]]:
    """``/ws/v1/partition/{p}/applications``: apps in arrival order, optionally of one queue."""
    part = partition_of(engine, partition)
    apps = sorted(part.apps.values(), key=lambda a: a.seq)
    return [app_view(a) for a in apps if queue is None or a.queue.path == queue]


def node_view(node: Node) -> dict[str, Any]:
    """One node."""
    return {
        "nodeID": node.node_id,
        "partition": node.partition,
        "schedulable": node.schedulable,
        "attributes": dict(node.attributes),
        "capacity": normalized(node.capacity),
        "occupied": normalized(node.occupied),
        "allocated": normalized(node.allocated),
        "available": normalized(node.available()),
        "allocations": len(node.allocations),
    }


def nodes_view(engine: Engine, partition: str) -> list[dict[str, Any]]:
    """``/ws/v1/partition/{p}/nodes``: nodes by id."""
    part = partition_of(engine, partition)
    return [node_view(part.nodes[n]) for n in sorted(part.nodes)]


def search_rows(rows: list[dict[str, Any]], search: str, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """The rows with ``search`` in any of ``fields`` (case-insensitive), in their order."""
    needle = search.casefold()
    return [r for r in rows if any(needle in str(r.get(f, "")).casefold() for f in fields)]
