"""No wall clock on the input path: a Kafka record without a usable time is rejected.

A record with no ``time`` whose Kafka timestamp is −1 (no timestamp) used to be given the
reader's clock, which is recorded nowhere: live and replay then decided differently.
"""

from __future__ import annotations

from typing import NamedTuple

import orjson
from aiokafka.structs import TopicPartition

from events.codec import decode_input
from events.log.kafka.outputs import to_records
from events.models import InputEvent, InputRejected


class Consumed(NamedTuple):
    """The fields of an aiokafka ConsumerRecord that ``to_records`` reads."""

    offset: int
    value: bytes
    timestamp: int | None
    key: bytes | None = None


def clock() -> int:
    raise AssertionError("the reader's clock was read")


def event(**extra: object) -> bytes:
    return orjson.dumps({"id": "x", "source": "t", "type": "node.added",
                         "data": {"node_id": "n", "capacity": {"vcore": 1}}, **extra})


def test_a_record_without_time_or_timestamp_is_rejected_and_no_clock_is_read() -> None:
    for stamp in (-1, None):
        (rec,) = to_records(TopicPartition("in", 0), [Consumed(7, event(), stamp)], clock)
        result = decode_input(rec.value, append_time_us=rec.append_time_us, position=rec.position)
        assert isinstance(result, InputRejected) and result.reason == "invalid", result
        assert "no timestamp" in result.message


def test_a_record_with_its_own_time_or_a_timestamp_keeps_it() -> None:
    (rec,) = to_records(TopicPartition("in", 0), [Consumed(1, event(time="2025-01-01T00:00:00Z"), -1)], clock)
    result = decode_input(rec.value, append_time_us=rec.append_time_us, position=rec.position)
    assert isinstance(result, InputEvent) and result.time_us == 1_735_689_600_000_000
    (rec,) = to_records(TopicPartition("in", 0), [Consumed(2, event(), 1_735_689_600_000)], clock)
    result = decode_input(rec.value, append_time_us=rec.append_time_us, position=rec.position)
    assert isinstance(result, InputEvent) and result.time_us == 1_735_689_600_000_000
