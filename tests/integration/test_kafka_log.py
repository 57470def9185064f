"""KafkaLog against a real Kafka-protocol broker: the shared log contract plus Kafka specifics."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import ClassVar

import pytest

from events.log.kafka import KafkaLog, parse_channel
from events.log.port import (
    CommitsOffsets,
    DeadLetters,
    EventLog,
    GappedOutputs,
    Leased,
    LogError,
    LogRecord,
    TransactionalLog,
)
from tests.contracts.log_contract import LogContract, run
from tests.kafka_broker import KafkaTopics
from tests.progress import HANG_S

pytestmark = pytest.mark.kafka

# Topic names derive from tmp_path (the contract reopens a log by passing the same one);
# this per-run tag keeps them apart from earlier runs on a long-lived external broker.
_RUN = uuid.uuid4().hex[:8]


def make_kafka_log(
    bootstrap: str, topics: KafkaTopics, partitions: int = 1, **options: object
) -> KafkaLog:
    return KafkaLog(
        bootstrap,
        input_topics=[topics.inputs],
        decisions_topic=topics.decisions,
        deadletter_topic=topics.deadletter,
        group_id=topics.group,
        partitions=partitions,
        **options,  # type: ignore[arg-type]
    )


class TestKafkaLog(LogContract):
    """The contract with three input partitions: one append spreads over channels."""

    partitions: ClassVar[int] = 3
    capabilities = frozenset({TransactionalLog, CommitsOffsets, DeadLetters, Leased, GappedOutputs})

    @pytest.fixture(autouse=True)
    def _broker(self, kafka_bootstrap: str) -> None:
        self.bootstrap = kafka_bootstrap

    @asynccontextmanager
    async def make_log(
        self, tmp_path: Path, now_us: Callable[[], int] | None = None
    ) -> AsyncIterator[EventLog]:
        tag = "".join(c if c.isalnum() else "-" for c in tmp_path.name)[:60]
        name = f"evsched.{_RUN}.p{self.partitions}.{tag}"
        topics = KafkaTopics(f"{name}.in", f"{name}.out", f"{name}.dlq", f"g-{_RUN}-{tag}")
        log = make_kafka_log(self.bootstrap, topics, self.partitions, now_us=now_us, admin_topic=f"{name}.admin")
        await log.start()
        try:
            yield log
        finally:
            await log.close()


class TestKafkaLogOnePartition(TestKafkaLog):
    """The contract with one input partition: dense offsets 0, 1, 2, … on one channel."""

    partitions = 1


async def read_all(log: KafkaLog, want: int, positions: dict[str, int] | None = None) -> list[LogRecord]:
    """The next ``want`` input records from ``positions`` (default: the beginning); a hang fails."""
    got: list[LogRecord] = []
    pos = dict(positions or {})
    deadline = time.monotonic() + HANG_S
    while len(got) < want:
        assert time.monotonic() < deadline, f"only {len(got)} of {want} records arrived"
        for rec in await log.read_inputs(pos, 1000):
            pos[rec.channel] = rec.offset + 1
            got.append(rec)
    return got


def test_keys_pick_partitions_like_any_kafka_producer(
    kafka_bootstrap: str, kafka_topics: KafkaTopics
) -> None:
    # Kafka's default partitioner (murmur2 of the key), so a Java or Go producer keyed
    # by app_id reaches the same partition as we do.
    from aiokafka.partitioner import murmur2

    async def body() -> None:
        async with make_kafka_log(kafka_bootstrap, kafka_topics, partitions=4) as log:
            sent = [(f"app-{i % 9}".encode(), f"v{i}".encode()) for i in range(90)]
            await log.append_inputs(sent)
            await log.append_inputs([(b"app-0", b"pinned")], partition=3)
            got = await read_all(log, len(sent) + 1)
            for rec in got:
                assert rec.key is not None
                expected = 3 if rec.value == b"pinned" else (murmur2(rec.key) & 0x7FFFFFFF) % 4
                assert parse_channel(rec.channel).partition == expected
            ends = await log.input_end()
            for channel, end in ends.items():
                mine = [r for r in got if r.channel == channel]
                assert [r.offset for r in mine] == list(range(end))
                values = [r.value for r in mine if r.value != b"pinned"]
                assert values == sorted(values, key=lambda v: int(v[1:]))  # append order
            assert sum(ends.values()) == len(got)

    run(body())


def test_read_outputs_stops_at_the_end(kafka_bootstrap: str, kafka_topics: KafkaTopics) -> None:
    async def body() -> None:
        async with make_kafka_log(kafka_bootstrap, kafka_topics) as log:
            # One call = one batch: Tansu's ListOffsets would say 1 here, not 7.
            await log.append_outputs([f"d{i}".encode() for i in range(7)])
            assert await log.output_end() == 7
            # Each read returns at the end as of the call with nobody appending: a read that
            # waited for news would never return (pytest-timeout), whatever the machine's speed.
            assert [r.offset for r in await log.read_outputs(0)] == list(range(7))
            assert [r.value for r in await log.read_outputs(5, 100)] == [b"d5", b"d6"]
            assert await log.read_outputs(7) == []
            assert await log.read_outputs(50) == []
            with pytest.raises(LogError):
                await log.read_outputs(-1)

    run(body())


def test_dead_letter_keeps_bytes_and_origin(
    kafka_bootstrap: str, kafka_topics: KafkaTopics
) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def body() -> None:
        async with make_kafka_log(kafka_bootstrap, kafka_topics) as log:
            await log.append_inputs([(b"app-1", b"\xff not json")])
            (bad,) = await read_all(log, 1)
            await log.dead_letter(bad, "invalid: not valid JSON")
        consumer = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest")
        await consumer.start()
        try:
            tp = TopicPartition(kafka_topics.deadletter, 0)
            consumer.assign([tp])
            batch = await consumer.getmany(tp, timeout_ms=5000)
        finally:
            await consumer.stop()
        (parked,) = batch[tp]
        assert (parked.key, parked.value) == (b"app-1", b"\xff not json")
        assert dict(parked.headers) == {
            "evsched.source.topic": kafka_topics.inputs.encode(),
            "evsched.source.partition": b"0",
            "evsched.source.offset": str(bad.offset).encode(),
            "evsched.error": b"invalid: not valid JSON",
        }

    run(body())


def test_commit_survives_restart(kafka_bootstrap: str, kafka_topics: KafkaTopics) -> None:
    async def body() -> None:
        async with make_kafka_log(kafka_bootstrap, kafka_topics, partitions=2) as log:
            await log.append_inputs([(f"k{i}".encode(), b"v") for i in range(10)])
            assert await log.committed() == {}
            positions = await log.input_end()
            await log.commit(positions)
        async with make_kafka_log(kafka_bootstrap, kafka_topics, partitions=2) as log:
            assert await log.committed() == {ch: n for ch, n in positions.items() if n}

    run(body())


def test_group_subscription_revokes_through_the_callback(
    kafka_bootstrap: str, kafka_topics: KafkaTopics
) -> None:
    fast = {"group_subscribe": True, "heartbeat_interval_ms": 200, "session_timeout_ms": 6000}

    async def body() -> None:
        first = make_kafka_log(kafka_bootstrap, kafka_topics, partitions=4, **fast)
        second = make_kafka_log(kafka_bootstrap, kafka_topics, partitions=4, **fast)
        revoked: list[list[str]] = []

        async def drain(channels: list[str]) -> None:
            # What the service does: finish the cycle, commit, then let the partitions go.
            await first.commit({ch: 0 for ch in channels})
            revoked.append(channels)

        await first.start()
        try:
            everything = await first.input_channels()
            assert len(everything) == 4
            first.set_revoke_callback(drain)
            await second.start()
            deadline = time.monotonic() + HANG_S
            while len(await first.input_channels()) == 4:
                assert time.monotonic() < deadline, "the group never rebalanced"
                await asyncio.sleep(0.05)
            assert revoked and sorted(revoked[0]) == sorted(everything)
            mine, theirs = await first.input_channels(), await second.input_channels()
            assert mine and theirs and sorted(mine + theirs) == sorted(everything)
            assert await second.committed() == dict.fromkeys(theirs, 0)  # drained in time
        finally:
            await second.close()
            await first.close()

    run(body())


def test_closed_log_refuses_and_hides_credentials(kafka_bootstrap: str) -> None:
    log = KafkaLog(kafka_bootstrap, sasl_mechanism="PLAIN", sasl_plain_password="s3cret")
    assert "s3cret" not in repr(log)
    with pytest.raises(LogError, match="not started"):
        run(log.read_inputs({}, 10))
    with pytest.raises(LogError, match="not started"):
        run(log.append_outputs([b"x"]))


def test_reading_again_from_inside_the_last_batch_gives_the_same_records(
    kafka_bootstrap: str, kafka_topics: KafkaTopics
) -> None:
    # Recovery's pattern: read a batch, use one cycle's worth, ask again from there. Served
    # from the last batch (no seek), and a position outside it still seeks and fetches.
    async def body() -> None:
        async with make_kafka_log(kafka_bootstrap, kafka_topics) as log:
            await log.append_inputs([(b"k", f"v{i}".encode()) for i in range(50)])
            (channel,) = await log.input_channels()
            everything = await read_all(log, 50)
            assert [r.offset for r in everything] == list(range(50))
            again = await log.read_inputs({channel: 10}, 5)
            assert again == everything[10:15]
            rest = await log.read_inputs({channel: 15}, 1000)
            assert rest == everything[15:len(rest) + 15] and rest
            assert await log.read_inputs({channel: 0}, 3) == everything[:3]
            # After the last record nothing is re-read; a read from the end waits for news.
            assert await log.read_inputs({channel: 50}, 10) == []
            await log.append_inputs([(b"k", b"v50")])
            later = await read_all(log, 1, {channel: 50})
            assert [(r.offset, r.value) for r in later] == [(50, b"v50")]

    run(body())



def test_a_batch_spanning_several_fetches_is_read_whole(kafka_bootstrap: str, kafka_topics: KafkaTopics) -> None:
    """Each read gives the whole batch asked for while the high watermark shows the records are
    there, even where one fetch ends mid-batch (Tansu ended one after 24,904 of these records:
    without the top-up the second read below gave 4,904)."""

    async def body() -> None:
        async with make_kafka_log(kafka_bootstrap, kafka_topics) as log:
            for chunk in range(6):
                await log.append_inputs([(None, b"x" * 200 + str(chunk * 5_000 + i).encode()) for i in range(5_000)])
            positions: dict[str, int] = {}
            sizes: list[int] = []
            deadline = time.monotonic() + HANG_S
            while sum(sizes) < 30_000:
                assert time.monotonic() < deadline, sizes
                got = await log.read_inputs(positions, 5_000 if sizes else 20_000)
                if got:
                    sizes.append(len(got))
                    positions[got[0].channel] = got[-1].offset + 1
            assert sizes == [20_000, 5_000, 5_000]

    run(body())


def test_the_diagnosis_of_a_failed_start_tries_every_bootstrap_server(kafka_bootstrap: str) -> None:
    """A bootstrap list whose first server is down is reachable (the client's own error is the one
    to report, not "cannot connect" to that server); a list with none up names the first."""
    from events.log.kafka.clients import diagnose
    from tests.procs import free_port

    down = f"127.0.0.1:{free_port()}"
    assert asyncio.run(diagnose({"bootstrap_servers": f"{down},{kafka_bootstrap}"})) is None
    why = asyncio.run(diagnose({"bootstrap_servers": f"{down},127.0.0.1:{free_port()}"}))
    assert why is not None and str(why).startswith(f"cannot connect to {down}: ")
