"""On Kafka: ``submit --config`` puts the config first, ``config apply --kafka`` appends one, ``run --config`` refuses
inputs that precede any config, and ``log cat|tail --kafka`` prints the topics as JSONL with filters."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from tests.cli import evsched
from tests.kafka_broker import KafkaTopics
from tests.kafka_run import kafka_args

pytestmark = pytest.mark.kafka

CONFIG = """\
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues: [{name: team}]
"""
LINES = [
    {"type": "node.added", "data": {"node_id": "n1", "capacity": {"vcore": 4000}}},
    {"type": "app.added", "data": {"app_id": "a", "queue": "root.team", "user": "u"}},
    {"type": "ask.added", "data": {"app_id": "a", "ask_id": "k1", "resources": {"vcore": 1000}}},
    {"type": "schedule"},
]


def _topics_only(bootstrap: str, topics: KafkaTopics) -> list[str]:
    return ["--kafka", bootstrap, "--input-topic", topics.inputs, "--decisions-topic", topics.decisions,
            "--deadletter-topic", topics.deadletter]


def test_feed_and_read_kafka(tmp_path: Path, kafka_bootstrap: str, kafka_topics: KafkaTopics) -> None:
    (tmp_path / "q.yaml").write_text(CONFIG)
    (tmp_path / "in.jsonl").write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in LINES))
    service = kafka_args(kafka_bootstrap, kafka_topics)
    read = _topics_only(kafka_bootstrap, kafka_topics)

    evsched("submit", *service, str(tmp_path / "in.jsonl"))
    refused = evsched("run", *service, "--once", "--config", str(tmp_path / "q.yaml"), check=False, text=True)
    assert refused.returncode == 1 and "before any queue configuration" in refused.stderr
    assert f"`evsched config apply {tmp_path / 'q.yaml'} --kafka {kafka_bootstrap}`" in refused.stderr

    evsched("config", "apply", str(tmp_path / "q.yaml"), *service)
    evsched("run", *service, "--once")
    inputs = [json.loads(line) for line in evsched("log", "cat", "--inputs", *read, text=True).stdout.splitlines()]
    assert [i["type"] for i in inputs] == ["node.added", "app.added", "ask.added"]  # the config is on the admin channel
    rejected = evsched("log", "cat", "--outputs", "--type", "input.rejected", *read, text=True).stdout
    assert json.loads(rejected.splitlines()[0])["data"]["reason"] == "unknown-queue"  # read before the config
    last = evsched("log", "tail", "-n", "1", "--outputs", *read, text=True).stdout.splitlines()
    assert [json.loads(line)["type"] for line in last] == ["cycle.completed"]
