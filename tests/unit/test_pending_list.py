"""Pending asks with their place and every reason (``replay.explain.pending_list``), what would let them run
(``replay.explain.remedy``) and the try order they come in (``scheduler.core.try_order``)."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from events.models import AllocationDecided
from replay.explain.pending_list import MAX_LIMIT, UnknownQueue, pending_in_queue, render_pending_list
from scheduler.config import load_config
from scheduler.core.try_order import try_order
from scheduler.simulation.simulate import Simulation
from tests.sim import SCHEDULE, app, ask, node, root_queues

CONFIG = root_queues("""
          - name: hi
            properties: {priority.offset: "10"}
            queues:
              - name: x
              - name: y
                properties: {application.sort.policy: fair}
          - name: lo
            resources: {max: {vcore: 3}}
          - name: limited
            maxapplications: 1
""")


def _sim(*lines: dict[str, Any]) -> Simulation:
    sim = Simulation(load_config(CONFIG))
    for line in lines:
        sim.feed(orjson.dumps(line))
    return sim


def _workload(rng: random.Random) -> list[dict[str, Any]]:
    """Apps in every leaf with asks of one size and mixed priorities; no node yet."""
    lines: list[dict[str, Any]] = []
    for i in range(rng.randint(3, 8)):
        queue = rng.choice(["root.hi.x", "root.hi.y", "root.lo", "root.limited"])
        lines.append(app(f"a{i}", queue))
        for k in range(rng.randint(1, 4)):
            lines.append(ask(f"a{i}", f"k{k}", priority=rng.randint(0, 3)))
    return lines


@pytest.mark.parametrize("seed", range(12))
def test_each_cycle_allocates_the_first_ask_of_the_try_order_that_can_run(seed: int) -> None:
    """Nodes come one at a time, each with room for exactly one ask: every cycle's decision is
    the first ask, in the order listed just before it, that nothing holds back (no reasons)."""
    rng = random.Random(seed)
    sim = _sim(*_workload(rng), SCHEDULE)
    part = sim.engine.state.partitions["default"]
    decisions = 0
    for n in range(12):
        assert sim.feed(orjson.dumps(node(f"n{n}", vcore=1000, memory=1000))) == []  # applied; no cycle yet
        report = pending_in_queue(sim.engine, "default", "root", limit=MAX_LIMIT)
        order = [(a.app_id, k.ask_id) for a, k in try_order(part)]
        listed = [(i["applicationID"], i["allocationKey"]) for i in report["items"]]
        assert listed == order and [i["positionInPartition"] for i in report["items"]] == list(range(1, len(order) + 1))
        expected = next(((i["applicationID"], i["allocationKey"]) for i in report["items"] if not i["reasons"]), None)
        outputs = sim.feed(orjson.dumps(SCHEDULE))
        decided = [(o.data.app_id, o.data.ask_id) for o in outputs if isinstance(o.data, AllocationDecided)]
        assert decided == ([expected] if expected is not None else []), (seed, n, report["items"][:3])
        decisions += len(decided)
    assert decisions >= 3  # the workloads are not all held back


def test_positions_in_a_parent_queue_and_its_leaves() -> None:
    sim = _sim(app("p", "root.hi.x"), ask("p", "p1", priority=1), ask("p", "p2", priority=5),
               app("q", "root.hi.y"), ask("q", "q1"), app("r", "root.lo"), ask("r", "r1"), SCHEDULE)
    whole = pending_in_queue(sim.engine, "default", "root")
    assert [(i["allocationKey"], i["positionInQueue"], i["positionInPartition"]) for i in whole["items"]] == [
        ("p2", 1, 1), ("p1", 2, 2), ("q1", 3, 3), ("r1", 4, 4)]  # hi (offset 10) first; p2's priority 5 first
    hi = pending_in_queue(sim.engine, "default", "root.hi")
    assert hi["total"] == 3 and hi["partitionTotal"] == 4
    assert [i["positionInLeafQueue"] for i in whole["items"]] == [1, 2, 1, 1]
    lo = pending_in_queue(sim.engine, "default", "root.lo")
    assert [(i["allocationKey"], i["positionInQueue"], i["positionInPartition"]) for i in lo["items"]] == [
        ("r1", 1, 4)]
    page = pending_in_queue(sim.engine, "default", "root", offset=1, limit=2)
    assert [(i["allocationKey"], i["positionInQueue"]) for i in page["items"]] == [("p1", 2), ("q1", 3)]
    one = pending_in_queue(sim.engine, "default", "root", only=("q", "q1"))
    assert [(i["allocationKey"], i["positionInQueue"]) for i in one["items"]] == [("q1", 3)]
    with pytest.raises(UnknownQueue):
        pending_in_queue(sim.engine, "default", "root.nope")
    with pytest.raises(UnknownQueue):
        pending_in_queue(sim.engine, "nope", "root")
    with pytest.raises(ValueError):
        pending_in_queue(sim.engine, "default", "root", limit=MAX_LIMIT + 1)


def _item(sim: Simulation, app_id: str, ask_id: str) -> dict[str, Any]:
    report = pending_in_queue(sim.engine, "default", "root", only=(app_id, ask_id))
    assert len(report["items"]) == 1
    item: dict[str, Any] = report["items"][0]
    return item


def _kinds(item: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["kind"]: f["change"] for f in item["wouldRun"]}


def test_queue_max_says_the_new_max_the_release_and_the_largest_ask() -> None:
    sim = _sim(node("n1", vcore=8000, memory=8000), app("r", "root.lo"), ask("r", "r1", vcore=2000),
               ask("r", "r2", vcore=2000), SCHEDULE)
    item = _item(sim, "r", "r2")
    assert [r["rule"] for r in item["reasons"]] == ["docs/semantics.md#queue-max"]
    fixes = _kinds(item)
    assert fixes["raise-quota"] == {"queue": "root.lo", "max": {"vcore": 4000}, "release": {"vcore": 1000}}
    assert fixes["shrink-ask"] == {"resources": {"vcore": 1000, "memory": 1000}, "node": "n1"}
    # Each remedy, applied, lets it run: the largest ask that fits is allocated next cycle.
    sim.feed(orjson.dumps({"type": "ask.removed", "data": {"app_id": "r", "ask_id": "r2"}}))
    out = sim.feed(orjson.dumps(ask("r", "r3", vcore=1000))) + sim.feed(orjson.dumps(SCHEDULE))
    assert [o.data.ask_id for o in out if isinstance(o.data, AllocationDecided)] == ["r3"]


def test_no_node_fits_says_the_smallest_shrink_the_release_and_the_node_to_add() -> None:
    sim = _sim(node("n1", vcore=4000, memory=4000), node("n2", vcore=4000, memory=4000),
               app("p", "root.hi.x"), ask("p", "big", vcore=3000, memory=3000), ask("p", "mid", vcore=2000),
               SCHEDULE)
    # big went to one node (1000/1000 left), mid to the other (2000 vcore, 3000 memory left)
    sim.feed(orjson.dumps(ask("p", "more", vcore=3000, memory=1000)))
    sim.feed(orjson.dumps(ask("p", "huge", vcore=9000, memory=1000)))
    sim.feed(orjson.dumps(SCHEDULE))
    item = _item(sim, "p", "more")
    assert [r["rule"] for r in item["reasons"]] == ["docs/semantics.md#choosing-a-node"]
    fixes = _kinds(item)
    assert fixes["shrink-ask"]["resources"] == {"vcore": 2000, "memory": 1000}
    assert fixes["release"]["release"] == {"vcore": 1000} and fixes["release"]["allocation"] == "p/mid"
    assert "add-node" not in fixes  # a node could hold it once freed
    huge = _kinds(_item(sim, "p", "huge"))
    assert huge["add-node"] == {"capacity": {"vcore": 9000, "memory": 1000}}
    text = render_pending_list(pending_in_queue(sim.engine, "default", "root.hi"))
    assert "p/more" in text and "to run: ask for memory" in text and "free vcore 1 core on node" in text


def test_max_applications_says_the_limit_that_lets_it_start() -> None:
    sim = _sim(node("n1"), app("one", "root.limited"), ask("one", "o1"), app("two", "root.limited"),
               ask("two", "t1"), SCHEDULE)
    item = _item(sim, "two", "t1")
    assert [r["rule"] for r in item["reasons"]] == ["docs/semantics.md#maxapplications"]
    assert _kinds(item)["raise-quota"] == {"queue": "root.limited", "max_applications": 2}


def test_nothing_holding_it_has_no_remedy() -> None:
    sim = _sim(app("p", "root.hi.x"), ask("p", "p1"))  # no cycle ran since the ask came
    sim.feed(orjson.dumps(node("n1")))
    item = _item(sim, "p", "p1")
    assert item["reasons"] == [] and item["wouldRun"] == []


def test_user_limits_say_the_new_maxresources_and_maxapplications() -> None:
    from tests.unit.test_user_limits import LIMITS

    sim = Simulation(load_config(LIMITS))
    for line in (node("n1", vcore=20_000, memory=20_000), app("a", "root.shared", user="alice"),
                 *[ask("a", f"a{i}") for i in range(3)], app("b1", "root.shared", user="bob"),
                 app("b2", "root.shared", user="bob"), ask("b1", "k1"), ask("b2", "k2"), SCHEDULE):
        sim.feed(orjson.dumps(line))
    alice = _item(sim, "a", "a2")
    assert [r["rule"] for r in alice["reasons"]] == ["docs/semantics.md#user-and-group-limits"]
    assert _kinds(alice)["raise-quota"] == {"user": "alice", "queue": "root.shared", "max": {"vcore": 3000},
                                           "release": {"vcore": 1000}}
    bob = _item(sim, "b2", "k2")
    assert _kinds(bob)["raise-quota"] == {"user": "bob", "queue": "root.shared", "max_applications": 2}
