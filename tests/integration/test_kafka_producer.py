"""The producer API: built events are valid, keyed per docs/contract.md §1, and survive a broker trip."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import orjson
import pytest
from pydantic import ValidationError

from events.codec import decode_input
from events.models import (
    AllocationReleased,
    AppAdded,
    AppRemoved,
    AskAdded,
    AskRemoved,
    ConfigUpdated,
    Frozen,
    InputEvent,
    NodeAdded,
    NodeRemoved,
    NodeUpdated,
    PriorityClassDeleted,
    PriorityClassUpserted,
)
from events.producer import EventBuilder, EvschedProducer, ProducedEvent
from tests.contracts.log_contract import run
from tests.integration.test_kafka_log import make_kafka_log, read_all
from tests.kafka_broker import KafkaTopics


def counter_ids() -> Callable[[], str]:
    numbers = itertools.count(1)
    return lambda: f"ev-{next(numbers)}"


def every_type(b: EventBuilder) -> list[tuple[ProducedEvent, type[Frozen], bytes]]:
    """One event of each input type, its data model and its expected key."""
    return [
        (b.app_added(app_id="a1", queue="root.x", user="u", groups=["g"]), AppAdded, b"a1"),
        (b.app_removed(app_id="a1"), AppRemoved, b"a1"),
        (b.ask_added(app_id="a1", ask_id="k", resources={"vcore": 5}, priority=3), AskAdded, b"a1"),
        (b.ask_removed(app_id="a1", ask_id="k"), AskRemoved, b"a1"),
        (b.allocation_released(app_id="a1", ask_id="k"), AllocationReleased, b"a1"),
        (b.node_added(node_id="n1", capacity={"memory": 10**9}), NodeAdded, b"n1"),
        (b.node_updated(node_id="n1", schedulable=False), NodeUpdated, b"n1"),
        (b.node_removed(node_id="n1"), NodeRemoved, b"n1"),
        (b.config_updated(yaml="partitions: []", partition="p2"), ConfigUpdated, b"p2"),
        (b.priorityclass_upserted(name="hi", value=100), PriorityClassUpserted, b"default"),
        (b.priorityclass_deleted(name="hi"), PriorityClassDeleted, b"default"),
    ]


def decoded(event: ProducedEvent) -> InputEvent:
    result = decode_input(event.value, append_time_us=42)
    assert isinstance(result, InputEvent), result
    return result


def test_every_builder_makes_a_valid_keyed_event() -> None:
    builder = EventBuilder("k8s-shim/cluster-a", id_factory=counter_ids())
    cases = every_type(builder)
    for n, (event, model, key) in enumerate(cases, start=1):
        result = decoded(event)
        assert isinstance(result.data, model)
        assert (event.key, event.id, result.id) == (key, f"ev-{n}", f"ev-{n}")
        assert (result.source, result.type, result.time_us) == (builder.source, event.type, 42)
    assert len({event.type for event, _, _ in cases}) == 11


def test_ids_times_and_validation() -> None:
    builder = EventBuilder("shim", id_factory=counter_ids())
    given = builder.app_removed(app_id="a", id="mine", time="2024-01-01T00:00:00Z")
    assert given.id == "mine"
    assert decoded(given).time_us == 1_704_067_200_000_000
    assert builder.app_removed(app_id="a").id == "ev-1"  # the factory ran only now
    # node.updated leaves out what it does not change.
    assert orjson.loads(builder.node_updated(node_id="n", occupied={"vcore": 1}).value)["data"] == {
        "node_id": "n", "occupied": {"vcore": 1}, "partition": "default"
    }  # fmt: skip
    with pytest.raises(ValidationError):
        builder.ask_added(app_id="a", ask_id="k", resources={"vcore": -1})
    with pytest.raises(ValidationError):
        builder.app_added(app_id="bad/id", queue="root.x", user="u")
    with pytest.raises(ValueError, match="unknown input event type"):
        builder.event("app.exploded", {"app_id": "a"})
    with pytest.raises(ValueError, match=r"RFC 3339|UTC offset"):
        builder.app_removed(app_id="a", time="yesterday")
    assert decoded(builder.event("app.removed", {"app_id": "x"})).data == AppRemoved(app_id="x")


@pytest.mark.kafka
def test_produced_events_arrive_keyed_and_decodable(
    kafka_bootstrap: str, kafka_topics: KafkaTopics
) -> None:
    builder = EventBuilder("batch-system")
    cases = every_type(builder)

    async def body() -> None:
        async with make_kafka_log(kafka_bootstrap, kafka_topics, partitions=3) as log:  # creates the topics
            async with EvschedProducer(kafka_bootstrap, topic=kafka_topics.inputs) as producer:
                await producer.send_all(event for event, _, _ in cases)
            got = await read_all(log, len(cases))
        by_id = {event.id: (event, model, key) for event, model, key in cases}
        channel_of_key: dict[bytes, str] = {}
        for rec in got:
            result = decode_input(rec.value, append_time_us=rec.append_time_us)
            assert isinstance(result, InputEvent), result
            event, model, key = by_id[result.id]
            assert (rec.key, rec.value) == (key, event.value)
            assert isinstance(result.data, model)
            assert result.time_us == rec.append_time_us  # no envelope time: the log's
            # One key, one partition: docs/contract.md §1 keys keep an app's events in order.
            assert channel_of_key.setdefault(key, rec.channel) == rec.channel

    run(body())
