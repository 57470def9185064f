"""Identifiers from input, followed to every place they could become a file name, a topic or a key.

Where ids go (checked by reading the code, and pinned here):

* **file names**: none. Segment files are named by offset, snapshots by cycle number
  (``snapshot-<cycle>.json``), the lock file is fixed; no id from input is part of a path.
* **Kafka**: ids are record *keys* (bytes, any content is safe) and never topic names,
  which come only from the command line.
* **MQTT topic levels**: node ids (``…/nodes/<node_id>/allocations`` and the ingest topic),
  queue paths (config queue names, ``[a-zA-Z0-9_-]`` only) and partitions
  (``[A-Za-z0-9_-]`` only). Node ids pass through ``escape_level``.

The decoder (``events.models.Identifier``) refuses ids that are empty, over 253 characters,
or contain C0 controls, DEL, ``/``, ``#`` or ``+``. What it admits (``..``, C1 controls,
non-characters, any other Unicode) must still be safe wherever it goes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.codec import decode_input
from events.models import AllocationDecided, InputEvent, InputRejected, OutputEvent
from events.producer import key_of
from scheduler.bridge.ingest import validate_ingest
from scheduler.bridge.topics import escape_level, node_topic, parse_ingest_topic, route_outputs, unescape_level
from scheduler.core.engine import Engine
from scheduler.storage.snapshot_files import SnapshotStore
from tests.fuzz.strategies import HOSTILE_IDS

ID_FIELDS = {
    "app.removed": ["app_id"],
    "ask.removed": ["app_id", "ask_id"],
    "node.removed": ["node_id"],
    "ask.added": ["app_id", "ask_id", "required_node"],
}
REFUSED = ["", "../../x", "a/b", "/abs", "+", "#", "a+b", "evsched/+/#", "\x00", "a\x00b", "\n", "\t", "\x7f",
           "x" * 254, "x" * 10_000]  # fmt: skip


def broker_refuses(char: str) -> bool:
    """What brokers refuse in a topic (mosquitto drops the client): controls, non-characters."""
    code = ord(char)
    return code <= 0x1F or 0x7F <= code <= 0x9F or 0xFDD0 <= code <= 0xFDEF or code & 0xFFFE == 0xFFFE


def record(event_type: str, data: dict[str, Any]) -> bytes:
    return orjson.dumps({"id": "e", "source": "s", "type": event_type, "data": data})


def base_data(event_type: str) -> dict[str, Any]:
    data: dict[str, Any] = {field: "x" for field in ID_FIELDS[event_type] if field != "required_node"}
    if event_type == "ask.added":
        data["resources"] = {"vcore": 1}
    return data


@pytest.mark.parametrize("bad", REFUSED, ids=repr)
@pytest.mark.parametrize(("event_type", "field"), [(t, f) for t, fs in ID_FIELDS.items() for f in fs])
def test_the_decoder_refuses_ids_that_would_be_paths_or_wildcards(event_type: str, field: str, bad: str) -> None:
    result = decode_input(record(event_type, base_data(event_type) | {field: bad}), append_time_us=0)
    assert isinstance(result, InputRejected), (field, bad)
    assert result.reason == "invalid" and field in result.message


def admitted(node_id: str) -> bool:
    return isinstance(decode_input(record("node.removed", {"node_id": node_id}), append_time_us=0), InputEvent)


ADMITTED = [i for i in HOSTILE_IDS if admitted(i)]


def test_the_hostile_ids_the_decoder_admits_include_the_awkward_ones() -> None:
    assert {"..", ".", "..\\..\\x", "\x85", "\ufffe", "\U0010ffff", "%2F", "CON", "x" * 253} <= set(ADMITTED)
    assert not set(REFUSED) & set(ADMITTED)


def check_level(node_id: str) -> str:
    level = escape_level(node_id)
    assert not {"/", "+", "#"} & set(level)
    assert not any(broker_refuses(c) for c in level), repr(level)
    assert unescape_level(level) == node_id
    assert len(level.encode()) <= 12 * 253  # 4-byte characters become 12 bytes of %XX
    return level


@pytest.mark.parametrize("node_id", ADMITTED, ids=repr)
def test_admitted_ids_become_one_safe_topic_level(node_id: str) -> None:
    level = check_level(node_id)
    topic = node_topic("default", node_id)
    assert topic.split("/") == ["evsched", "default", "nodes", level, "allocations"]
    ingest = f"evsched/default/ingest/nodes/{level}"
    assert parse_ingest_topic(ingest) == ("default", node_id)


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.text(min_size=1, max_size=40))
def test_any_admitted_id_is_a_safe_reversible_level(node_id: str) -> None:
    decoded = decode_input(record("node.removed", {"node_id": node_id}), append_time_us=0)
    if isinstance(decoded, InputEvent):
        check_level(node_id)


@pytest.mark.parametrize("alias", ["%41", "%2f", "%2", "%zz", "%C2", "%FF", "a%2Fb%"])
def test_an_ingest_topic_has_one_spelling_per_node(alias: str) -> None:
    # "%41" is not how escape_level writes "A": a second topic for one node would let an
    # agent outside the broker ACL on the node's own topic speak for it.
    parsed = parse_ingest_topic(f"evsched/default/ingest/nodes/{alias}")
    assert parsed is None or escape_level(parsed[1]) == alias


def test_kafka_keys_are_the_ids_as_bytes() -> None:
    # A key is opaque bytes to Kafka (partitioning hashes it); nothing else is derived from it.
    for node_id in ADMITTED:
        event = decode_input(record("node.removed", {"node_id": node_id}), append_time_us=0)
        assert isinstance(event, InputEvent)
        assert key_of(event.type, event.data).encode() == node_id.encode()


def test_snapshot_file_names_never_contain_ids(tmp_path: Path) -> None:
    engine = Engine()
    for i, node_id in enumerate(ADMITTED):
        data = {"node_id": node_id, "capacity": {"vcore": 1}}
        event = decode_input(orjson.dumps({"id": f"e{i}", "source": "s", "type": "node.added", "data": data}),
                             append_time_us=0)
        assert isinstance(event, InputEvent)
        engine.apply(event)
    engine.cycle(0, {"inputs": len(ADMITTED)})
    store = SnapshotStore(tmp_path / "snaps")
    path = store.save(engine, {"inputs": len(ADMITTED)}, 1)
    assert [p.name for p in (tmp_path / "snaps").iterdir()] == ["snapshot-000000000001.json"]
    assert path.parent == tmp_path / "snaps" and {p.name for p in tmp_path.iterdir()} == {"snaps"}


# ---------------------------------------------------------------- against a real broker


def decision(node_id: str, n: int) -> OutputEvent:
    data = AllocationDecided(decision_id=f"d{n}", cycle=1, ask_id="k", app_id="a", partition="p", queue="root.a",
                             node_id=node_id, resources={"vcore": 1}, priority=0)  # fmt: skip
    return OutputEvent(id=f"o{n}", source="evsched", type="allocation.decided", time="t", data=data)


@pytest.mark.mqtt
def test_a_hostile_node_id_does_not_cut_the_bridge_off(mqtt_url: str) -> None:
    # Found here: node ids with a C1 control or a non-character reached the topic as they
    # were; mosquitto drops a client that publishes such a topic, the publisher reconnects
    # and re-sends the same message: every later decision, for every node, was lost.
    from scheduler.bridge.mqtt import MqttPublisher
    from tests.mqtt_broker import WAIT_S, MqttReader, eventually, unique_name

    partition = unique_name("p")
    nodes = ["n\x85", "n\ufffe", "n\U0010ffff", "n\x9f", "n1"]

    async def scenario() -> None:
        async with MqttReader(mqtt_url, f"evsched/{partition}/nodes/+/allocations") as reader:
            publisher = MqttPublisher(mqtt_url)
            await publisher.start()
            assert await publisher.wait_connected(WAIT_S)
            for msg in route_outputs(partition, [decision(node, i) for i, node in enumerate(nodes)]):
                publisher.publish(msg.topic, msg.payload, retain=msg.retain)
            got = await reader.get(len(nodes))
            await eventually(lambda: publisher.stats().published == 2 * len(nodes), what="all acknowledged")
            await publisher.close()
        assert [unescape_level(topic.split("/")[3]) for topic, _ in got] == nodes
        assert publisher.stats().reconnects == 0

    asyncio.run(scenario())


@pytest.mark.mqtt
def test_an_agent_with_a_hostile_node_id_can_heartbeat(mqtt_url: str) -> None:
    from scheduler.bridge.ingest import Rejection
    from scheduler.bridge.mqtt import MqttIngest, MqttPublisher
    from tests.mqtt_broker import WAIT_S, eventually, unique_name

    partition = unique_name("p")
    node_id = "n\x85\ufffe"
    payload = orjson.dumps({"id": "hb", "source": f"agent/{node_id}", "type": "node.updated",
                            "data": {"node_id": node_id, "partition": partition, "schedulable": False}})  # fmt: skip
    accepted: list[bytes] = []
    refused: list[Rejection] = []

    async def on_accept(raw: bytes) -> None:
        accepted.append(raw)

    async def on_reject(topic: str, rejection: Rejection) -> None:
        refused.append(rejection)

    async def scenario() -> None:
        ingest = MqttIngest(mqtt_url, partition, on_accept, on_reject)
        await ingest.start()
        assert await ingest.wait_connected(WAIT_S)
        agent = MqttPublisher(mqtt_url)
        await agent.start()
        agent.publish(f"evsched/{partition}/ingest/nodes/{escape_level(node_id)}", payload)
        await eventually(lambda: len(accepted) + len(refused) == 1, what="the heartbeat handled")
        await agent.close()
        await ingest.close()

    asyncio.run(scenario())
    assert refused == [] and accepted == [payload]
    assert validate_ingest(f"evsched/{partition}/ingest/nodes/{escape_level(node_id)}", payload,
                           partition=partition, now_us=0) == (payload, None)  # fmt: skip
