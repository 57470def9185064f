"""Transactions: does the broker run aiokafka's transactional producer? (Apache Kafka: yes; Tansu: no.)"""

from __future__ import annotations

import os

import pytest

from events.log.kafka import parse_channel
from tests.contracts.log_contract import run
from tests.integration.test_kafka_log import make_kafka_log
from tests.kafka_broker import KafkaTopics, kafka_broker_kind

pytestmark = pytest.mark.kafka


def transactions_or_skip(bootstrap: str, topics: KafkaTopics) -> None:
    """Skip a test that needs transactions on Tansu only; on Apache Kafka (or a cluster named by
    KAFKA_BOOTSTRAP_SERVERS) a broker without them fails the test."""
    supported, reason = run(make_kafka_log(bootstrap, topics).probe_transactions())
    if supported:
        return
    if kafka_broker_kind() == "tansu" and not os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        pytest.skip(f"Tansu has no transactional producer: {reason}")
    pytest.fail(f"the Kafka broker has no transactional producer: {reason}")


def test_probe_answers_with_a_reason(kafka_bootstrap: str, kafka_topics: KafkaTopics) -> None:
    supported, reason = run(make_kafka_log(kafka_bootstrap, kafka_topics).probe_transactions())
    assert isinstance(supported, bool)
    assert reason.strip(), "the probe must say why"


def test_outputs_and_offsets_in_one_transaction(
    kafka_bootstrap: str, kafka_topics: KafkaTopics
) -> None:
    # Where a broker offers transactions (Apache Kafka), outputs and input offsets commit as one.
    from aiokafka import AIOKafkaProducer

    transactions_or_skip(kafka_bootstrap, kafka_topics)

    async def body() -> None:
        async with make_kafka_log(kafka_bootstrap, kafka_topics) as log:  # creates the topics
            await log.append_inputs([(b"k", b"v0"), (b"k", b"v1")])
            (channel,) = await log.input_channels()
            producer = AIOKafkaProducer(
                bootstrap_servers=kafka_bootstrap, transactional_id=f"{kafka_topics.group}-tx"
            )
            await producer.start()
            try:
                async with producer.transaction():
                    await producer.send(kafka_topics.decisions, b"d0", partition=0)
                    await producer.send_offsets_to_transaction({parse_channel(channel): 2}, kafka_topics.group)
            finally:
                await producer.stop()
            assert [r.value for r in await log.read_outputs()] == [b"d0"]
            assert await log.committed() == {channel: 2}

    run(body())
