"""Sum bounds: the checks that keep every roll-up inside a signed 64-bit integer.

Each quantity of an input is at most 2^63−1, but sums are not: two such asks in one
queue, or a node whose occupied resources exceed its capacity plus what we allocated,
would leave values no log record, snapshot or state digest can hold. Rather than let one
such input stop every later cycle, ``apply`` asks these checks first and rejects the
input ``overflow``, changing nothing.

Why the root alone is enough for pending and allocated: every app's and queue's
``pending + allocated`` is part of its partition root's, allocating moves an amount from
pending to allocated (the sum stays), and a node's allocated is part of root's allocated.
So ``root.pending + root.allocated ≤ 2^63−1`` per resource bounds every one of them.
A node's available (capacity − occupied − allocated) is bounded on every node change, and
the partition's cluster capacity (the sum of its nodes') on every capacity change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import orjson

from events.resources import MAX_QUANTITY, Resources
from scheduler.config.resolve import RESOURCE_TYPES_MAX, resource_types_max
from scheduler.core.objects import Node
from scheduler.core.partition import PartitionState

MIN_VALUE: Final = -(2**63)


def pending_growth_problem(part: PartitionState, grow: Resources, shrink: Resources) -> str | None:
    """Why the partition's pending cannot grow by ``grow − shrink`` (None when it can).

    Typed ``dict`` (not ``Mapping``): compiled, the loop runs on dict operations directly,
    and it runs for every ask added.
    """
    root = part.root
    for name, amount in grow.items():
        total = root.pending.get(name, 0) + root.allocated.get(name, 0) + amount - shrink.get(name, 0)
        if total > MAX_QUANTITY:
            return (
                f"pending plus allocated {name} in partition {part.name!r} would reach {total}, "
                f"past the 64-bit limit {MAX_QUANTITY}"
            )
    return None


def resource_types_problem(part: PartitionState, adding: dict[str, int], node: Node | None = None) -> str | None:
    """Why the resource types of ``adding`` (an ask's resources, or a node's capacity and
    occupied replacing ``node``'s) would take the partition past its bound (None: they fit).

    The types in use are those in any node's capacity or occupied, or in any pending or
    allocated ask (the root's roll-ups): each one becomes a column of the node index, for
    every schedulable node. The common input names only types in use: three dict look-ups
    each; the count is made only when a new name appears.
    """
    root = part.root
    types = part.node_types
    new = [name for name in adding if name not in types and name not in root.pending and name not in root.allocated]
    if not new:
        return None
    in_use = set(types) | set(root.pending) | set(root.allocated)
    if node is not None:  # the node's own types that only it names go with its old values
        for name in node.capacity.keys() | node.occupied.keys():
            if types.get(name) == 1 and name not in adding and name not in root.pending and name not in root.allocated:
                in_use.discard(name)
    limit = resource_types_max(part.config_root.properties.get(RESOURCE_TYPES_MAX))
    total = len(in_use) + len(new)
    if total <= limit:
        return None
    return (f"{len(new)} resource types new to partition {part.name!r} (first {sorted(new)[0]!r}) would make "
            f"{total} in use, past its bound of {limit} (root queue property {RESOURCE_TYPES_MAX})")


def node_change_problem(
    part: PartitionState, node: Node | None, node_id: str, capacity: Mapping[str, int], occupied: Mapping[str, int]
) -> str | None:
    """Why a node (``node`` None: a new one) cannot take this capacity and occupied."""
    allocated: Mapping[str, int] = node.allocated if node is not None else {}
    for name in capacity.keys() | occupied.keys() | allocated.keys():
        available = capacity.get(name, 0) - occupied.get(name, 0) - allocated.get(name, 0)
        if available < MIN_VALUE:
            return f"available {name} of node {node_id!r} would be {available}, past the 64-bit limit {MIN_VALUE}"
    old: Mapping[str, int] = node.capacity if node is not None else {}
    for name, amount in capacity.items():
        total = part.cluster_capacity.get(name, 0) - old.get(name, 0) + amount
        if total > MAX_QUANTITY:
            return (
                f"the capacity of partition {part.name!r} would reach {total} {name}, "
                f"past the 64-bit limit {MAX_QUANTITY}"
            )
    return None


# An ``allocation.decided`` echoes its ask's resources and ids: it must fit one Kafka
# message (Apache Kafka's default ``message.max.bytes`` is 1 MiB with the batch overhead),
# so a decision is kept under 1,000,000 bytes. Everything it holds besides the resources,
# the ask and app ids and the queue path — node id (≤ 253 characters), decision id,
# partition, numbers, envelope — fits in DECISION_OVERHEAD.
MAX_DECISION_BYTES: Final = 1_000_000
DECISION_OVERHEAD: Final = 2048


def decision_size_problem(resources: Mapping[str, int], ask_id: str, app_id: str, queue: str) -> str | None:
    """Why the decision for such an ask could be too large to write (None when it fits)."""
    # A JSON-escaped character takes at most 6 bytes, a quantity at most 20 digits: most asks
    # are far below the limit by this bound alone, with no encoding.
    names = sum(len(name) for name in resources)
    bound = DECISION_OVERHEAD + 6 * (names + len(ask_id) + len(app_id) + len(queue)) + 26 * len(resources)
    if bound <= MAX_DECISION_BYTES:
        return None
    size = DECISION_OVERHEAD + sum(len(orjson.dumps(v)) for v in (dict(resources), ask_id, app_id, queue))
    if size > MAX_DECISION_BYTES:
        return (
            f"its decision would take up to {size} bytes (resources, ids and queue echoed), more than "
            f"{MAX_DECISION_BYTES}: it could never be written to the decisions log"
        )
    return None
