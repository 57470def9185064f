"""Draining queues: a queue a new config drops while it still holds apps (YuniKorn ``MarkQueueForRemoval``).

The queue stays in the tree, with the settings it had when it was dropped, until its last
app leaves; meanwhile its apps keep running and scheduling, and no new app may enter it.
A partition keeps, per draining leaf, the text of the configuration it was last part of,
so its settings (and any ancestor the new config also dropped) can be grafted onto the
tree the current config builds — here, after a snapshot, and after every change.

Worked example: config 1 has ``root.a.x``; config 2 has only ``root.b``. While an app runs
in ``root.a.x`` the tree is ``root`` → [``b``, ``a`` → [``x``]]: ``a`` keeps only the
draining child, draining subtrees come after the configured children, in path order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from scheduler.config import QueueSpec, load_config


def chain_of(root: QueueSpec, path: str) -> list[QueueSpec] | None:
    """The specs from root down to ``path`` (None when the path is not in the tree)."""
    parts = path.split(".")
    if parts[0] != root.name:
        return None
    chain = [root]
    for name in parts[1:]:
        found = next((kid for kid in chain[-1].children if kid.name == name), None)
        if found is None:
            return None
        chain.append(found)
    return chain


def graft(root: QueueSpec, chain: list[QueueSpec]) -> QueueSpec:
    """``root`` with the queue ``chain[-1]`` added at its path; missing ancestors come from ``chain``."""
    if len(chain) == 1:
        return root
    name = chain[1].name
    kids = list(root.children)
    for i, kid in enumerate(kids):
        if kid.name == name:
            if kid.is_leaf or len(chain) == 2:
                return root  # the path exists (as a leaf, or the leaf is there already)
            kids[i] = graft(kid, chain[1:])
            return dataclasses.replace(root, children=tuple(kids))
    sub = chain[1] if len(chain) == 2 else graft(dataclasses.replace(chain[1], children=()), chain[1:])
    return dataclasses.replace(root, children=(*kids, sub))


def leaf_spec_chain(config_yaml: str, partition: str, path: str) -> list[QueueSpec] | None:
    """The chain of ``path`` in the partition of a configuration text (None: not a leaf there)."""
    for spec in load_config(config_yaml).partitions:
        if spec.name == partition:
            chain = chain_of(spec.root, path)
            return chain if chain is not None and chain[-1].is_leaf else None
    return None


def effective_root(config_root: QueueSpec, partition: str, draining: Mapping[str, str]) -> QueueSpec:
    """The tree a partition schedules with: the config's, plus each draining leaf (path order)."""
    root = config_root
    for path in sorted(draining):
        chain = leaf_spec_chain(draining[path], partition, path)
        if chain is not None:
            root = graft(root, chain)
    return root
