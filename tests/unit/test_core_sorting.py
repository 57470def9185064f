"""Sorting rules (docs/semantics.md#sorting): apps, queues, asks and nodes, through the core."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.node_index import NodeIndex
from projections.policies import NodeSortPolicy, usage_score
from tests.oracles.node_order import sorted_node_ids
from tests.sim import SCHEDULE, app, ask, node, of_type, placements, run


def leaf_config(props: str = "", parent_props: str = "", node_policy: str = "fair", weights: str = "") -> str:
    return f"""
partitions:
  - name: default
    nodesortpolicy:
      type: {node_policy}
      {weights}
    queues:
      - name: root
        submitacl: '*'
        properties: {{{parent_props}}}
        queues:
          - name: q
            properties: {{{props}}}
"""


def order_of_apps(props: str, lines: list[dict[str, Any]]) -> list[str]:
    outputs, _ = run(lines, leaf_config(props))
    return [d["app_id"] for d in of_type(outputs, "allocation.decided")]


def t(ms: int) -> str:
    return f"1970-01-01T00:00:{ms // 1000:02d}.{ms % 1000:03d}Z"


def three_apps(p_first: int, p_second: int, p_third: int) -> list[dict[str, Any]]:
    return [
        node("n1", vcore=10_000, memory=10_000),
        {**app("a1", "root.q"), "time": t(1)},
        {**app("a2", "root.q"), "time": t(2)},
        {**app("a3", "root.q"), "time": t(3)},
        {**ask("a1", "x1", priority=p_first), "time": t(4)},
        {**ask("a2", "x2", priority=p_second), "time": t(5)},
        {**ask("a3", "x3", priority=p_third), "time": t(6)},
        {**SCHEDULE, "time": t(7)},
    ]


@pytest.mark.parametrize(
    ("props", "priorities", "expected"),
    [
        ("application.sort.policy: fifo", (0, 5, 5), ["a2", "a3", "a1"]),
        ("application.sort.policy: fifo, application.sort.priority: disabled", (0, 5, 5), ["a1", "a2", "a3"]),
        ("application.sort.policy: FIFO", (0, 0, 9), ["a3", "a1", "a2"]),  # unknown value → fifo
        ("application.sort.policy: fair", (0, 0, 0), ["a1", "a2", "a3"]),
    ],
)
def test_app_order_in_a_leaf(props: str, priorities: tuple[int, int, int], expected: list[str]) -> None:
    assert order_of_apps(props, three_apps(*priorities)) == expected


def test_fair_policy_prefers_least_used_app() -> None:
    lines = [
        node("n1", vcore=10_000, memory=10_000),
        app("a1", "root.q"), app("a2", "root.q"),
        ask("a1", "a1-1"), ask("a1", "a1-2"), ask("a1", "a1-3"),
        ask("a2", "a2-1"), ask("a2", "a2-2"),
        SCHEDULE,
    ]
    outputs, _ = run(lines, leaf_config("application.sort.policy: fair"))
    assert [d["ask_id"] for d in of_type(outputs, "allocation.decided")] == ["a1-1", "a2-1", "a1-2", "a2-2", "a1-3"]


def test_fifo_policy_drains_oldest_app_first() -> None:
    lines = [node("n1", vcore=10_000, memory=10_000), app("a1", "root.q"), app("a2", "root.q"),
             ask("a1", "a1-1"), ask("a2", "a2-1"), ask("a1", "a1-2"), SCHEDULE]
    outputs, _ = run(lines, leaf_config("application.sort.policy: fifo"))
    assert [d["ask_id"] for d in of_type(outputs, "allocation.decided")] == ["a1-1", "a1-2", "a2-1"]


def test_stateaware_allows_one_starting_app_at_a_time() -> None:
    lines = [
        node("n1", vcore=10_000, memory=10_000),
        app("a1", "root.q"), app("a2", "root.q"),
        ask("a1", "a1-1"), ask("a2", "a2-1"), ask("a2", "a2-2"),
        {**SCHEDULE, "data": {"max_allocations": 1}},
        SCHEDULE,
    ]
    outputs, state = run(lines, leaf_config("application.sort.policy: stateaware"))
    # a1 gets its one ask and sits in Starting (nothing pending): it blocks a2.
    assert [d["ask_id"] for d in of_type(outputs, "allocation.decided")] == ["a1-1"]
    assert state["apps"]["a1"]["state"] == "Starting"
    assert state["apps"]["a2"]["state"] == "Accepted"


def test_stateaware_unblocks_after_the_starting_timeout() -> None:
    lines = [
        node("n1", vcore=10_000, memory=10_000),
        app("a1", "root.q"), app("a2", "root.q"),
        ask("a1", "a1-1"), ask("a2", "a2-1"),
        {**SCHEDULE, "time": "1970-01-01T00:00:01Z"},
        {**SCHEDULE, "time": "1970-01-01T00:06:00Z"},
    ]
    outputs, state = run(lines, leaf_config("application.sort.policy: stateaware"))
    assert [d["ask_id"] for d in of_type(outputs, "allocation.decided")] == ["a1-1", "a2-1"]
    assert state["apps"]["a1"]["state"] == "Running"


def test_asks_sort_by_priority_then_creation_time() -> None:
    lines = [node("n1", vcore=10_000, memory=10_000), app("a", "root.q"),
             ask("a", "old-low", priority=1), ask("a", "new-high", priority=9),
             ask("a", "old-high", priority=9, ), SCHEDULE]
    outputs, _ = run(lines, leaf_config())
    assert [d["ask_id"] for d in of_type(outputs, "allocation.decided")] == ["new-high", "old-high", "old-low"]


def test_an_ask_that_fits_nowhere_does_not_block_the_next() -> None:
    lines = [node("n1", vcore=1000, memory=1000), app("a", "root.q"),
             ask("a", "huge", vcore=5000, priority=9), ask("a", "small", vcore=500, memory=500), SCHEDULE]
    outputs, state = run(lines, leaf_config())
    assert placements(outputs) == [("small", "n1")]
    assert state["apps"]["a"]["pending"] == {"memory": 1000, "vcore": 5000}


def queue_config(sort_priority: str) -> str:
    return f"""
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        properties: {{application.sort.priority: {sort_priority}}}
        queues:
          - name: a
            resources: {{guaranteed: {{vcore: 10}}}}
          - name: b
            resources: {{guaranteed: {{vcore: 10}}}}
"""


@pytest.mark.parametrize(("sort_priority", "expected"), [("enabled", "b"), ("disabled", "a")])
def test_queue_order_priority_vs_fair_share(sort_priority: str, expected: str) -> None:
    # a already uses 1 vcore of its 10 guaranteed (share 0.1) at priority 0; b uses 2 (0.2)
    # but asks at priority 5. Priority first picks b; fair share first picks a.
    lines = [
        node("n1", vcore=3000 + 1000, memory=100_000),
        app("xa", "root.a"), app("xb", "root.b"),
        ask("xa", "a0", vcore=1000), ask("xb", "b0", vcore=1000), ask("xb", "b00", vcore=1000), SCHEDULE,
        ask("xa", "a1", vcore=1000, priority=0), ask("xb", "b1", vcore=1000, priority=5),
        {**SCHEDULE, "data": {"max_allocations": 1}},
    ]
    outputs, _ = run(lines, queue_config(sort_priority))
    last = of_type(outputs, "allocation.decided")[-1]
    assert last["queue"] == f"root.{expected}"


@pytest.mark.parametrize(
    ("policy", "expected_first"), [("fair", "n-empty"), ("binpacking", "n-busy")]
)
def test_node_policies(policy: str, expected_first: str) -> None:
    lines = [
        node("n-busy", vcore=4000, memory=4000), node("n-empty", vcore=4000, memory=4000),
        app("a", "root.q"), ask("a", "first", vcore=2000, memory=2000, required_node="n-busy"), SCHEDULE,
        ask("a", "second", vcore=1000, memory=1000), SCHEDULE,
    ]
    outputs, _ = run(lines, leaf_config(node_policy=policy))
    assert placements(outputs) == [("first", "n-busy"), ("second", expected_first)]


def test_resource_weights_change_node_order() -> None:
    # YuniKorn's weighting example: {vcore: 4, memory: 1}; usage (0.25, 0.75) → 0.35 and
    # (0.75, 0.25) → 0.65, so fair picks the first.
    weights = {"vcore": 4.0, "memory": 1.0}
    assert usage_score({"vcore": 4, "memory": 4}, {"vcore": 3, "memory": 1}, weights) == pytest.approx(0.35)
    assert usage_score({"vcore": 4, "memory": 4}, {"vcore": 1, "memory": 3}, weights) == pytest.approx(0.65)
    assert usage_score({"vcore": 4}, {"vcore": 4}, {"gpu": 1.0}) == 0.0  # no usable type
    index = NodeIndex(NodeSortPolicy.FAIR, weights)
    index.upsert("x", {"vcore": 4, "memory": 4}, {"vcore": 1, "memory": 3})
    index.upsert("y", {"vcore": 4, "memory": 4}, {"vcore": 3, "memory": 1})
    assert list(index.ordered()) == ["y", "x"]


def test_node_ties_break_by_id_and_unschedulable_nodes_are_skipped() -> None:
    lines = [node("b", vcore=4000), node("a", vcore=4000), node("0", vcore=4000, schedulable=False),
             app("x", "root.q"), ask("x", "k"), SCHEDULE]
    outputs, _ = run(lines, leaf_config())
    assert placements(outputs) == [("k", "a")]


def test_node_index_matches_reference_sort_after_many_updates() -> None:
    import random

    rng = random.Random(3)
    index = NodeIndex(NodeSortPolicy.BINPACKING, {"vcore": 1.0, "memory": 1.0}, block_size=4)
    nodes: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
    for step in range(600):
        nid = f"n{rng.randrange(40)}"
        if nid in nodes and rng.random() < 0.2:
            index.remove(nid)
            del nodes[nid]
        else:
            cap = {"vcore": 8, "memory": 8}
            avail = {"vcore": rng.randrange(9), "memory": rng.randrange(9)}
            index.upsert(nid, cap, avail)
            nodes[nid] = (cap, avail)
        if step % 50 == 0:
            index.check()
    index.check()
    expected = sorted_node_ids(NodeSortPolicy.BINPACKING, index.weights, nodes)
    assert list(index.ordered()) == expected
    want = {"vcore": 5, "memory": 6}
    first = next((n for n in expected if nodes[n][1]["vcore"] >= 5 and nodes[n][1]["memory"] >= 6), None)
    assert index.first_fit(want) == first


index_op = st.one_of(
    st.tuples(st.just("upsert"), st.integers(0, 11), st.integers(0, 9), st.integers(0, 9)),
    st.tuples(st.just("remove"), st.integers(0, 11), st.just(0), st.just(0)),
    st.tuples(st.just("probe"), st.just(0), st.integers(0, 11), st.integers(0, 11)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(index_op, max_size=80), st.sampled_from([1, 2, 4]))
def test_first_fit_with_the_index_bound_equals_a_scan(ops: list[tuple[str, int, int, int]], block_size: int) -> None:
    """``first_fit`` (its per-dim bound answers "fits nowhere" without a look at a block, and
    is made exact by a search that finds nothing) gives the first fitting node in from-scratch
    order, as nodes are indexed, moved and removed; probes of one, two and three dims."""
    index = NodeIndex(NodeSortPolicy.FAIR, {"vcore": 1.0, "memory": 1.0}, block_size=block_size)
    nodes: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
    for op, n, a, b in ops:
        nid = f"n{n}"
        if op == "upsert":
            cap = {"vcore": 9, "memory": 9, "gpu": 2}
            avail = {"vcore": a, "memory": b, "gpu": (a + b) % 3}
            index.upsert(nid, cap, avail)
            nodes[nid] = (cap, avail)
        elif op == "remove":
            index.remove(nid)
            nodes.pop(nid, None)
        else:
            order = sorted_node_ids(NodeSortPolicy.FAIR, index.weights, nodes)
            for want in ({"vcore": a}, {"vcore": a, "memory": b}, {"vcore": a, "memory": b, "gpu": 1}):
                expected = next((x for x in order if all(nodes[x][1].get(k, 0) >= q for k, q in want.items())),
                                None)
                assert index.first_fit(want) == expected
        index.check()
