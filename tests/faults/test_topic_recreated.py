"""An input topic deleted and re-created under a running service is detected (Tansu).

Before: the service kept its old position, silently skipped the new topic's records up to
it, and rejected the later asks ``unknown-app`` with no warning. Now the partition going
back (its end below the position, or a record before it) stops the service with a clear
error (``--kafka-outage-s 0``: no in-process restart, the process exits 1).

A topic re-created while the service was away that already holds more records than the old
position cannot go back: the next start finds that the last event before its position is
not one its state applied, and refuses to resume (exit 1 at once: restarting would read
the same).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from tests.contracts.log_contract import run
from tests.kafka_broker import KafkaTopics
from tests.kafka_run import create_topics, kafka_args, produce, read_all, spawn_run

pytestmark = [pytest.mark.faults, pytest.mark.kafka]


def events(first: int, count: int) -> list[dict[str, Any]]:
    return [{"id": f"n{i}", "type": "node.added", "time": "2025-01-01T00:00:00Z",
             "data": {"node_id": f"n{i}", "capacity": {"vcore": 1000}}} for i in range(first, first + count)]


def consumed(bootstrap: str, topics: KafkaTopics) -> int:
    _, outs = read_all(bootstrap, topics)
    done = [o["data"] for o in outs if o["type"] == "cycle.completed"]
    return sum(done[-1]["inputs_through"].values()) if done else 0


async def recreate_topic(bootstrap: str, topic: str) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.delete_topics([topic])
        for _ in range(100):
            if topic not in await admin.list_topics():
                break
            await asyncio.sleep(0.1)
        await admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        await admin.close()


def test_an_input_topic_recreated_under_a_running_service_stops_it_with_a_clear_error(
    kafka_bootstrap: str, kafka_topics: KafkaTopics, tmp_path: Path
) -> None:
    create_topics(kafka_bootstrap, kafka_topics, 1)
    produce(kafka_bootstrap, kafka_topics, events(0, 20))
    err = tmp_path / "run.err"
    proc = spawn_run([*kafka_args(kafka_bootstrap, kafka_topics), "--kafka-outage-s", "0"], err)
    try:
        deadline = time.monotonic() + 60
        while consumed(kafka_bootstrap, kafka_topics) < 20:
            assert proc.poll() is None and time.monotonic() < deadline, err.read_text()[-2000:]
            time.sleep(0.1)

        run(recreate_topic(kafka_bootstrap, kafka_topics.inputs))
        produce(kafka_bootstrap, kafka_topics, events(100, 5))
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:  # spawn_run starts no session of its own: kill the process itself
            proc.kill()
            proc.wait()
    text = err.read_text()
    assert proc.returncode == 1, text[-3000:]
    assert "went back: this instance is at offset 20" in text, text[-3000:]
    assert consumed(kafka_bootstrap, kafka_topics) == 20  # nothing of the new topic was taken as the old one's


def test_an_input_topic_recreated_with_more_records_while_the_service_was_away_is_refused_at_start(
    kafka_bootstrap: str, kafka_topics: KafkaTopics, tmp_path: Path
) -> None:
    create_topics(kafka_bootstrap, kafka_topics, 1)
    produce(kafka_bootstrap, kafka_topics, events(0, 20))
    # The default --kafka-outage-s: the refusal must stop the process, not restart it for minutes.
    args = [*kafka_args(kafka_bootstrap, kafka_topics), "--snapshot-dir", str(tmp_path / "snapshots")]
    first = spawn_run([*args, "--once"], tmp_path / "first.err")
    assert first.wait(timeout=120) == 0, (tmp_path / "first.err").read_text()[-2000:]
    assert consumed(kafka_bootstrap, kafka_topics) == 20

    run(recreate_topic(kafka_bootstrap, kafka_topics.inputs))
    produce(kafka_bootstrap, kafka_topics, events(100, 30))  # more than the old position
    second = spawn_run([*args, "--once"], tmp_path / "second.err")
    try:
        second.wait(timeout=120)
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()
    text = (tmp_path / "second.err").read_text()
    assert second.returncode == 1, text[-3000:]
    assert "is not the log this state consumed: its record at offset 19, before the resume position 20, " \
        "is event 'n119'" in text, text[-3000:]
    assert consumed(kafka_bootstrap, kafka_topics) == 20  # nothing of the new topic was taken as the old one's
