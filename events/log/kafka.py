"""The Kafka adapter of the EventLog port (aiokafka): input topic-partitions in, decisions out.

Channels are ``<topic>/<partition>`` (``evsched.inputs/0``) and positions are Kafka
offsets. Outputs go to partition 0 of the decisions topic, so their order is total.
Input offsets are committed explicitly (``commit``), only after the outputs of the cycle
that consumed them are acknowledged; auto-commit is off. This is the only module of the
project that imports aiokafka.

Partitions are either all assigned manually (the default: one instance owns every input
partition) or handed out by the consumer group (``group_subscribe=True``); in that mode
the service registers ``set_revoke_callback`` to drain and commit before a partition goes.
``KafkaLease`` (``evsched run --standby``) elects the one active instance of a group.

Brokers differ: Tansu (the test broker) answers ListOffsets(latest) with the base offset
of the last batch + 1 rather than the high watermark, so end offsets are confirmed with
a fetch, whose high watermark every broker reports correctly. See ``_end_offsets``.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata
from aiokafka.errors import KafkaError, MessageSizeTooLargeError, RecordListTooLargeError
from aiokafka.protocol.group import LeaveGroupRequest

from events.log.clock import wall_clock_us
from events.log.port import LogError, LogRecord

log = logging.getLogger("evsched.kafka")

RevokeCallback = Callable[[list[str]], Awaitable[None]]

_TOPIC_ALREADY_EXISTS = 36
_SEEK_ANSWER_S = 5.0  # read_inputs: how long an empty read after a seek waits for the fetch
_MAX_ERROR_HEADER = 8192  # a dead-letter reason is for people; keep headers bounded


def channel_name(tp: TopicPartition) -> str:
    """``TopicPartition("evsched.inputs", 0)`` → ``"evsched.inputs/0"``."""
    return f"{tp.topic}/{tp.partition}"


def parse_channel(channel: str) -> TopicPartition:
    """``"evsched.inputs/0"`` → ``TopicPartition("evsched.inputs", 0)``.

    Kafka topic names cannot contain ``/``, so the last one separates the partition.
    """
    topic, sep, partition = channel.rpartition("/")
    if not sep or not topic or not partition.isdigit():
        raise LogError(f"not a Kafka channel (expected '<topic>/<partition>'): {channel!r}")
    return TopicPartition(topic, int(partition))


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]  # aiokafka is untyped
    """Forwards consumer-group rebalances to the log (aiokafka awaits these coroutines)."""

    def __init__(self, owner: KafkaLog) -> None:
        self._owner = owner

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self._owner._on_revoked(list(revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self._owner._on_assigned(list(assigned))


class KafkaLog:
    """EventLog over Kafka. ``await start()`` before use, ``await close()`` after."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        input_topics: Sequence[str] = ("evsched.inputs",),
        decisions_topic: str = "evsched.decisions",
        deadletter_topic: str = "evsched.deadletter",
        group_id: str = "evsched",
        client_id: str = "evsched",
        partitions: int = 1,
        replication_factor: int = 1,
        group_subscribe: bool = False,
        security_protocol: str = "PLAINTEXT",
        sasl_mechanism: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        poll_timeout_ms: int = 100,
        request_timeout_ms: int = 30_000,
        session_timeout_ms: int = 10_000,
        heartbeat_interval_ms: int = 3_000,
        assignment_timeout_s: float = 60.0,
        now_us: Callable[[], int] | None = None,
    ) -> None:
        if not input_topics:
            raise ValueError("at least one input topic is required")
        servers = bootstrap_servers
        self._bootstrap = servers if isinstance(servers, str) else list(servers)
        # Credentials live only in these options and the clients built from them: never
        # in logs, exceptions or __repr__.
        security = {
            "security_protocol": security_protocol,
            "sasl_mechanism": sasl_mechanism,
            "sasl_plain_username": sasl_plain_username,
            "sasl_plain_password": sasl_plain_password,
            "ssl_context": ssl_context,
        }
        self._options: dict[str, Any] = {
            "bootstrap_servers": self._bootstrap,
            "client_id": client_id,
            "request_timeout_ms": request_timeout_ms,
            **{k: v for k, v in security.items() if v is not None},
        }
        self._input_topics = list(input_topics)
        self._decisions, self._deadletter = decisions_topic, deadletter_topic
        self._group_id, self._client_id = group_id, client_id
        self._partitions, self._replication = partitions, replication_factor
        self._group_subscribe = group_subscribe
        self._poll_timeout_ms, self._request_timeout_ms = poll_timeout_ms, request_timeout_ms
        self._session_timeout_ms = session_timeout_ms
        self._heartbeat_interval_ms = heartbeat_interval_ms
        self._assignment_timeout_s = assignment_timeout_s
        self._now_us = now_us or wall_clock_us
        self._producer: Any = None
        self._consumer: Any = None
        self._reader: Any = None  # outputs and end offsets; never touches group offsets
        self._reader_lock = asyncio.Lock()
        self._manual: list[TopicPartition] = []
        self._delivered: dict[TopicPartition, int] = {}  # next offset the consumer will give
        self._assigned = asyncio.Event()
        self._revoke_cb: RevokeCallback | None = None
        self._decisions_tp = TopicPartition(decisions_topic, 0)

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
            partition_counts = await self._ensure_topics()
            options = self._options
            # linger 0: records queued in one call still share a batch (the sender task
            # only runs once we await), and a lone record is not held back.
            self._producer = AIOKafkaProducer(acks="all", linger_ms=0, **options)
            await self._producer.start()
            self._consumer = AIOKafkaConsumer(
                group_id=self._group_id,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                # A seek waits for the in-flight fetch; keep its long poll as short as ours.
                fetch_max_wait_ms=self._poll_timeout_ms,
                session_timeout_ms=self._session_timeout_ms,
                heartbeat_interval_ms=self._heartbeat_interval_ms,
                **options,
            )
            await self._consumer.start()
            # The reader has no group: reading outputs must never move committed offsets.
            self._reader = AIOKafkaConsumer(
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                fetch_max_wait_ms=10,
                **options,
            )
            await self._reader.start()
            if self._group_subscribe:
                self._consumer.subscribe(self._input_topics, listener=_Rebalance(self))
                await asyncio.wait_for(self._assigned.wait(), self._assignment_timeout_s)
            else:
                self._manual = [
                    TopicPartition(topic, p)
                    for topic in self._input_topics
                    for p in range(partition_counts[topic])
                ]
                self._consumer.assign(self._manual)
        except (KafkaError, LogError, OSError, TimeoutError) as exc:
            await self.close()
            raise LogError(f"cannot start Kafka log on {self._bootstrap}: {exc!r}") from exc

    async def _ensure_topics(self) -> dict[str, int]:
        """Create the topics that do not exist yet; return each input topic's partition count."""
        admin = AIOKafkaAdminClient(**self._options)
        await admin.start()
        try:
            existing = set(await admin.list_topics())
            wanted = {t: self._partitions for t in self._input_topics}
            wanted[self._decisions] = 1  # one partition: outputs are totally ordered
            wanted[self._deadletter] = 1
            missing = [
                NewTopic(t, n, self._replication) for t, n in wanted.items() if t not in existing
            ]
            if missing:
                log.info(
                    "creating missing Kafka topics: %s",
                    ", ".join(f"{t.name} ({t.num_partitions} partitions)" for t in missing),
                )
                response = await admin.create_topics(missing)
                for topic, code, *message in response.topic_errors:
                    if code not in (0, _TOPIC_ALREADY_EXISTS):
                        raise LogError(f"cannot create topic {topic!r}: error {code} {message}")
            # A new topic's partitions show up in metadata after a moment on real clusters.
            deadline = time.monotonic() + self._request_timeout_ms / 1000
            while True:
                described = await admin.describe_topics(self._input_topics)
                counts = {
                    d["topic"]: len(d["partitions"]) for d in described if d["error_code"] == 0
                }
                if all(counts.get(t, 0) > 0 for t in self._input_topics):
                    return counts
                if time.monotonic() > deadline:
                    raise LogError(f"input topics have no partitions in metadata: {described}")
                await asyncio.sleep(0.1)
        finally:
            await admin.close()

    async def close(self) -> None:
        """Stop every client (idempotent)."""
        for name in ("_consumer", "_reader", "_producer"):
            client = getattr(self, name)
            setattr(self, name, None)
            if client is not None:
                try:
                    await client.stop()
                except KafkaError as exc:  # closing is best effort; the process may be exiting
                    log.warning("error stopping Kafka %s: %r", name.strip("_"), exc)

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

    def _on_assigned(self, assigned: list[TopicPartition]) -> None:
        log.info("partitions assigned: %s", sorted(channel_name(tp) for tp in assigned))
        for tp in assigned:
            self._delivered.pop(tp, None)  # position unknown: the next read seeks
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
                await producer.send(
                    topic, v, k, partition=partition, timestamp_ms=stamp_ms, headers=headers
                )
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
                batches = await consumer.getmany(
                    *assigned, timeout_ms=self._poll_timeout_ms, max_records=max_records
                )
                if any(batches.values()) or not sought or time.monotonic() > deadline:
                    break
                # After a seek the fetch for the new position is often not back within one
                # poll; "nothing there" holds only once a fetch's high watermark says so
                # (recovery and --once must not mistake a slow answer for the log's end).
                ends = [(consumer.highwater(tp), self._delivered[tp]) for tp in sought]
                if all(end is not None and end <= wanted for end, wanted in ends):
                    break
        except KafkaError as exc:
            raise LogError(f"reading input records failed: {exc!r}") from exc
        out: list[LogRecord] = []
        for tp in assigned:
            for rec in batches.get(tp, ()):
                out.append(self._to_record(tp, rec))
                self._delivered[tp] = rec.offset + 1
        return out

    def _to_record(self, tp: TopicPartition, rec: Any) -> LogRecord:
        stamp = rec.timestamp
        return LogRecord(
            channel=channel_name(tp),
            offset=rec.offset,
            value=rec.value if rec.value is not None else b"",
            append_time_us=stamp * 1000 if stamp is not None and stamp >= 0 else self._now_us(),
            key=rec.key,
        )

    async def input_end(self) -> dict[str, int]:
        ends = await self._end_offsets(self._assignment())
        return {channel_name(tp): end for tp, end in ends.items()}

    async def commit(self, positions: Mapping[str, int]) -> None:
        """Commit group offsets ``{channel: next offset}``; call once outputs are acknowledged."""
        consumer = self._require(self._consumer)
        assigned = set(self._assignment())
        offsets = {}
        for channel, offset in positions.items():
            tp = parse_channel(channel)
            if tp.topic not in self._input_topics:
                raise LogError(f"{channel!r} is not a channel of the input topics")
            if tp in assigned:  # a revoked partition's offsets are its new owner's business
                offsets[tp] = offset
        if not offsets:
            return
        try:
            await consumer.commit(offsets)
        except KafkaError as exc:
            raise LogError(f"committing offsets {positions!r} failed: {exc!r}") from exc

    async def committed(self) -> dict[str, int]:
        """The group's committed offsets of the assigned partitions (absent: none committed)."""
        consumer = self._require(self._consumer)
        found = {channel_name(tp): await consumer.committed(tp) for tp in self._assignment()}
        return {channel: offset for channel, offset in found.items() if offset is not None}

    async def dead_letter(self, record: LogRecord, error: str) -> None:
        """Park an unprocessable record's raw bytes on the dead-letter topic, with its origin."""
        topic, _, partition = record.channel.rpartition("/")
        headers = [
            ("evsched.source.topic", (topic or record.channel).encode()),
            ("evsched.source.partition", partition.encode()),
            ("evsched.source.offset", str(record.offset).encode()),
            ("evsched.error", error.encode("utf-8", "replace")[:_MAX_ERROR_HEADER]),
        ]
        what = f"dead-lettering {record.position}"
        try:
            await self._send_all(what, self._deadletter, [(record.key, record.value)], None, headers)
        except LogError as exc:
            if not isinstance(exc.__cause__, (MessageSizeTooLargeError, RecordListTooLargeError)):
                raise
            # Too large for the producer or the broker: this would fail on every attempt, so
            # park the origin without the bytes (they stay readable at their input offset).
            dropped = f"value of {len(record.value)} bytes not copied: {exc.__cause__}"
            headers.append(("evsched.value-dropped", dropped.encode()[:_MAX_ERROR_HEADER]))
            await self._send_all(what, self._deadletter, [(record.key, b"")], None, headers)

    # ------------------------------------------------------------------ outputs

    async def append_outputs(self, values: Sequence[bytes]) -> None:
        records = [(None, value) for value in values]
        await self._send_all("appending outputs", self._decisions, records, partition=0)

    async def read_outputs(self, start: int = 0, max_records: int | None = None) -> list[LogRecord]:
        """Records of decisions/0 from ``start`` up to the end as of this call, then stop."""
        if start < 0:
            raise LogError(f"negative offset {start}")
        tp = self._decisions_tp
        end = (await self._end_offsets([tp]))[tp]
        stop = end if max_records is None else min(end, start + max_records)
        if start >= stop:
            return []
        async with self._reader_lock:
            reader = self._require(self._reader)
            reader.assign([tp])
            reader.seek(tp, start)
            out: list[LogRecord] = []
            deadline = time.monotonic() + self._request_timeout_ms / 1000
            try:
                # Stop on the consumer's position, not on the last record's offset: a gap
                # (compaction, transaction markers) must not make us wait for more.
                while await reader.position(tp) < stop:
                    if time.monotonic() > deadline:
                        raise LogError(f"reading outputs {start}..{stop} timed out at {len(out)}")
                    batch = await reader.getmany(tp, timeout_ms=100, max_records=stop - start)
                    out.extend(self._to_record(tp, r) for r in batch.get(tp, ()) if r.offset < stop)
            except KafkaError as exc:
                raise LogError(f"reading output records failed: {exc!r}") from exc
            return out

    async def output_end(self) -> int:
        tp = self._decisions_tp
        return (await self._end_offsets([tp]))[tp]

    async def _end_offsets(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermark of each partition, correct on Tansu as well as on Kafka.

        ListOffsets(latest) is asked first; where it says the partition is not empty, a
        fetch from the offset before it returns the true high watermark (Tansu's
        ListOffsets stops at the last batch's base offset + 1). Re-assigning clears the
        reader's previous high watermarks, so a ``None`` means "no answer yet".
        """
        if not tps:
            return {}
        async with self._reader_lock:
            reader = self._require(self._reader)
            try:
                listed: dict[TopicPartition, int] = await reader.end_offsets(list(tps))
                busy = [tp for tp in tps if listed[tp] > 0]
                if not busy:
                    return dict(listed)
                reader.assign(busy)
                for tp in busy:
                    reader.seek(tp, listed[tp] - 1)
                deadline = time.monotonic() + self._request_timeout_ms / 1000
                while any(reader.highwater(tp) is None for tp in busy):
                    if time.monotonic() > deadline:
                        raise LogError(f"no high watermark from the broker for {busy}")
                    await reader.getmany(*busy, timeout_ms=20, max_records=1)
                ends = dict(listed)
                for tp in busy:
                    ends[tp] = max(listed[tp], reader.highwater(tp))
                return ends
            except KafkaError as exc:
                raise LogError(f"reading end offsets failed: {exc!r}") from exc

    # ------------------------------------------------------------------ active/standby

    def lease(self) -> KafkaLease:
        """The active lease of this log's instances (``KafkaLease``), built from its options."""
        return KafkaLease(
            self._options, topic=self._decisions, group_id=f"{self._group_id}.active",
            session_timeout_ms=self._session_timeout_ms, heartbeat_interval_ms=self._heartbeat_interval_ms,
        )

    # ------------------------------------------------------------------ capabilities

    async def probe_transactions(self, timeout_s: float = 10.0) -> tuple[bool, str]:
        """Can this broker run a transactional producer? ``(supported, reason)``.

        Tansu rejects aiokafka's InitProducerId (v0), so outputs and offsets are then
        committed separately (the design does not depend on transactions).
        """
        producer = AIOKafkaProducer(
            transactional_id=f"{self._client_id}-probe-{uuid.uuid4().hex[:8]}",
            **self._options,
        )
        try:
            await asyncio.wait_for(producer.start(), timeout_s)
        except TimeoutError:
            return False, f"InitProducerId (v0) got no answer within {timeout_s:.0f}s"
        except KafkaError as exc:
            detail = getattr(exc, "description", "") or str(exc)
            return False, f"broker rejected InitProducerId (v0): {type(exc).__name__}: {detail}"
        finally:
            await producer.stop()
        return True, "transactional producer started (InitProducerId accepted)"


class KafkaLease:
    """Active/standby election through a Kafka consumer group: the member of
    ``<group>.active`` assigned partition 0 of the decisions topic is the active instance.

    Kafka does the failure detection: the holder keeps the lease while its heartbeats
    arrive; when it leaves (clean stop) or its session times out (crash), the group
    rebalances and a waiting member gets it. The assignor is sticky — a member reports
    the generation in which it got the lease and the newest claim wins — so a standby
    joining does not move the lease, and a holder that was expelled (and replaced) and
    comes back loses it. The lease consumer never fetches: the partition is paused.

    No fencing: Tansu has no transactional producer, so an expelled holder that has not
    noticed yet can append one more cycle before ``on_lost`` stops it.
    """

    def __init__(
        self, options: Mapping[str, Any], *, topic: str, group_id: str,
        session_timeout_ms: int = 10_000, heartbeat_interval_ms: int = 3_000,
    ) -> None:
        self._options = dict(options)
        self._tp = TopicPartition(topic, 0)
        self._group_id = group_id
        self._session_timeout_ms, self._heartbeat_interval_ms = session_timeout_ms, heartbeat_interval_ms
        self._consumer: Any = None
        self._poller: asyncio.Task[None] | None = None
        self.term: int | None = None  # group generation in which this member got the lease
        self.held = asyncio.Event()
        self.on_lost: Callable[[], None] | None = None

    async def start(self) -> None:
        """Join the group (the lease may come at once, later, or never)."""
        self._consumer = AIOKafkaConsumer(
            group_id=self._group_id, enable_auto_commit=False, session_timeout_ms=self._session_timeout_ms,
            heartbeat_interval_ms=self._heartbeat_interval_ms,
            partition_assignment_strategy=(_sticky_assignor(self),), **self._options,
        )
        try:
            await self._consumer.start()
            self._consumer.subscribe([self._tp.topic], listener=_LeaseListener(self))
        except KafkaError as exc:
            await self.close()
            raise LogError(f"cannot join the lease group {self._group_id!r}: {exc!r}") from exc
        self._poller = asyncio.create_task(self._poll())

    async def _poll(self) -> None:
        # Rebalances run inside the consumer; a member that stops polling is expelled
        # after max_poll_interval_ms, so poll (paused: nothing is fetched) all the time.
        while True:
            await self._consumer.getmany(timeout_ms=1000)

    async def wait(self, stop: asyncio.Event) -> bool:
        """Wait until this member holds the lease (True) or ``stop`` is set (False)."""
        held, stopped = asyncio.create_task(self.held.wait()), asyncio.create_task(stop.wait())
        await asyncio.wait({held, stopped}, return_when=asyncio.FIRST_COMPLETED)
        held.cancel()
        stopped.cancel()
        return self.held.is_set()

    def _assigned(self, assigned: list[TopicPartition]) -> None:
        if self._consumer is None:
            return  # closing: the group is being left
        if self._tp in assigned:
            self._consumer.pause(self._tp)
            if self.term is None:
                # The generation is not public API; it is what Kafka's own sticky assignor uses.
                self.term = int(self._consumer._coordinator.generation)
                log.info("holding the active lease of %s (generation %d)", self._group_id, self.term)
            self.held.set()
            return
        was_held, self.term = self.held.is_set(), None
        self.held.clear()
        if was_held:
            log.error("lost the active lease of %s to another instance", self._group_id)
            if self.on_lost is not None:
                self.on_lost()

    async def close(self) -> None:
        """Leave the group (a standby takes over at once); idempotent."""
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
            self._poller = None
        consumer, self._consumer = self._consumer, None
        if consumer is None:
            return
        try:
            await _leave_group_at_generation_zero(consumer)
            await consumer.stop()
        except KafkaError as exc:
            log.warning("error leaving the lease group: %r", exc)


async def _leave_group_at_generation_zero(consumer: Any) -> None:
    """Send LeaveGroup where aiokafka would not: it skips it in generation 0, which is
    Tansu's first generation (Kafka's is 1), and the standby would then wait a whole
    session timeout to take over. Private aiokafka API, so any surprise just skips it."""
    try:
        coordinator = consumer._coordinator
        member, generation = coordinator.member_id, coordinator.generation
        if generation != 0 or not member:  # "" until the member has joined
            return
        await coordinator.close()  # stops heartbeats and rejoins first; consumer.stop() then skips it
        await coordinator._send_req(LeaveGroupRequest(coordinator.group_id, member))
        log.info("left the lease group %s", coordinator.group_id)
    except (AttributeError, TypeError, KafkaError) as exc:
        log.debug("could not leave the lease group early: %r", exc)


class _LeaseListener(ConsumerRebalanceListener):  # type: ignore[misc]  # aiokafka is untyped
    def __init__(self, lease: KafkaLease) -> None:
        self._lease = lease

    async def on_partitions_revoked(self, revoked: Any) -> None:
        pass  # eager rebalance: the holder keeps its claim (term) for the rejoin

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self._lease._assigned(list(assigned))


def _sticky_assignor(lease: KafkaLease) -> type[AbstractPartitionAssignor]:
    """An assignor that gives the lease partition to the newest claim, else the first member.

    aiokafka calls assignors as classes, so each lease gets its own class bound to it.
    """

    class StickyLease(AbstractPartitionAssignor):  # type: ignore[misc]
        name = "evsched-lease"
        version = 0

        @classmethod
        def metadata(cls, topics: Any) -> ConsumerProtocolMemberMetadata:
            claim = b"" if lease.term is None else str(lease.term).encode()
            return ConsumerProtocolMemberMetadata(cls.version, list(topics), claim)

        @classmethod
        def assign(cls, cluster: Any, members: Mapping[str, Any]) -> dict[str, ConsumerProtocolMemberAssignment]:
            claims = {m: int(meta.user_data) for m, meta in members.items() if meta.user_data}
            holder = max(claims, key=lambda m: (claims[m], m)) if claims else min(members)
            topic = lease._tp.topic
            return {
                m: ConsumerProtocolMemberAssignment(cls.version, [(topic, [0])] if m == holder else [], b"")
                for m in members
            }

        @classmethod
        def on_assignment(cls, assignment: Any) -> None:
            pass

    return StickyLease
