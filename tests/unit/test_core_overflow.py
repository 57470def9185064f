"""Sums stay in 64 bits: an input whose application would push any pending, allocated,
occupied or available value out of range is rejected ``overflow`` and nothing else is lost."""

from __future__ import annotations

from typing import Any

import orjson

from events.resources import MAX_QUANTITY
from tests.sim import SCHEDULE, app, ask, node, of_type, placements, run

BIG = MAX_QUANTITY


def _reasons(outputs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(r["input_id"], r["reason"]) for r in of_type(outputs, "input.rejected")]


def _all_encodable(outputs: list[dict[str, Any]], state: dict[str, Any]) -> None:
    orjson.dumps(state)  # the state form is what the digest hashes: it must fit 64 bits
    for o in outputs:
        orjson.dumps(o)


def test_three_huge_asks_in_one_app_reject_the_one_that_would_overflow() -> None:
    lines = [node("n1", vcore=1000, memory=1000), app("a"),
             {**ask("a", "k1", vcore=BIG - 200, memory=1), "id": "i1"},
             {**ask("a", "k2", vcore=BIG, memory=1), "id": "i2"},
             {**ask("a", "k3", vcore=0, memory=1), "id": "i3"}, ask("a", "k4", vcore=100, memory=100), SCHEDULE]
    outputs, state = run(lines)
    assert _reasons(outputs) == [("i2", "overflow")]
    assert state["apps"]["a"]["pending"] == {"vcore": BIG - 200, "memory": 1}  # k1 pending
    assert placements(outputs) == [("k3", "n1"), ("k4", "n1")]
    _all_encodable(outputs, state)


def test_huge_asks_in_two_apps_of_one_queue_overflow_the_queue() -> None:
    lines = [app("a"), app("b"), ask("a", "k1", vcore=BIG), {**ask("b", "k2", vcore=BIG), "id": "i2"}, SCHEDULE]
    outputs, state = run(lines)
    assert _reasons(outputs) == [("i2", "overflow")]
    _all_encodable(outputs, state)


def test_an_ask_update_that_would_overflow_is_rejected_and_the_old_ask_stays() -> None:
    lines = [app("a"), ask("a", "k1", vcore=BIG - 10), ask("a", "k2", vcore=5),
             {**ask("a", "k2", vcore=11), "id": "up"}, SCHEDULE]
    outputs, state = run(lines)
    assert _reasons(outputs) == [("up", "overflow")]
    assert state["apps"]["a"]["pending"]["vcore"] == BIG - 5
    _all_encodable(outputs, state)


def test_occupied_after_an_allocation_cannot_push_available_out_of_range() -> None:
    lines = [node("n1", vcore=BIG, memory=BIG), app("a"), ask("a", "k1", vcore=BIG, memory=1), SCHEDULE,
             {"type": "node.updated", "id": "u1",
              "data": {"node_id": "n1", "capacity": {}, "occupied": {"vcore": BIG}}},
             {"type": "node.updated", "id": "u2", "data": {"node_id": "n1", "occupied": {"vcore": 7}}}, SCHEDULE]
    outputs, state = run(lines)
    assert _reasons(outputs) == [("u1", "overflow")]
    assert state["nodes"]["n1"]["capacity"]["vcore"] == BIG
    _all_encodable(outputs, state)


def test_cluster_capacity_sum_cannot_overflow() -> None:
    lines = [node("n1", vcore=BIG), {**node("n2", vcore=1), "id": "n2"}, node("n3", vcore=0, memory=5),
             {"type": "node.updated", "id": "u", "data": {"node_id": "n3", "capacity": {"vcore": 1}}}, SCHEDULE]
    outputs, state = run(lines)
    assert _reasons(outputs) == [("n2", "overflow"), ("u", "overflow")]
    assert set(state["nodes"]) == {"n1", "n3"}
    _all_encodable(outputs, state)
