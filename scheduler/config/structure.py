"""The normal form of a raw partition: its YuniKorn name, an explicit root, and a queue walk.

YuniKorn (``checkQueuesStructure``) inserts a root queue when the top level of a partition
is not exactly one queue named ``root`` (any case): the top-level queues become its
children. Root is always a parent queue. Partition-level ``limits`` apply to root when root
has none of its own (``checkLimitsStructure``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from scheduler.config.model import RawPartition, RawQueue

ROOT = "root"
DEFAULT_PARTITION = "default"


def partition_label(name: str) -> str:
    """YuniKorn's partition naming: empty or any case of 'default' → 'default', else lower."""
    lowered = name.lower()
    return DEFAULT_PARTITION if lowered in ("", DEFAULT_PARTITION) else lowered


@dataclass(frozen=True)
class NormalPartition:
    """A raw partition with its final name and root (``None`` when ``queues`` is not set)."""

    index: int
    name: str
    raw: RawPartition
    root: RawQueue | None
    root_inserted: bool


@dataclass(frozen=True)
class QueueVisit:
    """One queue met on a walk: its lower-case path, config and parent path (None at root)."""

    path: str
    queue: RawQueue
    parent_path: str | None


def normalise(index: int, raw: RawPartition) -> NormalPartition:
    """Name the partition and make its root explicit."""
    name = partition_label(raw.name)
    if raw.queues is None:
        return NormalPartition(index, name, raw, None, False)
    top = raw.queues
    inserted = not (len(top) == 1 and top[0].name.lower() == ROOT)
    if inserted:
        root = RawQueue.model_construct(name=ROOT, parent=True, queues=list(top))
    else:
        root = top[0].model_copy(update={"parent": True})
    if raw.limits and not root.limits:
        root = root.model_copy(update={"limits": list(raw.limits)})
    return NormalPartition(index, name, raw, root, inserted)


def children(queue: RawQueue) -> list[RawQueue]:
    """The configured child queues, in config order."""
    return list(queue.queues or [])


def child_path(parent_path: str, child: RawQueue) -> str:
    """Lower-case full path of a child queue."""
    return f"{parent_path}.{child.name.lower()}"


def walk(root: RawQueue) -> Iterator[QueueVisit]:
    """Depth-first, pre-order, config order: root first."""
    stack: list[QueueVisit] = [QueueVisit(ROOT, root, None)]
    while stack:
        node = stack.pop()
        yield node
        kids = children(node.queue)
        for kid in reversed(kids):
            stack.append(QueueVisit(child_path(node.path, kid), kid, node.path))


def is_leaf(queue: RawQueue, is_root: bool) -> bool:
    """A leaf has no configured children and is not marked ``parent: true``; root never is."""
    return not is_root and not queue.parent and not queue.queues
