"""Active/standby election through a Kafka consumer group (``evsched run --standby``).

The member of ``<group>.active`` assigned partition 0 of the decisions topic is the active
instance. Kafka does the failure detection: the holder keeps the lease while its
heartbeats arrive; when it leaves (clean stop) or its session times out (crash), the group
rebalances and a waiting member gets it. The assignor is sticky — a member reports the
generation in which it got the lease and the newest claim wins — so a standby joining does
not move the lease, and a holder that was expelled (and replaced) and comes back loses it.
The lease consumer never fetches: the partition is paused.

No fencing: Tansu has no transactional producer, so an expelled holder that has not
noticed yet can append one more cycle before ``on_lost`` stops it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata
from aiokafka.errors import KafkaError

from events.log.kafka.clients import GroupListener, group_generation, poll_paused, stop_group_member
from events.log.names import DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_SESSION_TIMEOUT_MS
from events.log.port import LogError

log = logging.getLogger("evsched.kafka")


class KafkaLease:
    """The active lease of a group of instances (see the module docstring)."""

    def __init__(
        self, options: Mapping[str, Any], *, topic: str, group_id: str,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS,
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
            # Nothing to do on revoke (eager rebalance): the holder keeps its claim (term) for the rejoin.
            self._consumer.subscribe([self._tp.topic], listener=GroupListener(self._assigned))
        except KafkaError as exc:
            await self.close()
            raise LogError(f"cannot join the lease group {self._group_id!r}: {exc!r}") from exc
        self._poller = asyncio.create_task(poll_paused(self._consumer))

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
                self.term = group_generation(self._consumer)
                log.info("holding the active lease of %s (generation %s)", self._group_id, self.term)
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
        poller, self._poller = self._poller, None
        consumer, self._consumer = self._consumer, None
        await stop_group_member(poller, consumer, "lease group")


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
