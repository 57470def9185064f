"""Schema errors → human-readable reasons naming the partition, queue path and key.

Example: ``partition 'default', queue 'root.a': key 'resources.max': expected a mapping,
found 'x'``. Queue paths follow YuniKorn's root insertion (see ``structure``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from scheduler.config.structure import ROOT, partition_label
from scheduler.config.yamltree import Scalar, Tree


def where(partition: str | None, queue: str | None = None, key: str | None = None) -> str:
    """The common prefix of every reason: ``partition 'p', queue 'root.a': key 'k'``."""
    parts = []
    if partition is not None:
        parts.append(f"partition {partition!r}")
    if queue is not None:
        parts.append(f"queue {queue!r}")
    head = ", ".join(parts) if parts else "top level"
    return f"{head}: key {key!r}" if key else head


def schema_reasons(error: ValidationError, tree: dict[str, Tree]) -> list[str]:
    """One reason per pydantic error, located in YuniKorn terms."""
    reasons = []
    for item in error.errors(include_url=False):
        loc = tuple(item["loc"])
        partition, queue, keys = _locate(tree, loc)
        reasons.append(f"{where(partition, queue, '.'.join(keys) or None)}: {_message(item)}")
    return reasons


def _message(item: Any) -> str:
    kind = item["type"]
    if kind == "extra_forbidden":
        return "unknown key"
    msg = str(item["msg"])
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        msg = "expected a mapping"
    elif kind == "list_type":
        msg = "expected a list"
    found = item.get("input")
    if isinstance(found, Scalar):
        return f"{msg}, found {found.describe()}"
    if isinstance(found, list):
        return f"{msg}, found a list"
    return msg


def _name_of(node: Tree, index: int) -> str:
    if isinstance(node, dict):
        name = node.get("name")
        if isinstance(name, Scalar) and name.value is not None:
            return name.text
    return f"#{index}"


def _locate(tree: dict[str, Tree], loc: Sequence[int | str]) -> tuple[str | None, str | None, list[str]]:
    """Walk ``loc`` through the raw tree, tracking the partition and queue it passes."""
    partition: str | None = None
    queue: str | None = None
    keys: list[str] = []
    node: Tree | None = tree
    i = 0
    while i < len(loc):
        step = loc[i]
        child = _step(node, step)
        nxt = loc[i + 1] if i + 1 < len(loc) else None
        if isinstance(nxt, int) and isinstance(item := _step(child, nxt), dict):
            if step == "partitions" and partition is None:
                partition = partition_label(_name_of(item, nxt) if "name" in item else "")
                node, keys, i = item, [], i + 2
                continue
            if step == "queues" and partition is not None:
                queue = _queue_path(queue, _name_of(item, nxt), child)
                node, keys, i = item, [], i + 2
                continue
        keys.append(str(step))
        node, i = child, i + 1
    return partition, queue, keys


def _queue_path(parent: str | None, name: str, siblings: Tree | None) -> str:
    if parent is not None:
        return f"{parent}.{name.lower()}"
    # top level of a partition: a single queue named root is root, else root is inserted
    single = isinstance(siblings, list) and len(siblings) == 1
    if single and name.lower() == ROOT:
        return ROOT
    return f"{ROOT}.{name.lower()}"


def _step(node: Tree | None, step: int | str) -> Tree | None:
    if isinstance(node, dict) and isinstance(step, str):
        return node.get(step)
    if isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
        return node[step]
    return None
