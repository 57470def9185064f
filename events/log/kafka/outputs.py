"""The output side of the Kafka log: batched appends, dead-letter headers, reading back.

``append_batched`` builds record batches itself: a cycle's thousands of outputs cost a
handful of produce requests instead of a ``send`` (and its bookkeeping) per record.
``OutputReader`` reads a partition to its end and finds true end offsets with a group-less
consumer of its own: it never joins a group, so reading outputs (recovery, replay, end offsets) can
never move an instance's committed input offsets.

Outputs are read ``read_committed``: with transactions (``KafkaLog(transactional_id=…)``) a
cycle's outputs appear when its transaction commits, an aborted one's never, and commit
markers take offsets of their own, so output offsets may have gaps.

Brokers differ: Tansu (the test broker) answers ListOffsets(latest) with the base offset
of the last batch + 1 rather than the high watermark, so end offsets are confirmed with a
fetch, whose high watermark every broker reports correctly. See ``end_offsets``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from events.log.kafka.topics import channel_name
from events.log.names import DEFAULT_REQUEST_TIMEOUT_MS
from events.log.port import LogError, LogRecord
from events.times import NO_APPEND_TIME_US

MAX_ERROR_HEADER = 8192  # a dead-letter reason is for people; keep headers bounded


async def append_batched(producer: Any, tp: TopicPartition, values: Sequence[bytes], stamp_ms: int) -> int | None:
    """Append ``values`` to ``tp`` in order, in as few record batches as fit; await every ack.

    Returns the offset after the last record appended (None when ``values`` is empty)."""
    futures = []
    last_count = 0
    try:
        batch = producer.create_batch()
        for value in values:
            if batch.append(key=None, value=value, timestamp=stamp_ms) is None:  # full: send it, start anew
                futures.append(await producer.send_batch(batch, tp.topic, partition=tp.partition))
                batch = producer.create_batch()
                if batch.append(key=None, value=value, timestamp=stamp_ms) is None:
                    raise LogError(f"an output of {len(value)} bytes does not fit in a record batch")
        if batch.record_count():
            last_count = batch.record_count()
            futures.append(await producer.send_batch(batch, tp.topic, partition=tp.partition))
        # Every future is awaited even when one fails (a fenced producer fails them all).
        acks = await asyncio.gather(*futures, return_exceptions=True)
        failed = next((a for a in acks if isinstance(a, BaseException)), None)
        if failed is not None:
            raise failed
    except KafkaError as exc:
        raise LogError(f"appending outputs ({len(values)} records) failed: {exc!r}") from exc
    if not acks:
        return None
    last: Any = acks[-1]
    return int(last.offset) + (last_count or 1)


def dead_letter_headers(record: LogRecord, error: str) -> list[tuple[str, bytes]]:
    """Where an unreadable input came from, and why it was refused (docs/events.md)."""
    topic, _, partition = record.channel.rpartition("/")
    return [
        ("evsched.source.topic", (topic or record.channel).encode()),
        ("evsched.source.partition", partition.encode()),
        ("evsched.source.offset", str(record.offset).encode()),
        ("evsched.error", error.encode("utf-8", "replace")[:MAX_ERROR_HEADER]),
    ]


def to_records(tp: TopicPartition, records: Iterable[Any], now_us: Callable[[], int]) -> list[LogRecord]:
    """aiokafka ConsumerRecords of one partition as port ``LogRecord``s.

    A record without a timestamp (−1) gets ``NO_APPEND_TIME_US``, never the reader's clock:
    that would be recorded nowhere, so replay could not decide as live did. ``now_us`` is
    not read here (it is kept for the callers' signature)."""
    channel = channel_name(tp)
    out = []
    for rec in records:
        stamp = rec.timestamp
        value = rec.value
        out.append(LogRecord(channel, rec.offset, value if value is not None else b"",
                             stamp * 1000 if stamp is not None and stamp >= 0 else NO_APPEND_TIME_US, rec.key))
    return out


class OutputReader:
    """Reads a partition from an offset to its end, and finds partitions' true end offsets."""

    def __init__(self, options: Mapping[str, Any], now_us: Callable[[], int]) -> None:
        self._options = dict(options)
        self._now_us = now_us
        self._timeout_s = self._options.get("request_timeout_ms", DEFAULT_REQUEST_TIMEOUT_MS) / 1000
        self._consumer: Any = None
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        # read_committed: a transaction's outputs are read once committed, an aborted one's
        # (a fenced instance's) never; end offsets are the last stable offset.
        self._consumer = AIOKafkaConsumer(
            group_id=None, enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=10,
            isolation_level="read_committed", **self._options,
        )
        await self._consumer.start()

    async def stop(self) -> None:
        """Stop the consumer (idempotent)."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await consumer.stop()

    def _require(self) -> Any:
        if self._consumer is None:
            raise LogError("Kafka log is not started (or already closed)")
        return self._consumer

    async def read(self, tp: TopicPartition, start: int, max_records: int | None) -> list[LogRecord]:
        """Records of ``tp`` from ``start`` up to the end as of this call, then stop."""
        if start < 0:
            raise LogError(f"negative offset {start}")
        end = (await self.end_offsets([tp]))[tp]
        stop = end if max_records is None else min(end, start + max_records)
        if start >= stop:
            return []
        async with self._lock:
            reader = self._require()
            reader.assign([tp])
            reader.seek(tp, start)
            out: list[LogRecord] = []
            deadline = time.monotonic() + self._timeout_s
            try:
                # Stop on the consumer's position, not on the last record's offset: a gap
                # (compaction, transaction markers) must not make us wait for more.
                while await reader.position(tp) < stop:
                    if time.monotonic() > deadline:
                        raise LogError(f"reading outputs {start}..{stop} timed out at {len(out)}")
                    batch = await reader.getmany(tp, timeout_ms=100, max_records=stop - start)
                    out.extend(to_records(tp, [r for r in batch.get(tp, ()) if r.offset < stop], self._now_us))
            except KafkaError as exc:
                raise LogError(f"reading output records failed: {exc!r}") from exc
            return out

    async def end_offsets(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermark of each partition, correct on Tansu as well as on Kafka.

        ListOffsets(latest) is asked first; where it says the partition is not empty, a
        fetch from the offset before it returns the true high watermark (Tansu's
        ListOffsets stops at the last batch's base offset + 1). Re-assigning clears the
        reader's previous high watermarks, so a ``None`` means "no answer yet".
        """
        if not tps:
            return {}
        async with self._lock:
            reader = self._require()
            try:
                listed: dict[TopicPartition, int] = await reader.end_offsets(list(tps))
                busy = [tp for tp in tps if listed[tp] > 0]
                if not busy:
                    return dict(listed)
                reader.assign(busy)
                for tp in busy:
                    reader.seek(tp, listed[tp] - 1)
                deadline = time.monotonic() + self._timeout_s
                while any(reader.highwater(tp) is None for tp in busy):
                    if time.monotonic() > deadline:
                        raise LogError(f"no high watermark from the broker for {busy}")
                    await reader.getmany(*busy, timeout_ms=20, max_records=1)
                ends = dict(listed)
                for tp in busy:
                    # Read committed, the end is the last stable offset (records past it belong to
                    # an open transaction); a broker without transactions reports none, or the HW.
                    stable = reader.last_stable_offset(tp)
                    end = stable if stable is not None and stable >= 0 else reader.highwater(tp)
                    ends[tp] = max(listed[tp], min(end, reader.highwater(tp)))
                return ends
            except KafkaError as exc:
                raise LogError(f"reading end offsets failed: {exc!r}") from exc
