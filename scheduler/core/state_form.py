"""The state form (CONTRACT §6): queues, apps and nodes as one JSON-ready object.

Queues and nodes of partitions other than ``default`` are keyed ``partition/name`` so
that names never collide; apps are keyed by id (unique per partition, likewise).
"""

from __future__ import annotations

from typing import Any

from events.resources import normalized
from projections.queues import QueueNode
from scheduler.core.state import SchedulerState


def _key(partition: str, name: str) -> str:
    return name if partition == "default" else f"{partition}/{name}"


def queue_entry(q: QueueNode) -> dict[str, Any]:
    """A queue in the state form (also its published MQTT status)."""
    return {
        "priority": q.priority,
        "pending": normalized(q.pending),
        "allocated": normalized(q.allocated),
        "running_apps": q.running_apps,
    }


def state_form(state: SchedulerState) -> dict[str, Any]:
    """The current state in the contract's state form."""
    queues: dict[str, Any] = {}
    apps: dict[str, Any] = {}
    nodes: dict[str, Any] = {}
    for pname in sorted(state.partitions):
        part = state.partitions[pname]
        for q in part.root.walk():
            queues[_key(pname, q.path)] = queue_entry(q)
        for app in part.apps.values():
            apps[_key(pname, app.app_id)] = {
                "queue": app.queue.path,
                "state": app.state,
                "priority": app.priority,
                "pending": normalized(app.pending),
                "allocated": normalized(app.allocated),
            }
        for node in part.nodes.values():
            nodes[_key(pname, node.node_id)] = {
                "capacity": normalized(node.capacity),
                "allocated": normalized(node.allocated),
                "available": normalized(node.available()),
            }
    return {"type": "state", "queues": queues, "apps": apps, "nodes": nodes}
