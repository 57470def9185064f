"""validate_ingest: what a node agent may put into the input log over MQTT (table-driven)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from events.codec import decode_input
from events.models import InputEvent, NodeAdded, NodeUpdated
from scheduler.bridge.ingest import MAX_INGEST_BYTES, Rejection, validate_ingest

P = "default"
NOW_US = 1_700_000_000_000_000
T1 = "evsched/default/ingest/nodes/n1"


def event(type_: str = "node.updated", **data: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"node_id": "n1", "occupied": {"vcore": 500}} | data
    return {"id": "hb-1", "source": "agent/n1", "type": type_, "time": "2024-01-01T00:00:00Z",
            "data": body}  # fmt: skip


def raw(obj: Any) -> bytes:
    return orjson.dumps(obj)


def without(obj: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k != key}


ACCEPTED = [
    pytest.param(T1, raw(event()), id="heartbeat"),
    pytest.param(T1, raw(event("node.added", capacity={"vcore": 4000}, occupied={})), id="added"),
    pytest.param(T1, raw(without(event(), "time")), id="no-time-uses-now"),
    pytest.param(T1, raw(event(schedulable=False)), id="cordon"),
    pytest.param(T1, raw(event(partition=P)), id="explicit-partition"),
    pytest.param("evsched/default/ingest/nodes/n%251", raw(event(node_id="n%1") | {"source": "agent/n%1"}),
                 id="escaped-node-id"),
    pytest.param(T1, raw(event()).ljust(MAX_INGEST_BYTES), id="exactly-64KiB"),
]

REJECTED = [
    # (topic, payload, reason)
    pytest.param(T1, raw(event(node_id="n2")), "ingest-node-mismatch", id="forged-node-id"),
    pytest.param(T1, raw(event("app.added")), "ingest-type", id="wrong-type"),
    pytest.param(T1, raw(event("node.removed")), "ingest-type", id="agent-cannot-remove"),
    pytest.param(T1, raw(event("allocation.decided")), "ingest-type", id="output-type"),
    pytest.param(T1, raw(event("no.such")), "ingest-type", id="unknown-type"),
    pytest.param(T1, raw(event()).ljust(MAX_INGEST_BYTES + 1), "ingest-too-large", id="oversize"),
    pytest.param(T1, b"\xff\xfe garbage", "invalid", id="garbage"),
    pytest.param(T1, b"", "invalid", id="empty"),
    pytest.param(T1, b"[1, 2]", "invalid", id="json-array"),
    pytest.param(T1, raw(without(event(), "id")), "invalid", id="missing-id"),
    pytest.param(T1, raw(event(occupied={"vcore": -1})), "invalid", id="negative-quantity"),
    pytest.param(T1, raw(event(extra=1)), "invalid", id="unknown-data-field"),
    pytest.param(T1, raw(event() | {"time": "yesterday"}), "invalid", id="bad-time"),
    pytest.param(T1, raw(event(partition="other")), "ingest-partition", id="data-partition"),
    pytest.param("evsched/other/ingest/nodes/n1", raw(event()), "ingest-partition", id="topic-partition"),
    pytest.param("evsched/default/ingest/nodes", raw(event()), "ingest-topic", id="no-node"),
    pytest.param(T1 + "/x", raw(event()), "ingest-topic", id="deeper-topic"),
    pytest.param("evsched/default/nodes/n1/allocations", raw(event()), "ingest-topic", id="out"),
]


@pytest.mark.parametrize(("topic", "payload"), ACCEPTED)
def test_accepted_messages_are_returned_unchanged(topic: str, payload: bytes) -> None:
    accepted, rejection = validate_ingest(topic, payload, partition=P, now_us=NOW_US)
    assert rejection is None
    assert accepted == payload
    decoded = decode_input(accepted, append_time_us=NOW_US)
    assert isinstance(decoded, InputEvent)
    assert isinstance(decoded.data, NodeAdded | NodeUpdated)


@pytest.mark.parametrize(("topic", "payload", "reason"), REJECTED)
def test_rejected_messages_say_why(topic: str, payload: bytes, reason: str) -> None:
    accepted, rejection = validate_ingest(topic, payload, partition=P, now_us=NOW_US)
    assert accepted is None
    assert isinstance(rejection, Rejection)
    assert rejection.reason == reason
    assert rejection.message


def test_forged_heartbeat_names_both_nodes_and_the_event() -> None:
    _, rejection = validate_ingest(T1, raw(event(node_id="n2")), partition=P, now_us=NOW_US)
    assert rejection is not None
    assert "'n2'" in rejection.message and "'n1'" in rejection.message
    assert (rejection.input_id, rejection.input_type) == ("hb-1", "node.updated")


def test_unreadable_message_is_named_by_its_topic() -> None:
    _, rejection = validate_ingest(T1, b"{", partition=P, now_us=NOW_US)
    assert rejection is not None
    assert rejection.input_id is not None and T1 in rejection.input_id
    assert rejection.input_type is None


def test_type_is_checked_before_data() -> None:
    # An app.added with bad data is refused for its type, not for its data.
    bad_app = event("app.added") | {"data": {"nonsense": True}}
    _, rejection = validate_ingest(T1, raw(bad_app), partition=P, now_us=NOW_US)
    assert rejection is not None and rejection.reason == "ingest-type"
