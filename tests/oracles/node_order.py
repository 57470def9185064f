"""The node order from scratch: the oracle the sorted node index (``projections.node_index.NodeIndex``) is held to."""

from __future__ import annotations

from collections.abc import Mapping

from projections.policies import NodeSortPolicy, node_sort_key


def sorted_node_ids(
    policy: NodeSortPolicy,
    weights: Mapping[str, float],
    nodes: Mapping[str, tuple[Mapping[str, int], Mapping[str, int]]],
) -> list[str]:
    """From-scratch reference order: ``nodes`` maps id → (capacity, available)."""
    return sorted(nodes, key=lambda n: (node_sort_key(policy, nodes[n][0], nodes[n][1], weights), n))
