"""``KafkaLog``: the EventLog port over Kafka — input topic-partitions in, decisions out.

Channels are ``<topic>/<partition>`` (``evsched.inputs/0``) and positions are Kafka
offsets. Outputs go to partition 0 of the decisions topic, so their order is total.
Input offsets are committed explicitly (``commit``), only after the outputs of the cycle
that consumed them are acknowledged; auto-commit is off.

Partitions are either all assigned manually (the default: one instance owns every input
partition of its topics) or handed out by the consumer group (``group_subscribe=True``);
in that mode the service registers ``set_revoke_callback`` to drain and commit before a
partition goes. A sharded instance (``scheduler.service.shards``) opens one manually assigned
``KafkaLog`` per shard and commits through its group membership (``commit_offsets``).

Two waits matter for latency: ``poll_timeout_ms`` is how long ``read_inputs`` waits on the
client for records (it returns as soon as a fetch brings some), and ``fetch_max_wait_ms`` how
long the broker may hold a fetch that finds nothing. Apache Kafka answers a held fetch as
soon as data arrives; Tansu holds it for the whole wait, so that wait is added to the
event→decision latency there. Hence a short default.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import (
    InvalidProducerEpoch,
    KafkaError,
    MessageSizeTooLargeError,
    ProducerFenced,
    RecordListTooLargeError,
)
from aiokafka.producer import sender as _aiokafka_sender

from events.log.clock import wall_clock_us
from events.log.kafka.clients import GroupListener, diagnose, ensure_topics, probe_transactions
from events.log.kafka.lease import KafkaLease
from events.log.kafka.outputs import (
    MAX_ERROR_HEADER,
    OutputReader,
    append_batched,
    dead_letter_headers,
    to_records,
)
from events.log.kafka.recent import RecentBatches
from events.log.kafka.topics import channel_name, parse_channel
from events.log.kafka_options import client_options
from events.log.names import (
    DEFAULT_FETCH_WAIT_MS,
    DEFAULT_HEARTBEAT_INTERVAL_MS,
    DEFAULT_REQUEST_TIMEOUT_MS,
    DEFAULT_SESSION_TIMEOUT_MS,
)
from events.log.port import LogError, LogFenced, LogRecord, LogRefused

log = logging.getLogger("evsched.kafka")

RevokeCallback = Callable[[list[str]], Awaitable[None]]
OffsetCommitter = Callable[[dict[TopicPartition, int]], Awaitable[None]]

_FILL_S = 0.05  # read_inputs: how long it may top a short batch up while more records are there
_SEEK_ANSWER_S = 5.0  # read_inputs: how long an empty read after a seek waits for the fetch
_ADMIN_CATCH_UP_S = 2.0  # read_inputs: how long a batch waits for the admin topic's fetch to catch up
_BATCH_BYTES = 512 * 1024  # well under the brokers' default 1 MiB message limit
_FETCH_BYTES = 8 * 1024 * 1024  # per input partition and fetch

# A transaction whose first AddPartitionsToTxn reaches the coordinator while the last one's
# commit markers are still being written is answered CONCURRENT_TRANSACTIONS; aiokafka retries
# that after a fixed 20 ms (its BACKOFF_OVERRIDE, KAFKA-5477's figure). Markers take a few ms
# on a nearby broker, and the service begins a cycle's transaction as soon as the last one's
# commit returns (it decided the cycle meanwhile), so 20 ms was a whole extra cycle of latency
# each time; 2 ms costs a few more small requests instead.
_aiokafka_sender.BACKOFF_OVERRIDE = 0.002


class KafkaLog:
    """EventLog over Kafka. ``await start()`` before use, ``await close()`` after."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        input_topics: Sequence[str] = ("evsched.inputs",),
        decisions_topic: str = "evsched.decisions",
        deadletter_topic: str = "evsched.deadletter",
        admin_topic: str | None = None,
        group_id: str = "evsched",
        client_id: str = "evsched",
        partitions: int = 1,
        replication_factor: int | None = None,
        group_subscribe: bool = False,
        security_protocol: str = "PLAINTEXT",
        sasl_mechanism: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        poll_timeout_ms: int = 100,
        fetch_max_wait_ms: int = DEFAULT_FETCH_WAIT_MS,
        request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS,
        assignment_timeout_s: float = 60.0,
        commit_offsets: OffsetCommitter | None = None,
        now_us: Callable[[], int] | None = None,
        transactional_id: str | None = None,
        fence_at_start: bool = True,
        writes_only: bool = False,
    ) -> None:
        if not input_topics:
            raise ValueError("at least one input topic is required")
        self._options = client_options(
            bootstrap_servers, client_id=client_id, request_timeout_ms=request_timeout_ms,
            security_protocol=security_protocol, sasl_mechanism=sasl_mechanism,
            sasl_plain_username=sasl_plain_username, sasl_plain_password=sasl_plain_password, ssl_context=ssl_context,
        )
        self._bootstrap = self._options["bootstrap_servers"]
        # The admin topic is read as one more input topic, merged last (docs/security.md);
        # None: a log without one (rules changes then come from nowhere unless accepted on inputs).
        self._admin_topic = admin_topic
        self._input_topics = list(input_topics) + ([admin_topic] if admin_topic and admin_topic not in input_topics
                                                   else [])
        self._decisions, self._deadletter = decisions_topic, deadletter_topic
        self._group_id, self._client_id = group_id, client_id
        self._partitions, self._replication = partitions, replication_factor
        self._group_subscribe = group_subscribe
        self._poll_timeout_ms, self._fetch_max_wait_ms = poll_timeout_ms, fetch_max_wait_ms
        self._session_timeout_ms = session_timeout_ms
        self._heartbeat_interval_ms = heartbeat_interval_ms
        self._assignment_timeout_s = assignment_timeout_s
        self._commit_offsets = commit_offsets
        self._now_us = now_us or wall_clock_us
        self._producer: Any = None
        self._consumer: Any = None
        self._outputs = OutputReader(self._options, self._now_us)
        self._manual: list[TopicPartition] = []
        self._delivered: dict[TopicPartition, int] = {}  # next offset the consumer will give
        self._recent = RecentBatches()  # answers recovery's re-reads without seeking back
        self._assigned = asyncio.Event()
        self._revoke_cb: RevokeCallback | None = None
        self._decisions_tp = TopicPartition(decisions_topic, 0)
        self._transactional_id = transactional_id
        self._txn: Any = None  # the transactional producer of outputs (transactional_id given)
        self._fence_at_start = fence_at_start  # False: a standby fences once it holds the lease (take_over)
        # True: a producer of inputs (submit, config apply): no consumer, so no consumer group whose
        # coordinator a fresh broker has yet to elect (aiokafka logs that at ERROR, then retries)
        self._writes_only = writes_only

    def __repr__(self) -> str:
        return (
            f"KafkaLog(bootstrap={self._bootstrap!r}, inputs={self._input_topics!r}, "
            f"decisions={self._decisions!r}, group={self._group_id!r})"
        )

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Create missing topics, start the clients, take the input partitions."""
        mode = "group subscription" if self._group_subscribe else "manual assignment"
        log.info("connecting to Kafka %s as %s (%s)", self._bootstrap, self._group_id, mode)
        try:
            wanted = dict.fromkeys(self._input_topics, self._partitions)
            wanted[self._decisions] = 1  # one partition: outputs are totally ordered
            wanted[self._deadletter] = 1
            durable = [self._decisions, *self._input_topics]  # the state is folded from these: kept forever
            partition_counts = await ensure_topics(self._options, wanted, self._replication, durable)
            # linger 0: records queued in one call still share a batch (the sender task
            # only runs once we await), and a lone record is not held back. Batches of up
            # to 512 KiB: with the default 16 KiB a cycle's outputs took ~100 round trips
            # (one batch per partition is in flight at a time).
            self._producer = AIOKafkaProducer(acks="all", linger_ms=0, max_batch_size=_BATCH_BYTES, **self._options)
            await self._producer.start()
            if self._writes_only:
                return
            if self._fence_at_start:
                await self.take_over()
            self._consumer = AIOKafkaConsumer(
                group_id=self._group_id,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                isolation_level="read_committed",
                fetch_max_wait_ms=self._fetch_max_wait_ms,
                # A fetch holds a whole batch (the default 1 MiB per partition is ~4,000
                # records): cycles get full batches, not whatever the last fetch held.
                max_partition_fetch_bytes=_FETCH_BYTES,
                session_timeout_ms=self._session_timeout_ms,
                heartbeat_interval_ms=self._heartbeat_interval_ms,
                **self._options,
            )
            await self._consumer.start()
            await self._outputs.start()
            if self._group_subscribe:
                listener = GroupListener(self._on_assigned, self._on_revoked)
                self._consumer.subscribe(self._input_topics, listener=listener)
                await asyncio.wait_for(self._assigned.wait(), self._assignment_timeout_s)
            else:
                self._manual = [
                    TopicPartition(topic, p) for topic in self._input_topics for p in range(partition_counts[topic])
                ]
                self._consumer.assign(self._manual)
        except (KafkaError, LogError, OSError, TimeoutError) as exc:
            await self.close()
            why = await diagnose(self._options)  # aiokafka only says "unable to bootstrap"
            if isinstance(why, LogRefused):
                raise why from exc
            raise LogError(f"cannot start Kafka log on {self._bootstrap}: {why or repr(exc)}") from exc

    async def take_over(self) -> None:
        """Start the transactional producer (once): InitProducerId bumps the id's epoch, so a
        previous owner of this log is fenced from here on and its open transaction is aborted
        before this instance reads the log. A standby calls it once it holds the lease."""
        if self._transactional_id is None or self._txn is not None:
            return
        # A transaction begun while the last one's markers are still being written is answered
        # CONCURRENT_TRANSACTIONS and retried after the backoff: 100 ms (the default) per cycle
        # would halve a busy loop's rate; the Java client retries these after 20 ms.
        producer = AIOKafkaProducer(
            transactional_id=self._transactional_id, acks="all", linger_ms=0, max_batch_size=_BATCH_BYTES,
            retry_backoff_ms=20, **self._options,
        )
        try:
            await producer.start()
        except KafkaError as exc:
            await producer.stop()
            raise LogError(f"cannot start the transactional producer {self._transactional_id!r}: {exc!r}") from exc
        self._txn = producer
        log.info("exactly-once: outputs and input offsets commit in one transaction (transactional id %s)",
                 self._transactional_id)

    async def close(self) -> None:
        """Stop every client (idempotent)."""
        clients = [("consumer", self._consumer), ("reader", self._outputs), ("producer", self._producer),
                   ("transactional producer", self._txn)]
        self._consumer = self._producer = self._txn = None
        for name, client in clients:
            if client is not None:
                try:
                    await client.stop()
                except KafkaError as exc:  # closing is best effort; the process may be exiting
                    log.warning("error stopping Kafka %s: %r", name, exc)

    async def __aenter__(self) -> KafkaLog:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ group membership

    def set_revoke_callback(self, callback: RevokeCallback | None) -> None:
        """Register ``await callback(channels)``: run before partitions leave this instance."""
        self._revoke_cb = callback

    async def _on_revoked(self, revoked: list[TopicPartition]) -> None:
        channels = sorted(channel_name(tp) for tp in revoked)
        log.info("partitions revoked: %s", channels)
        if revoked and self._revoke_cb is not None:
            await self._revoke_cb(channels)
        for tp in revoked:
            self._delivered.pop(tp, None)
            self._recent.forget(tp)

    def _on_assigned(self, assigned: list[TopicPartition]) -> None:
        log.info("partitions assigned: %s", sorted(channel_name(tp) for tp in assigned))
        for tp in assigned:
            self._delivered.pop(tp, None)  # position unknown: the next read seeks
            self._recent.forget(tp)
        self._assigned.set()

    def _assignment(self) -> list[TopicPartition]:
        """Assigned input partitions in a fixed order: topic order, then partition."""
        consumer = self._require(self._consumer)
        if not self._group_subscribe:
            return list(self._manual)
        order = {topic: i for i, topic in enumerate(self._input_topics)}
        current = consumer.assignment()
        return sorted(current, key=lambda tp: (order.get(tp.topic, len(order)), tp.partition))

    @staticmethod
    def _require(client: Any) -> Any:
        if client is None:
            raise LogError("Kafka log is not started (or already closed)")
        return client

    # ------------------------------------------------------------------ inputs

    async def input_channels(self) -> list[str]:
        return [channel_name(tp) for tp in self._assignment()]

    async def admin_channels(self) -> list[str]:
        return [channel_name(tp) for tp in self._assignment() if tp.topic == self._admin_topic]

    async def append_admin(self, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        """Send keyed records to the admin topic (the producing principal needs write on it)."""
        if not self._admin_topic:
            raise LogError("this Kafka log has no admin topic")
        await self._send_all(f"appending to the admin topic {self._admin_topic!r}", self._admin_topic, records, None)

    async def append_inputs(
        self,
        records: Sequence[tuple[bytes | None, bytes]],
        *,
        topic: str | None = None,
        partition: int | None = None,
    ) -> None:
        """Send keyed records; the key picks the partition unless ``partition`` is given."""
        target = topic or self._input_topics[0]
        await self._send_all(f"appending inputs to {target!r}", target, records, partition)

    async def _send_all(
        self,
        what: str,
        topic: str,
        records: Sequence[tuple[bytes | None, bytes]],
        partition: int | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        """Queue every record, then await all acks: the client batches what is queued together.

        One ``send_and_wait`` per record would cost a broker round trip each.
        """
        producer = self._require(self._producer)
        stamp_ms = self._now_us() // 1000
        try:
            futures = [
                await producer.send(topic, v, k, partition=partition, timestamp_ms=stamp_ms, headers=headers)
                for k, v in records
            ]
            await asyncio.gather(*futures)
        except KafkaError as exc:
            raise LogError(f"{what} ({len(records)} records) failed: {exc!r}") from exc

    async def read_inputs(self, positions: Mapping[str, int], max_records: int) -> list[LogRecord]:
        consumer = self._require(self._consumer)
        assigned = self._assignment()
        if max_records <= 0 or not assigned:
            return []
        again = self._recent.again(assigned, positions, self._delivered, max_records)
        if again:
            return again
        sought = []
        for tp in assigned:
            wanted = positions.get(channel_name(tp), 0)
            # Seeking drops the consumer's prefetched records, so only seek on a change.
            if self._delivered.get(tp) != wanted:
                consumer.seek(tp, wanted)
                self._delivered[tp] = wanted
                sought.append(tp)
        deadline = time.monotonic() + _SEEK_ANSWER_S
        try:
            while True:
                batches = await consumer.getmany(*assigned, timeout_ms=self._poll_timeout_ms, max_records=max_records)
                if any(batches.values()) or not sought or time.monotonic() > deadline:
                    break
                # After a seek the fetch for the new position is often not back within one
                # poll; "nothing there" holds only once a fetch's high watermark says so
                # (recovery and --once must not mistake a slow answer for the log's end).
                ends = [(consumer.highwater(tp), self._delivered[tp]) for tp in sought]
                if all(end is not None and end <= wanted for end, wanted in ends):
                    break
            got: dict[TopicPartition, list[LogRecord]] = {}
            count = self._take(assigned, batches, got)
            # A broker caps what one fetch answers with, so a large batch may span several
            # fetches. On a backlog — the partitions' high watermarks say enough records are
            # there to fill the batch — top it up: a short batch is a cycle's fixed cost spent
            # on less work, and resets the service's batch growth. A trickle of new records
            # never waits here; a backlog at most a short time budget.
            fill_until = time.monotonic() + _FILL_S
            while count < max_records and self._waiting(consumer, assigned, got) >= max_records - count:
                left_ms = int((fill_until - time.monotonic()) * 1000)
                if left_ms <= 0:
                    break
                batches = await consumer.getmany(*assigned, timeout_ms=left_ms, max_records=max_records - count)
                if not any(batches.values()):
                    break
                count += self._take(assigned, batches, got)
            admin = [tp for tp in assigned if tp.topic == self._admin_topic]
            if admin and count:
                await self._admin_catch_up(consumer, assigned, admin, sought, got, max_records)
        except KafkaError as exc:
            raise LogError(f"reading input records failed: {exc!r}") from exc
        out: list[LogRecord] = []
        for tp in assigned:
            self._check_not_behind(consumer, tp, got.get(tp))
            records = got.get(tp)
            if records:
                out.extend(records)
                self._delivered[tp] = records[-1].offset + 1
                self._recent.remember(tp, records)
        return out

    async def _admin_catch_up(self, consumer: Any, assigned: list[TopicPartition], admin: list[TopicPartition],
                              sought: list[TopicPartition], got: dict[TopicPartition, list[LogRecord]],
                              max_records: int) -> None:
        """Add the admin topic's records to a batch of inputs, waiting (briefly) for a fetch that has
        not answered yet.

        The admin topic's records join a batch even when it is full: they are few, and a config sent
        before the inputs it governs then applies first (the cycle merges by event time) rather than a
        batch later — right after a start the inputs' fetch may answer first, and a first cycle without
        the config rejects every app, then every ask (unknown-app). A partition has answered when its
        records are in the batch, or, in the steady state, when a fetch brought its high watermark.
        Right after a seek that watermark proves nothing: the consumer keeps the one of a fetch from
        before the seek, whose records the seek dropped (aiokafka's ``Fetcher.seek_to``) — which
        handed a sharded instance's first cycle the inputs without their config now and then. So a
        partition sought in this read without records in it asks the broker for its end, and the batch
        waits for its records when there are any after the position.
        """
        self._take(assigned, await consumer.getmany(*admin, timeout_ms=0, max_records=max_records), got)
        unanswered = [tp for tp in admin
                      if not got.get(tp) and (tp in sought or consumer.highwater(tp) is None)]
        if not unanswered:
            return
        ends = await self._outputs.end_offsets(unanswered)
        unanswered = [tp for tp in unanswered if ends[tp] > self._delivered.get(tp, 0)]
        until = time.monotonic() + _ADMIN_CATCH_UP_S
        while unanswered and time.monotonic() < until:
            self._take(assigned, await consumer.getmany(*unanswered, timeout_ms=10, max_records=max_records), got)
            unanswered = [tp for tp in unanswered if not got.get(tp)]

    def _check_not_behind(self, consumer: Any, tp: TopicPartition, records: list[LogRecord] | None) -> None:
        """An input partition never goes back: its end below this instance's position, or a
        record before it, means the topic was deleted and re-created (or truncated) under the
        running service. Reading on would skip the new topic's records up to the old position
        (later asks then reject ``unknown-app``), so it stops with a clear error instead."""
        wanted = self._delivered.get(tp, 0)
        end = consumer.highwater(tp)
        first = records[0].offset if records else None
        if (end is not None and end < wanted) or (first is not None and first < wanted):
            raise LogError(
                f"input {channel_name(tp)} went back: this instance is at offset {wanted}, but the partition "
                f"{'ends at ' + str(end) if first is None else 'returned offset ' + str(first)} — the topic was "
                "deleted and re-created, or truncated, under the running service; stopping (its records up to the "
                "old position would be skipped). Decide deliberately: restore the topic, or start a fresh "
                "decisions topic for the new one"
            )

    def _take(self, assigned: list[TopicPartition], batches: Mapping[TopicPartition, Any],
              got: dict[TopicPartition, list[LogRecord]]) -> int:
        """Append the records of ``batches`` to ``got`` per partition; how many there were."""
        taken = 0
        for tp in assigned:
            records = to_records(tp, batches.get(tp, ()), self._now_us)
            if records:
                got.setdefault(tp, []).extend(records)
                taken += len(records)
        return taken

    def _waiting(self, consumer: Any, assigned: list[TopicPartition],
                 got: Mapping[TopicPartition, list[LogRecord]]) -> int:
        """Records past what this read has, by the partitions' last known high watermarks."""
        waiting = 0
        for tp in assigned:
            have = got.get(tp)
            after = have[-1].offset + 1 if have else self._delivered.get(tp, 0)
            end = consumer.highwater(tp)
            if end is not None and end > after:
                waiting += end - after
        return waiting

    async def input_end(self) -> dict[str, int]:
        ends = await self._outputs.end_offsets(self._assignment())
        return {channel_name(tp): end for tp, end in ends.items()}

    async def commit(self, positions: Mapping[str, int]) -> None:
        """Commit group offsets ``{channel: next offset}``; call once outputs are acknowledged."""
        consumer = self._require(self._consumer)
        offsets = self._offsets(positions)
        if not offsets:
            return
        if self._commit_offsets is not None:
            await self._commit_offsets(offsets)
            return
        try:
            await consumer.commit(offsets)
        except KafkaError as exc:
            raise LogError(f"committing offsets {positions!r} failed: {exc!r}") from exc

    def _offsets(self, positions: Mapping[str, int]) -> dict[TopicPartition, int]:
        """``{channel: offset}`` as the assigned input partitions' offsets to commit."""
        assigned = set(self._assignment())
        offsets = {}
        for channel, offset in positions.items():
            tp = parse_channel(channel)
            if tp.topic not in self._input_topics:
                raise LogError(f"{channel!r} is not a channel of the input topics")
            if tp in assigned:  # a revoked partition's offsets are its new owner's business
                offsets[tp] = offset
        return offsets

    async def committed(self) -> dict[str, int]:
        """The group's committed offsets of the assigned partitions (absent: none committed)."""
        consumer = self._require(self._consumer)
        found = {channel_name(tp): await consumer.committed(tp) for tp in self._assignment()}
        return {channel: offset for channel, offset in found.items() if offset is not None}

    async def dead_letter(self, record: LogRecord, error: str) -> None:
        """Park an unprocessable record's raw bytes on the dead-letter topic, with its origin."""
        headers = dead_letter_headers(record, error)
        what = f"dead-lettering {record.position}"
        try:
            await self._send_all(what, self._deadletter, [(record.key, record.value)], None, headers)
        except LogError as exc:
            if not isinstance(exc.__cause__, (MessageSizeTooLargeError, RecordListTooLargeError)):
                raise
            # Too large for the producer or the broker: this would fail on every attempt, so
            # park the origin without the bytes (they stay readable at their input offset).
            dropped = f"value of {len(record.value)} bytes not copied: {exc.__cause__}"
            headers.append(("evsched.value-dropped", dropped.encode()[:MAX_ERROR_HEADER]))
            await self._send_all(what, self._deadletter, [(record.key, b"")], None, headers)

    # ------------------------------------------------------------------ outputs

    # Offsets of the decisions topic may hold no record (commit markers, aborted records):
    # ``read_outputs`` over a range returns once it has read the range to its end.
    gapped_outputs = True

    @property
    def transactional(self) -> bool:
        """Whether outputs go out in transactions (``append_cycle`` commits offsets with them)."""
        return self._transactional_id is not None

    async def append_outputs(self, values: Sequence[bytes]) -> None:
        if self._transactional_id is not None:
            await self.append_cycle(values, {})
            return
        producer = self._require(self._producer)
        await append_batched(producer, self._decisions_tp, values, self._now_us() // 1000)

    async def append_cycle(self, values: Sequence[bytes], positions: Mapping[str, int]) -> int | None:
        """A cycle's outputs and its input positions, committed as one transaction; returns the
        offset after the last output (None when nothing was written).

        Without a transactional id: the outputs, then an ordinary offset commit. A producer
        fenced by a newer owner of the same transactional id raises ``LogFenced``.
        """
        if self._transactional_id is None:
            await self.append_outputs(values)
            await self.commit(positions)
            return None
        producer = self._require(self._txn)
        offsets = self._offsets(positions)
        try:
            await producer.begin_transaction()
            try:
                end = await append_batched(producer, self._decisions_tp, values, self._now_us() // 1000)
                if offsets:
                    await producer.send_offsets_to_transaction(offsets, self._group_id)
            except BaseException:
                if not _fatal(producer):
                    await producer.abort_transaction()
                raise
            await producer.commit_transaction()
        except (KafkaError, LogError) as exc:
            if _fenced(producer, exc):
                raise LogFenced(
                    f"fenced: another instance took over the decisions log {self._decisions!r} "
                    f"(transactional id {self._transactional_id!r}; {_root(exc)!r}); nothing more this "
                    "instance writes to it can become visible"
                ) from exc
            if isinstance(exc, LogError):
                raise
            raise LogError(f"committing a cycle's transaction ({len(values)} outputs) failed: {exc!r}") from exc
        return end

    async def read_outputs(self, start: int = 0, max_records: int | None = None) -> list[LogRecord]:
        """Records of decisions/0 from ``start`` up to the end as of this call, then stop."""
        return await self._outputs.read(self._decisions_tp, start, max_records)

    async def output_end(self) -> int:
        tp = self._decisions_tp
        return (await self._outputs.end_offsets([tp]))[tp]

    # ------------------------------------------------------------------ lease, capabilities

    def lease(self) -> KafkaLease:
        """The active lease of this log's instances (``KafkaLease``), built from its options."""
        return KafkaLease(
            self._options, topic=self._decisions, group_id=f"{self._group_id}.active",
            session_timeout_ms=self._session_timeout_ms, heartbeat_interval_ms=self._heartbeat_interval_ms,
        )

    async def probe_transactions(self, timeout_s: float = 10.0) -> tuple[bool, str]:
        """Can this broker run a transactional producer? ``(supported, reason)``."""
        return await probe_transactions(self._options, self._client_id, timeout_s)


def _fatal(producer: Any) -> bool:
    """Whether a transactional producer is beyond use: fenced by a newer epoch of its id (aiokafka
    keeps that state on its transaction manager; every later call would fail the same way)."""
    manager = getattr(producer, "_txn_manager", None)
    return bool(manager is not None and manager.is_fatal_error())


def _fenced(producer: Any, exc: BaseException) -> bool:
    """Whether the producer was fenced by a newer epoch of its transactional id (not merely
    broken, e.g. by a cluster that went away: that is an ordinary, retriable ``LogError``)."""
    fenced_errors = (ProducerFenced, InvalidProducerEpoch)
    manager = getattr(producer, "_txn_manager", None)
    waiter = getattr(manager, "_transaction_waiter", None)
    stuck = waiter.exception() if waiter is not None and waiter.done() and not waiter.cancelled() else None
    chain: list[BaseException] = []
    for start in (exc, stuck):
        while start is not None and start not in chain:
            chain.append(start)
            start = start.__cause__ or start.__context__
    return any(isinstance(e, fenced_errors) for e in chain)


def _root(exc: BaseException) -> BaseException:
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return exc
