"""Queue and app priority rules (docs/semantics.md#priorities), with YuniKorn's own cases."""

from __future__ import annotations

from typing import Any

import pytest

from projections.priority import MAX_PRIORITY, MIN_PRIORITY, adjusted, clamp_int32
from tests.sim import SCHEDULE, app, ask, node, root_queues, run


def tree(parent_props: str, leaf_props: str) -> str:
    return root_queues(f"""
        - name: parent
          properties: {{{parent_props}}}
          queues:
            - name: leaf
              properties: {{{leaf_props}}}
    """)


def priorities(state: dict[str, Any], *paths: str) -> tuple[int, ...]:
    return tuple(state["queues"][p]["priority"] for p in paths)


@pytest.mark.parametrize(
    ("parent_props", "leaf_props", "first", "second"),
    [
        # YuniKorn TestQueuePriority-style: offsets add up the tree.
        ("priority.offset: '5'", "priority.offset: '3'", (3, 8), (8, 13)),
        # A fenced leaf always reports its offset, whatever its apps ask.
        ("priority.offset: '5'", "priority.offset: '3', priority.policy: fence", (3, 8), (3, 8)),
        # A fenced parent hides everything below it.
        ("priority.offset: '5', priority.policy: Fence", "priority.offset: '3'", (3, 5), (8, 5)),
        # No offsets: priorities pass straight up.
        ("", "", (0, 0), (5, 5)),
        # Invalid offsets fall back to 0.
        ("priority.offset: 'x'", "priority.offset: '99999999999'", (0, 0), (5, 5)),
    ],
)
def test_offsets_and_fences(
    parent_props: str, leaf_props: str, first: tuple[int, ...], second: tuple[int, ...]
) -> None:
    config = tree(parent_props, leaf_props)
    base = [app("a", "root.parent.leaf"), ask("a", "x", vcore=10**9, priority=0)]
    _, state = run(base, config)
    assert priorities(state, "root.parent.leaf", "root.parent") == first
    _, state = run([*base, ask("a", "y", vcore=10**9, priority=5)], config)
    assert priorities(state, "root.parent.leaf", "root.parent") == second


def test_empty_queue_has_min_priority_even_when_fenced() -> None:
    _, state = run([], tree("priority.offset: '5'", "priority.policy: fence, priority.offset: '3'"))
    assert priorities(state, "root.parent.leaf", "root.parent", "root") == (MIN_PRIORITY,) * 3


def test_priority_drops_when_the_top_ask_is_allocated() -> None:
    lines = [node("n1", vcore=1000), app("a", "root.parent.leaf"),
             ask("a", "hi", vcore=1000, priority=7), ask("a", "lo", vcore=1000, priority=2), SCHEDULE]
    _, state = run(lines, tree("priority.offset: '5'", "priority.offset: '3'"))
    assert state["apps"]["a"]["priority"] == 2
    assert priorities(state, "root.parent.leaf", "root.parent") == (5, 10)


def test_clamping_at_int32_edges() -> None:
    assert clamp_int32(MAX_PRIORITY + 10) == MAX_PRIORITY
    assert adjusted(MAX_PRIORITY, fence=False, offset=100) == MAX_PRIORITY
    assert adjusted(MIN_PRIORITY + 1, fence=False, offset=-100) == MIN_PRIORITY
    lines = [app("a", "root.parent.leaf"), ask("a", "x", priority=MAX_PRIORITY - 1, vcore=10**9)]
    _, state = run(lines, tree("priority.offset: '5'", "priority.offset: '3'"))
    assert priorities(state, "root.parent.leaf", "root.parent") == (MAX_PRIORITY, MAX_PRIORITY)


def test_offset_and_policy_have_no_effect_on_root() -> None:
    config = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        properties: {priority.offset: '50', priority.policy: fence}
        queues:
          - name: leaf
"""
    _, state = run([app("a", "root.leaf"), ask("a", "x", priority=4, vcore=10**9)], config)
    assert state["queues"]["root"]["priority"] == 4


def test_higher_priority_queue_is_served_first() -> None:
    config = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: low
          - name: high
            properties: {priority.offset: '10'}
"""
    lines = [node("n1", vcore=1000), app("a", "root.low"), app("b", "root.high"),
             ask("a", "a1", vcore=1000), ask("b", "b1", vcore=1000), SCHEDULE]
    outputs, _ = run(lines, config)
    decided = [o["data"]["ask_id"] for o in outputs if o["type"] == "allocation.decided"]
    assert decided == ["b1"]
