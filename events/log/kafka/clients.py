"""Kafka client plumbing shared by the adapter: topic creation, probes, group members.

Connection and security options come from ``events.log.kafka_options.client_options``.

Credentials live only in the options dict and the clients built from it: never in logs,
exceptions or reprs.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError
from aiokafka.protocol.group import LeaveGroupRequest

from events.log.names import DEFAULT_REQUEST_TIMEOUT_MS
from events.log.port import LogError, LogRefused

log = logging.getLogger("evsched.kafka")

_TOPIC_ALREADY_EXISTS = 36


def topic_configs(replication: int, durable: bool) -> dict[str, str]:
    """Configs of a topic the adapter creates: ``min.insync.replicas`` one less than the
    replication factor (at least 1), so an acknowledged write survives losing one broker; a
    durable topic (inputs, decisions: the state is folded from them) is never deleted by age."""
    configs = {"min.insync.replicas": str(max(1, replication - 1))}
    if durable:
        configs["retention.ms"] = "-1"
    return configs


async def ensure_topics(
    options: Mapping[str, Any], wanted: Mapping[str, int], replication: int | None,
    durable: Collection[str] = (),
) -> dict[str, int]:
    """Create the topics of ``wanted`` ({topic: partitions}) that do not exist yet, with a log
    line; return every wanted topic's partition count once metadata shows them all.

    ``replication`` None: min(3, brokers in the cluster). Topics in ``durable`` keep their
    records forever (``topic_configs``)."""
    admin = AIOKafkaAdminClient(**options)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        absent = [t for t in wanted if t not in existing]
        if absent and replication is None:
            brokers = len((await admin.describe_cluster()).get("brokers", ())) or 1
            replication = min(3, brokers)
        factor = replication or 1
        missing = [NewTopic(t, wanted[t], factor, topic_configs=topic_configs(factor, t in durable)) for t in absent]
        if missing:
            log.info(
                "creating missing Kafka topics: %s",
                ", ".join(f"{t.name} ({t.num_partitions} partitions, replication {factor}"
                          f"{', kept forever' if t.name in durable else ''})" for t in missing),
            )
            response = await admin.create_topics(missing)
            for topic, code, *message in response.topic_errors:
                if code not in (0, _TOPIC_ALREADY_EXISTS):
                    raise LogError(f"cannot create topic {topic!r}: error {code} {message}")
        # A new topic's partitions show up in metadata after a moment on real clusters, and their
        # leaders after another: a producer sending before that is refused (aiokafka warns, retries).
        deadline = time.monotonic() + options.get("request_timeout_ms", DEFAULT_REQUEST_TIMEOUT_MS) / 1000
        names = list(wanted)
        while True:
            described = await admin.describe_topics(names)
            counts = {d["topic"]: len(d["partitions"]) for d in described
                      if d["error_code"] == 0 and all(p.get("leader", 0) >= 0 for p in d["partitions"])}
            if all(counts.get(t, 0) > 0 for t in names):
                return counts
            if time.monotonic() > deadline:
                raise LogError(f"topics have no partitions in metadata: {described}")
            await asyncio.sleep(0.1)
    finally:
        await admin.close()


async def diagnose(options: Mapping[str, Any]) -> LogError | None:
    """Why a Kafka client with ``options`` cannot connect, from direct connections to the bootstrap
    servers in turn (None as soon as one works: a cluster with one broker down is reachable, and the
    client's own error is the one to report): ``LogRefused`` for an untrusted certificate or refused
    credentials (retrying cannot help), else a plain ``LogError`` naming the first server's failure.
    Never holds a password."""
    servers = options.get("bootstrap_servers", "")
    listed = servers.split(",") if isinstance(servers, str) else list(servers)
    first_failure: LogError | None = None
    for server in [s.strip() for s in listed if s.strip()] or [""]:
        why = await _diagnose_one(server, options)
        if why is None or isinstance(why, LogRefused):
            return why
        first_failure = first_failure or why
    return first_failure


async def _diagnose_one(server: str, options: Mapping[str, Any]) -> LogError | None:
    from aiokafka.conn import create_conn

    host, _, port = server.rpartition(":")
    keys = ("security_protocol", "ssl_context", "sasl_mechanism", "sasl_plain_username", "sasl_plain_password")
    try:
        conn = await create_conn(host or server, int(port or 9092), request_timeout_ms=10_000,
                                 **{k: options[k] for k in keys if k in options})
    except ssl.SSLCertVerificationError as exc:
        return LogRefused(f"the TLS certificate of {server} is not trusted ({exc.verify_message}); "
                          "pass its CA with --ssl-cafile")
    except ssl.SSLError as exc:
        return LogRefused(f"TLS handshake with {server} failed: {exc.reason or exc}")
    except Exception as exc:  # aiokafka's SASL and connection errors share no base but Exception
        text = str(exc)
        password = options.get("sasl_plain_password")
        if password:
            text = text.replace(str(password), "***")
        if "uthenticat" in text or "SASL" in text.upper():
            return LogRefused(f"SASL authentication as {options.get('sasl_plain_username')!r} with "
                              f"{options.get('sasl_mechanism')} was refused by {server}: {text}")
        return LogError(f"cannot connect to {server}: {type(exc).__name__}: {text}")
    conn.close()
    return None


async def probe_transactions(options: Mapping[str, Any], client_id: str, timeout_s: float = 10.0) -> tuple[bool, str]:
    """Can this broker run a transactional producer? ``(supported, reason)``.

    Tansu rejects aiokafka's InitProducerId (v0), so outputs and offsets are then
    committed separately (the design does not depend on transactions).
    """
    producer = AIOKafkaProducer(transactional_id=f"{client_id}-probe-{uuid.uuid4().hex[:8]}", **options)
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


async def leave_group_at_generation_zero(consumer: Any) -> None:
    """Send LeaveGroup where aiokafka would not: it skips it in generation 0, which is
    Tansu's first generation (Kafka's is 1), and the others would then wait a whole
    session timeout to take over. Private aiokafka API, so any surprise just skips it."""
    try:
        coordinator = consumer._coordinator
        member, generation = coordinator.member_id, coordinator.generation
        if generation != 0 or not member:  # "" until the member has joined
            return
        await coordinator.close()  # stops heartbeats and rejoins first; consumer.stop() then skips it
        await coordinator._send_req(LeaveGroupRequest(coordinator.group_id, member))
        log.info("left the consumer group %s", coordinator.group_id)
    except (AttributeError, TypeError, KafkaError) as exc:
        log.debug("could not leave the consumer group early: %r", exc)


class GroupListener(ConsumerRebalanceListener):  # type: ignore[misc]  # aiokafka is untyped
    """Forwards a consumer group's rebalances to callbacks (aiokafka awaits these coroutines)."""

    def __init__(
        self,
        assigned: Callable[[list[TopicPartition]], None],
        revoked: Callable[[list[TopicPartition]], Awaitable[None]] | None = None,
    ) -> None:
        self._assigned, self._revoked = assigned, revoked

    async def on_partitions_revoked(self, revoked: Any) -> None:
        if self._revoked is not None:
            await self._revoked(list(revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self._assigned(list(assigned))


async def poll_paused(consumer: Any) -> None:
    """Poll a group member whose partitions are paused, until cancelled.

    Rebalances run inside the consumer; a member that stops polling is expelled after
    max_poll_interval_ms, so it polls (paused: nothing is fetched) all the time.
    """
    while True:
        await consumer.getmany(timeout_ms=1000)


async def stop_group_member(poller: asyncio.Task[Any] | None, consumer: Any, group: str) -> None:
    """Stop a group member: cancel its poller, leave the group at once, stop the consumer."""
    if poller is not None:
        poller.cancel()
        await asyncio.gather(poller, return_exceptions=True)
    if consumer is None:
        return
    try:
        await leave_group_at_generation_zero(consumer)
        await consumer.stop()
    except KafkaError as exc:
        log.warning("error leaving the %s: %r", group, exc)


def group_generation(consumer: Any) -> int | None:
    """The consumer's current group generation (not public API; Kafka's own sticky assignor
    uses it the same way), or None when it cannot be read."""
    try:
        return int(consumer._coordinator.generation)
    except (AttributeError, TypeError, ValueError):
        return None
