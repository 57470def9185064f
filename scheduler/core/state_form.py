"""The state form (docs/contract.md §6): queues, apps and nodes as one JSON-ready object, and its digest.

Queues and nodes of partitions other than ``default`` are keyed ``partition/name`` so
that names never collide; apps are keyed by id (unique per partition, likewise).
``state_digest`` gives the same value as ``projections.digest.digest(state_form(s))``
without encoding the whole state: apps and nodes come from each partition's
``FormCache`` (re-encoded only when changed), queues are encoded afresh when an app entry
or the config changed; ``DigestMemo`` keeps what an unchanged state hashes to.
"""

from __future__ import annotations

import hashlib
import heapq
from typing import Any

from events.resources import Resources, normalized
from projections.digest import canonical
from scheduler.core.form_cache import EncodedEntries
from scheduler.core.objects import App, Node
from scheduler.core.partition import PartitionState
from scheduler.core.queues import QueueNode
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


def app_entry(app: App) -> dict[str, Any]:
    """An app in the state form."""
    return {
        "queue": app.queue.path,
        "state": app.state,
        "priority": app.priority,
        "pending": normalized(app.pending),
        "allocated": normalized(app.allocated),
    }


def node_vectors(node: Node, available: Resources | None = None) -> dict[str, Any]:
    """A node's state-form fields as the node holds them (live dicts: read, never hand out).

    ``available``: the node's ``available()`` when the caller has it. ``reserved_for``
    (``"app/ask"``) appears only while the node is reserved (additive)."""
    out: dict[str, Any] = {"capacity": node.capacity, "allocated": node.allocated,
                           "available": node.available() if available is None else available}
    if node.reserved_for is not None:
        out["reserved_for"] = "/".join(node.reserved_for)
        if node.shared_reservations:  # yunikorn-1.9: the least "app/ask" of them all, as the harness prints
            out["reserved_for"] = min("/".join(key) for key in node.reservations())
    return out


def node_entry(node: Node) -> dict[str, Any]:
    """A node in the state form."""
    return {name: normalized(value) if isinstance(value, dict) else value
            for name, value in node_vectors(node).items()}


def state_form(state: SchedulerState) -> dict[str, Any]:
    """The current state in the contract's state form (built from scratch)."""
    queues: dict[str, Any] = {}
    apps: dict[str, Any] = {}
    nodes: dict[str, Any] = {}
    for pname in sorted(state.partitions):
        part = state.partitions[pname]
        for q in part.root.walk():
            queues[_key(pname, q.path)] = queue_entry(q)
        for app in part.apps.values():
            apps[_key(pname, app.app_id)] = app_entry(app)
        for node in part.nodes.values():
            nodes[_key(pname, node.node_id)] = node_entry(node)
    form: dict[str, Any] = {"type": "state", "queues": queues, "apps": apps, "nodes": nodes}
    usage = usage_form(state)
    if usage is not None:
        form["usage"] = usage
    return form


def usage_form(state: SchedulerState) -> dict[str, Any] | None:
    """Per-user and per-group usage at each queue (``usage`` in the state form), or None when
    no partition configures user/group limits (the form, and its digest, are then unchanged).

    ``{"users": {name: {queue: {"allocated": …, "running_apps": n}}}, "groups": {…}}``.
    """
    if all(part.limits is None for part in state.partitions.values()):
        return None
    out: dict[str, dict[str, dict[str, Any]]] = {"users": {}, "groups": {}}
    for pname in sorted(state.partitions):
        limits = state.partitions[pname].limits
        if limits is None:
            continue
        for (kind, name, path), usage in limits.usage.items():
            entry = {"allocated": normalized(usage.resources), "running_apps": len(usage.apps)}
            if entry["allocated"] or entry["running_apps"]:
                out[kind + "s"].setdefault(name, {})[_key(pname, path)] = entry
    return out


def _refreshed(pname: str, part: PartitionState) -> None:
    def app_of(app_id: str) -> dict[str, Any] | None:
        app = part.apps.get(app_id)
        return None if app is None else app_entry(app)

    def node_of(node_id: str) -> dict[str, Any] | None:
        node = part.nodes.get(node_id)
        # ``node_entry`` without its sorted copies: a node's vectors hold no zero entries and
        # ``canonical`` sorts keys, so the encoded bytes are the same (every node re-encodes
        # each cycle on a busy cluster). The digest property tests compare with a full form.
        # ``indexed_available``: every change re-indexed the node (and marked it changed) after
        # the change; the from-scratch state form builds ``available()`` anew.
        return None if node is None else node_vectors(node, node.indexed_available)

    part.form.refresh(lambda name: _key(pname, name), app_of, node_of)


def _body(entries: list[EncodedEntries]) -> bytes:
    """One JSON object body from each partition's entries, merged in key order."""
    if len(entries) == 1:
        return entries[0].joined()
    merged = heapq.merge(*(e.in_order() for e in entries))
    return b",".join(fragment for _, fragment in merged)


def state_digest(state: SchedulerState) -> str:
    """``sha256:<hex>`` of the canonical state form, re-encoding only what changed and hashing
    the apps' and nodes' bodies again only when an entry of them changed (``state.digest_memo``).

    Canonical form has sorted keys at every level: ``apps``, ``nodes``, ``queues``, ``type``.
    """
    parts = [(pname, state.partitions[pname]) for pname in sorted(state.partitions)]
    for pname, part in parts:
        _refreshed(pname, part)
    memo = state.digest_memo
    apps_key = tuple((part.form.apps, part.form.apps.version) for _, part in parts)
    queues = memo.queues_bytes
    if queues is None or memo.queues_key != apps_key or memo.queues_config is not state.config:
        # sorts the keys itself
        queues = canonical({_key(pname, q.path): queue_entry(q) for pname, part in parts for q in part.root.walk()})
        memo.queues_key, memo.queues_config, memo.queues_bytes = apps_key, state.config, queues
    nodes_key = tuple((part.form.nodes, part.form.nodes.version) for _, part in parts)
    after_apps, after_nodes = memo.after_apps, memo.after_nodes
    if after_apps is None or memo.apps_key != apps_key:
        after_apps = hashlib.sha256(b'{"apps":{')
        after_apps.update(_body([part.form.apps for _, part in parts]))
        memo.apps_key, memo.after_apps, after_nodes = apps_key, after_apps, None
    if after_nodes is None or memo.nodes_key != nodes_key:
        after_nodes = after_apps.copy()
        after_nodes.update(b'},"nodes":{')
        after_nodes.update(_body([part.form.nodes for _, part in parts]))
        memo.nodes_key, memo.after_nodes = nodes_key, after_nodes
    h = after_nodes.copy()
    h.update(b'},"queues":')
    h.update(queues)
    h.update(b',"type":"state"')
    usage = usage_form(state)
    if usage is not None:
        h.update(b',"usage":')
        h.update(canonical(usage))
    h.update(b"}")
    return "sha256:" + h.hexdigest()
