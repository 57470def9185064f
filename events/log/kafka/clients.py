"""Kafka client plumbing shared by the adapter: topic creation, probes, group members.

Connection and security options come from ``events.log.kafka_options.client_options``.

Credentials live only in the options dict and the clients built from it: never in logs,
exceptions or reprs.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError
from aiokafka.protocol.group import LeaveGroupRequest

from events.log.port import LogError

log = logging.getLogger("evsched.kafka")

_TOPIC_ALREADY_EXISTS = 36


async def ensure_topics(options: Mapping[str, Any], wanted: Mapping[str, int], replication: int) -> dict[str, int]:
    """Create the topics of ``wanted`` ({topic: partitions}) that do not exist yet, with a log
    line; return every wanted topic's partition count once metadata shows them all."""
    admin = AIOKafkaAdminClient(**options)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [NewTopic(t, n, replication) for t, n in wanted.items() if t not in existing]
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
        deadline = time.monotonic() + options.get("request_timeout_ms", 30_000) / 1000
        names = list(wanted)
        while True:
            described = await admin.describe_topics(names)
            counts = {d["topic"]: len(d["partitions"]) for d in described if d["error_code"] == 0}
            if all(counts.get(t, 0) > 0 for t in names):
                return counts
            if time.monotonic() > deadline:
                raise LogError(f"topics have no partitions in metadata: {described}")
            await asyncio.sleep(0.1)
    finally:
        await admin.close()


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
