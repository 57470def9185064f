"""Shard membership: this instance's seat in the consumer group that splits the shards.

Every instance started with ``--partition`` joins the group ``--group`` subscribed to the
input topics of the shards it may run. The group's leader runs ``ShardAssignor``, which
hands all partitions of every shard's input topics to exactly one member
(``events.log.kafka.assignment``). The membership consumer itself never fetches (its
partitions are paused): records are read by each shard's own ``KafkaLog``. It reports
changes through two callbacks:

* ``on_revoke(shards)`` — awaited inside the rebalance, before the shards may go to another
  member: the host finishes the cycle in hand and commits (eager protocol: every
  rebalance revokes everything first; the sticky assignor usually hands it straight back);
* ``on_assign(shards)`` — the shards this member runs from now on.

Offsets are committed through this consumer (``commit``), so they belong to the group and
are fenced by its generation: a member that has lost a shard cannot move its offsets.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata
from aiokafka.errors import KafkaError

from events.log.kafka.assignment import MemberShards, assign_shards
from events.log.kafka.clients import (
    GroupListener,
    diagnose,
    ensure_topics,
    group_generation,
    poll_paused,
    stop_group_member,
)
from events.log.names import DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_SESSION_TIMEOUT_MS
from events.log.port import LogError, LogRefused

log = logging.getLogger("evsched.kafka")

RevokeShards = Callable[[set[str]], Awaitable[None]]
AssignShards = Callable[[set[str]], None]


class ShardMembership:
    """Joins the shard group and tells the host which shards it runs (module docstring)."""

    def __init__(
        self,
        options: Mapping[str, Any],
        *,
        group_id: str,
        shards: Mapping[str, Sequence[str]],
        partitions: int = 1,
        replication_factor: int | None = None,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS,
    ) -> None:
        if not shards:
            raise ValueError("a shard member needs at least one shard it may run")
        self._options = dict(options)
        self._group_id = group_id
        self._topics = {shard: tuple(topics) for shard, topics in shards.items()}
        self._shard_of = {topic: shard for shard, topics in self._topics.items() for topic in topics}
        self._partitions, self._replication = partitions, replication_factor
        self._session_timeout_ms, self._heartbeat_interval_ms = session_timeout_ms, heartbeat_interval_ms
        self._consumer: Any = None
        self._poller: asyncio.Task[None] | None = None
        self.held: dict[str, int] = {}  # shard → generation it was got in (kept across revokes)
        self.assigned: frozenset[str] = frozenset()
        self.on_revoke: RevokeShards | None = None
        self.on_assign: AssignShards | None = None

    def __repr__(self) -> str:
        return f"ShardMembership(group={self._group_id!r}, shards={sorted(self._topics)!r})"

    def claims(self) -> MemberShards:
        """What this member tells the group leader."""
        return MemberShards(self._topics, {s: g for s, g in self.held.items() if s in self._topics})

    async def start(self) -> None:
        """Create missing input topics, join the group (assignments arrive via callbacks)."""
        wanted = dict.fromkeys(self._shard_of, self._partitions)
        self._consumer = AIOKafkaConsumer(
            group_id=self._group_id, enable_auto_commit=False, auto_offset_reset="earliest",
            session_timeout_ms=self._session_timeout_ms, heartbeat_interval_ms=self._heartbeat_interval_ms,
            partition_assignment_strategy=(_shard_assignor(self),), **self._options,
        )
        try:
            await ensure_topics(self._options, wanted, self._replication, durable=list(wanted))
            await self._consumer.start()
            self._consumer.subscribe(sorted(self._shard_of), listener=GroupListener(self._assigned, self._revoked))
        except (KafkaError, OSError) as exc:
            await self.close()
            why = await diagnose(self._options)
            if isinstance(why, LogRefused):
                raise why from exc
            raise LogError(f"cannot join the shard group {self._group_id!r}: {why or repr(exc)}") from exc
        log.info("joined shard group %s, may run %s", self._group_id, ", ".join(sorted(self._topics)))
        self._poller = asyncio.create_task(poll_paused(self._consumer))

    async def _revoked(self, revoked: list[TopicPartition]) -> None:
        shards = {self._shard_of[tp.topic] for tp in revoked if tp.topic in self._shard_of}
        self.assigned = frozenset()
        if shards and self.on_revoke is not None:
            await self.on_revoke(shards)

    def _assigned(self, assigned: list[TopicPartition]) -> None:
        if self._consumer is None:
            return  # closing: the group is being left
        self._consumer.pause(*assigned)
        shards = {self._shard_of[tp.topic] for tp in assigned if tp.topic in self._shard_of}
        generation = group_generation(self._consumer)
        self.held = {s: self.held.get(s, generation if generation is not None else 0) for s in shards}
        self.assigned = frozenset(shards)
        log.info("shard group %s (generation %s): this instance runs %s", self._group_id, generation,
                 ", ".join(sorted(shards)) or "no shard")
        if self.on_assign is not None:
            self.on_assign(set(shards))

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        """Commit a shard's input offsets as this group member. A refusal (the shard moved on
        in a rebalance) is logged, not raised: recovery reads positions from the decisions
        topic, committed offsets are for lag monitoring."""
        consumer = self._consumer
        if consumer is None:
            return
        try:
            await consumer.commit(offsets)
        except KafkaError as exc:
            log.warning("offsets not committed (the group is rebalancing or moved on): %r", exc)

    async def close(self) -> None:
        """Leave the group (the others take over at once); idempotent."""
        poller, self._poller = self._poller, None
        consumer, self._consumer = self._consumer, None
        await stop_group_member(poller, consumer, "shard group")


def _shard_assignor(membership: ShardMembership) -> type[AbstractPartitionAssignor]:
    """The group protocol ``evsched-shards``: whole shards, via ``assign_shards``.

    aiokafka calls assignors as classes, so each membership gets its own class bound to it.
    """

    class ShardAssignor(AbstractPartitionAssignor):  # type: ignore[misc]
        name = "evsched-shards"
        version = 0

        @classmethod
        def metadata(cls, topics: Any) -> ConsumerProtocolMemberMetadata:
            return ConsumerProtocolMemberMetadata(cls.version, sorted(topics), membership.claims().encode())

        @classmethod
        def assign(cls, cluster: Any, members: Mapping[str, Any]) -> dict[str, ConsumerProtocolMemberAssignment]:
            specs = {m: MemberShards.decode(meta.user_data) for m, meta in members.items()}
            chosen = assign_shards(specs)
            out = {}
            for member, shards in chosen.items():
                partitions = []
                for shard in shards:
                    for topic in specs[member].topics[shard]:
                        numbers = cluster.partitions_for_topic(topic) or set()
                        partitions.append((topic, sorted(numbers)))
                out[member] = ConsumerProtocolMemberAssignment(cls.version, sorted(partitions), b"")
            return out

        @classmethod
        def on_assignment(cls, assignment: Any) -> None:
            pass

    return ShardAssignor
