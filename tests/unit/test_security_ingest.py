"""MQTT ingest as a trust boundary: an agent speaks only for the node of its topic, only in
heartbeats, only under its own source. (Table cases for each reason live in
``test_bridge_ingest.py``; these are the adversarial ones, plus a property over random
topics and payloads.)
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.codec import decode_input
from events.models import INPUT_DATA, InputEvent, NodeAdded, NodeUpdated
from scheduler.bridge.ingest import MAX_INGEST_BYTES, validate_ingest
from scheduler.bridge.topics import escape_level, parse_ingest_topic
from tests.fuzz.strategies import HOSTILE_IDS, json_values, to_json_bytes

P = "default"


def heartbeat(node_id: str = "n1", source: str | None = None, type_: str = "node.updated", **data: Any) -> bytes:
    return to_json_bytes({"id": "hb-1", "source": source if source is not None else f"agent/{node_id}",
                          "type": type_, "data": {"node_id": node_id, "schedulable": True} | data})  # fmt: skip


def topic(node_id: str, partition: str = P) -> str:
    return f"evsched/{partition}/ingest/nodes/{escape_level(node_id)}"


def reason(topic_: str, payload: bytes) -> str | None:
    accepted, rejection = validate_ingest(topic_, payload, partition=P, now_us=0)
    assert (accepted is None) != (rejection is None)
    return None if rejection is None else rejection.reason


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("agent/n1", None, id="own-source"),
        pytest.param("rack-7/agent/n1", None, id="any-prefix"),
        pytest.param("k8s-shim/cluster-a", "ingest-source", id="the-resource-managers-source"),
        pytest.param("n1", "ingest-source", id="no-slash"),
        pytest.param("agent/n2", "ingest-source", id="another-nodes-source"),
        pytest.param("agent/n1/x", "ingest-source", id="suffix-after-the-node"),
        pytest.param("agent/xn1", "ingest-source", id="node-name-as-a-suffix"),
    ],
)
def test_an_agent_speaks_only_under_its_own_source(source: str, expected: str | None) -> None:
    # Duplicates are dropped by (source, id): with any source allowed, an agent could send
    # the id of the resource manager's next node.removed first and have the real one dropped.
    assert reason(topic("n1"), heartbeat("n1", source=source)) == expected


@pytest.mark.parametrize("event_type", sorted(set(INPUT_DATA) - {"node.added", "node.updated"}))
def test_no_other_event_type_gets_in(event_type: str) -> None:
    assert reason(topic("n1"), heartbeat("n1", type_=event_type)) == "ingest-type"


@pytest.mark.parametrize("node_id", [i for i in HOSTILE_IDS if 0 < len(i) <= 253 and not set(i) & set("/#+")])
def test_hostile_node_ids_are_matched_exactly(node_id: str) -> None:
    # Each id only through its own (escaped) topic; never through another node's topic.
    own = reason(topic(node_id), heartbeat(node_id))
    other = reason(topic("n1"), heartbeat(node_id, source="agent/n1"))
    assert other in {"ingest-node-mismatch", "invalid"}
    assert own in {None, "invalid"}  # invalid: ids the decoder refuses (controls), whichever topic


def test_partition_spoofing_is_refused_in_topic_and_data() -> None:
    assert reason(topic("n1", "other"), heartbeat("n1")) == "ingest-partition"
    assert reason(topic("n1"), heartbeat("n1", partition="other")) == "ingest-partition"


def test_an_oversized_message_is_refused_before_it_is_parsed() -> None:
    huge = b"[" * (MAX_INGEST_BYTES + 1)  # would be a deep-nesting probe if it were parsed
    assert reason(topic("n1"), huge) == "ingest-too-large"


# ---------------------------------------------------------------- a property over random input

NODES = ["n1", "n2", "n\x85", "..", "A", "%41"]


@st.composite
def messages(draw: st.DrawFn) -> tuple[str, bytes]:
    """(topic, payload) pairs that are mostly almost right: one thing off at a time."""
    node = draw(st.sampled_from(NODES))
    topic_node = draw(st.sampled_from([node, node, node, *NODES]))
    kind = draw(st.sampled_from(["canonical"] * 4 + ["other-partition", "raw-level", "text"]))
    topic_ = {
        "canonical": topic(topic_node),
        "other-partition": topic(topic_node, "other"),
        "raw-level": f"evsched/{P}/ingest/nodes/{topic_node}",
        "text": draw(st.text(max_size=40)),
    }[kind]
    if draw(st.integers(0, 9)) == 0:
        return topic_, draw(st.binary(max_size=200))
    source = draw(st.sampled_from([f"agent/{topic_node}"] * 3 + ["agent/n2", "k8s", f"x/{node}", topic_node]))
    event_type = draw(st.sampled_from(["node.updated", "node.updated", "node.added", "node.removed", "app.added"]))
    extra = draw(st.dictionaries(st.sampled_from(["partition", "capacity", "occupied", "schedulable"]), json_values,
                                 max_size=1))  # fmt: skip
    return topic_, heartbeat(node, source=source, type_=event_type, **extra)


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(messages())
def test_whatever_is_accepted_is_a_heartbeat_of_the_topics_node(message: tuple[str, bytes]) -> None:
    topic_, payload = message
    accepted, _ = validate_ingest(topic_, payload, partition=P, now_us=0)
    if accepted is None:
        return
    assert accepted == payload
    parsed = parse_ingest_topic(topic_)
    assert parsed is not None and parsed[0] == P
    event = decode_input(accepted, append_time_us=0)
    assert isinstance(event, InputEvent) and isinstance(event.data, NodeAdded | NodeUpdated)
    assert event.data.node_id == parsed[1] and event.data.partition == P
    assert event.source.endswith("/" + parsed[1])
