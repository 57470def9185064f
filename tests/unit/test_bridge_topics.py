"""Topic mapping, the StatusTracker (changes only, resync) and route_cycle."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from events.codec import encode_output
from events.models import (
    AllocationDecided,
    AllocationRevoked,
    AppStateChanged,
    CycleCompleted,
    OutputEvent,
)
from scheduler.bridge.topics import (
    StatusTracker,
    decisions_topic,
    escape_level,
    ingest_filter,
    node_topic,
    parse_ingest_topic,
    queue_topic,
    route_cycle,
    route_status,
    topic_matches,
    unescape_level,
)

P = "default"


def status(priority: int = 0, running: int = 0, **pending: int) -> dict[str, Any]:
    return {"priority": priority, "pending": pending, "allocated": {}, "running_apps": running}


def decided(n: int, node: str) -> OutputEvent:
    data = AllocationDecided(
        decision_id=f"d{n}", cycle=1, ask_id=f"ask{n}", app_id="app1", partition=P,
        queue="root.a", node_id=node, resources={"vcore": 1000}, priority=0,
    )  # fmt: skip
    return OutputEvent(id=f"d{n}", source="evsched", type="allocation.decided", time="t", data=data)


def revoked(n: int, node: str) -> OutputEvent:
    data = AllocationRevoked(app_id="app1", ask_id=f"ask{n}", node_id=node, reason="node-removed")
    return OutputEvent(id=f"r{n}", source="evsched", type="allocation.revoked", time="t", data=data)


def other_outputs() -> list[OutputEvent]:
    changed = AppStateChanged.model_validate({"app_id": "app1", "from": "New", "to": "Accepted"})
    done = CycleCompleted(cycle=1, time="t", inputs_through={}, decisions=2, state_digest="x")
    return [
        OutputEvent(id="s1", source="evsched", type="app.state_changed", time="t", data=changed),
        OutputEvent(id="c1", source="evsched", type="cycle.completed", time="t", data=done),
    ]


def test_topic_layout() -> None:
    assert decisions_topic(P) == "evsched/default/decisions"
    assert node_topic(P, "n1") == "evsched/default/nodes/n1/allocations"
    assert queue_topic(P, "root.a.b") == "evsched/default/queues/root/a/b"
    assert queue_topic("blue", "root") == "evsched/blue/queues/root"
    assert ingest_filter(P) == "evsched/default/ingest/nodes/+"


@pytest.mark.parametrize("name", ["n1", "a/b", "q#1", "x+y", "100%", "%2F", "é-ü", "\x00"])
def test_escape_level_is_one_safe_level_and_reversible(name: str) -> None:
    level = escape_level(name)
    assert not {"/", "+", "#", "\x00"} & set(level)
    assert unescape_level(level) == name


def test_queue_names_with_wildcard_characters_stay_inside_their_level() -> None:
    # YuniKorn allows '#' and '/' in queue names; unescaped they would be a wildcard / levels.
    assert queue_topic(P, "root.ns#1.a/b") == "evsched/default/queues/root/ns%231/a%2Fb"
    with pytest.raises(ValueError, match="empty"):
        queue_topic(P, "root..a")


@pytest.mark.parametrize(
    ("topic", "expected"),
    [
        ("evsched/default/ingest/nodes/n1", ("default", "n1")),
        ("evsched/default/ingest/nodes/n%251", ("default", "n%1")),
        ("evsched/default/ingest/nodes/", None),
        ("evsched/default/ingest/nodes", None),
        ("evsched/default/ingest/nodes/n1/x", None),
        ("evsched//ingest/nodes/n1", None),
        ("other/default/ingest/nodes/n1", None),
        ("evsched/default/ingest/apps/n1", None),
    ],
)
def test_parse_ingest_topic(topic: str, expected: tuple[str, str] | None) -> None:
    assert parse_ingest_topic(topic) == expected


@pytest.mark.parametrize(
    ("flt", "topic", "expected"),
    [
        ("a/b", "a/b", True),
        ("a/+", "a/b", True),
        ("a/+", "a/b/c", False),
        ("a/#", "a", True),
        ("a/#", "a/b/c", True),
        ("#", "a/b", True),
        ("a/b", "a/b/c", False),
        ("a/b/c", "a/b", False),
    ],
)
def test_topic_matches(flt: str, topic: str, expected: bool) -> None:
    assert topic_matches(flt, topic) is expected


def test_tracker_publishes_changes_only() -> None:
    tracker = StatusTracker()
    first = {"root.a": status(), "root.b": status()}
    assert [q for q, _ in tracker.changes(first)] == ["root.a", "root.b"]
    assert tracker.changes(first) == []
    second = {"root.a": status(priority=5, vcore=1000), "root.b": status()}
    [(queue, payload)] = tracker.changes(second)
    assert queue == "root.a"
    assert orjson.loads(payload) == status(priority=5, vcore=1000)


def test_tracker_ignores_key_order_and_extra_fields() -> None:
    tracker = StatusTracker()
    tracker.changes({"root.a": status()})
    reordered = dict(reversed(list(status().items()))) | {"fair_share": 3}
    assert tracker.changes({"root.a": reordered}) == []


def test_tracker_clears_removed_queues_once() -> None:
    tracker = StatusTracker()
    tracker.changes({"root.a": status(), "root.b": status()})
    assert tracker.changes({"root.a": status()}) == [("root.b", b"")]
    assert tracker.changes({"root.a": status()}) == []


def test_resync_makes_the_next_call_return_everything() -> None:
    tracker = StatusTracker()
    queues = {"root.a": status(), "root.b": status(running=2)}
    tracker.changes(queues)
    tracker.resync()
    assert [q for q, _ in tracker.changes(queues)] == ["root.a", "root.b"]
    assert tracker.changes(queues) == []


def test_route_cycle_sends_each_node_its_own_allocations_in_order() -> None:
    outputs = [decided(1, "n1"), decided(2, "n2"), revoked(1, "n1"), *other_outputs()]
    routed = route_cycle(P, outputs, {"root.a": status(running=1)}, StatusTracker())

    decisions = [o for o in routed if o.topic == decisions_topic(P)]
    assert [o.payload for o in decisions] == [encode_output(e) for e in outputs]
    n1 = [orjson.loads(o.payload)["id"] for o in routed if o.topic == node_topic(P, "n1")]
    n2 = [orjson.loads(o.payload)["id"] for o in routed if o.topic == node_topic(P, "n2")]
    assert (n1, n2) == (["d1", "r1"], ["d2"])
    assert routed[-1].topic == queue_topic(P, "root.a")
    assert [o.retain for o in routed] == [False] * (len(routed) - 1) + [True]


def test_route_cycle_partition_comes_from_the_caller() -> None:
    routed = route_cycle("blue", [revoked(1, "n1")], None, StatusTracker())
    assert {o.topic for o in routed} == {"evsched/blue/decisions", node_topic("blue", "n1")}


def test_route_cycle_at_most_one_status_message_per_queue() -> None:
    tracker = StatusTracker()
    queues = {f"root.q{i}": status(priority=i) for i in range(20)}
    routed = route_cycle(P, [], queues, tracker)
    topics = [o.topic for o in routed]
    assert len(topics) == len(set(topics)) == 20
    assert route_cycle(P, [], queues, tracker) == []


def test_route_status_after_resync_repeats_all_status() -> None:
    tracker = StatusTracker()
    queues = {"root.a": status(), "root.b": status()}
    route_status(P, queues, tracker)
    tracker.resync()
    again = route_status(P, queues, tracker)
    assert [o.topic for o in again] == [queue_topic(P, "root.a"), queue_topic(P, "root.b")]
    assert all(o.retain for o in again)


def test_a_preemption_reaches_the_victims_node_topic_with_its_preemptor() -> None:
    """The node agent of the victim's node learns it must stop the workload, and for whom."""
    from events.models import Preemptor
    from scheduler.bridge.topics import node_topic

    data = AllocationRevoked(app_id="be", ask_id="f3", node_id="n7", reason="preempted", decision_id="default-1-3",
                             preemptor=Preemptor(app_id="c", ask_id="c1", queue="root.crit"))
    event = OutputEvent(id="5-0", source="evsched", type="allocation.revoked", time="t", data=data)
    routed = route_cycle("default", [event], None, StatusTracker())
    on_node = [m for m in routed if m.topic == node_topic("default", "n7")]
    assert len(on_node) == 1 and on_node[0].payload == encode_output(event)
    body = orjson.loads(on_node[0].payload)["data"]
    assert body["reason"] == "preempted" and body["preemptor"] == {"app_id": "c", "ask_id": "c1", "queue": "root.crit"}
    assert body["decision_id"] == "default-1-3"
    plain = orjson.loads(encode_output(revoked(1, "n1")))["data"]
    assert "preemptor" not in plain and "decision_id" not in plain  # other revocations keep their bytes
