"""The topics are the database: the ones the service creates keep their records and survive a broker.

``evsched run`` creates its topics with a replication factor (``--replication-factor``, default
min(3, brokers)), ``min.insync.replicas`` one less (at least 1), and ``retention.ms=-1`` on
the input and decisions topics, whose records the state is folded from. Checked on the broker
itself (DescribeConfigs, DescribeTopics).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scheduler.simulation.workload import WorkloadSpec
from tests.cli import evsched
from tests.contracts.log_contract import run
from tests.kafka_broker import KafkaTopics
from tests.kafka_run import kafka_args, submit_file, workload

pytestmark = pytest.mark.kafka


def describe(bootstrap: str, topics: list[str]) -> tuple[dict[str, dict[str, str]], dict[str, int], int]:
    """Each topic's configs and replication factor, and the number of brokers."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    async def body() -> tuple[dict[str, dict[str, str]], dict[str, int], int]:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t) for t in topics])
            configs: dict[str, dict[str, str]] = {}
            for response in responses:
                for _code, _msg, _type, name, entries in response.resources:
                    configs[name] = {e[0]: e[1] for e in entries}
            described: list[dict[str, Any]] = await admin.describe_topics(topics)
            replication = {d["topic"]: len(d["partitions"][0]["replicas"]) for d in described}
            brokers = len((await admin.describe_cluster())["brokers"])
            return configs, replication, brokers
        finally:
            await admin.close()

    return run(body())


def test_created_topics_are_replicated_and_kept_forever(
    kafka_bootstrap: str, kafka_topics: KafkaTopics, tmp_path: Path
) -> None:
    submit_file(kafka_bootstrap, kafka_topics, workload(WorkloadSpec(nodes=4, apps=2, asks=10, leaves=2, seed=1)),
                tmp_path)
    evsched("run", *kafka_args(kafka_bootstrap, kafka_topics), "--once", "--snapshot-dir", str(tmp_path / "snap"))
    names = [kafka_topics.inputs, kafka_topics.admin, kafka_topics.decisions, kafka_topics.deadletter]
    configs, replication, brokers = describe(kafka_bootstrap, names)
    factor = min(3, brokers)
    assert replication == dict.fromkeys(names, factor)
    for name in names:
        assert configs[name]["min.insync.replicas"] == str(max(1, factor - 1)), name
    assert configs[kafka_topics.inputs]["retention.ms"] == "-1"
    assert configs[kafka_topics.admin]["retention.ms"] == "-1"  # the admin channel: as durable as the inputs
    assert configs[kafka_topics.decisions]["retention.ms"] == "-1"
    assert configs[kafka_topics.deadletter]["retention.ms"] != "-1"  # parked copies: the broker's default
    assert any((tmp_path / "snap").iterdir()), "no snapshot written on a clean stop"
