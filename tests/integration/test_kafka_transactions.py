"""Transactions: does the broker run aiokafka's transactional producer? (Tansu: no.)"""

from __future__ import annotations

import pytest

from events.log.kafka import KafkaLog
from tests.kafka_broker import KafkaTopics
from tests.log_contract import run

pytestmark = pytest.mark.kafka


def _log(bootstrap: str, topics: KafkaTopics) -> KafkaLog:
    return KafkaLog(
        bootstrap,
        input_topics=[topics.inputs],
        decisions_topic=topics.decisions,
        deadletter_topic=topics.deadletter,
        group_id=topics.group,
    )


def test_probe_answers_with_a_reason(kafka_bootstrap: str, kafka_topics: KafkaTopics) -> None:
    supported, reason = run(_log(kafka_bootstrap, kafka_topics).probe_transactions())
    assert isinstance(supported, bool)
    assert reason.strip(), "the probe must say why"


def test_outputs_and_offsets_in_one_transaction(
    kafka_bootstrap: str, kafka_topics: KafkaTopics
) -> None:
    # The design does not depend on transactions; this only checks the optional path's
    # precondition where a broker offers it (a real Apache Kafka via KAFKA_BOOTSTRAP_SERVERS).
    supported, reason = run(_log(kafka_bootstrap, kafka_topics).probe_transactions())
    if not supported:
        pytest.skip(f"broker has no transactional producer: {reason}")
    assert reason
