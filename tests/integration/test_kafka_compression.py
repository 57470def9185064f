"""Compressed Kafka input (real Tansu broker): every codec a producer may use is read.

Many clients compress by default. Before issue 15 aiokafka was installed without lz4,
snappy and zstd support: one such batch raised ``UnsupportedCodecError`` on every start,
nothing was rejected or dead-lettered, the service stalled. Each codec here is produced by
a real producer (``compression_type``), then ``run --once`` must schedule every ask.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.cli import evsched
from tests.contracts.log_contract import run
from tests.kafka_broker import KafkaTopics
from tests.kafka_run import create_topics, decisions, kafka_args, read_all

pytestmark = pytest.mark.kafka


def records(codec: str) -> list[bytes]:
    def ev(rid: str, kind: str, **data: object) -> bytes:
        return orjson.dumps({"id": f"{codec}-{rid}", "source": "rm", "type": kind,
                             "time": "2025-01-01T00:00:00Z", "data": data})

    return [ev("n", "node.added", node_id="n1", capacity={"vcore": 100_000}),
            ev("a", "app.added", app_id="a", queue="root.default", user="u"),
            *[ev(f"k{i}", "ask.added", app_id="a", ask_id=f"k{i}", resources={"vcore": 1000}) for i in range(20)]]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_each_compression_codec_is_read(
    kafka_bootstrap: str, kafka_topics: KafkaTopics, tmp_path: Path, codec: str
) -> None:
    from aiokafka import AIOKafkaProducer

    create_topics(kafka_bootstrap, kafka_topics, 1)

    async def produce() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, compression_type=codec, linger_ms=50)
        await producer.start()
        try:
            sent = [await producer.send(kafka_topics.inputs, value) for value in records(codec)]
            for future in sent:
                await future
        finally:
            await producer.stop()

    run(produce())
    proc = evsched("run", *kafka_args(kafka_bootstrap, kafka_topics), "--once", check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    _, outs = read_all(kafka_bootstrap, kafka_topics)
    assert not [o for o in outs if o["type"] == "input.rejected"]
    assert sorted(d["ask_id"] for d in decisions(outs)) == sorted(f"k{i}" for i in range(20))
