"""Kafka names: channels ↔ topic-partitions, and the topics of each scheduler partition (shard).

A *channel* of the log port is ``<topic>/<partition>`` (``evsched.inputs/0``). A *shard* is
one scheduler partition run as an independent event-sourced scheduler: its own input
topics, admin topic, decisions topic and dead-letter topic. The ``default`` partition's shard uses the
base names unchanged (``evsched.inputs``, ``evsched.decisions``, ``evsched.deadletter``), so
a log written before sharding is the default shard's log; any other partition ``P`` uses
the base names suffixed with ``.P`` (``evsched.inputs.gpu``). Partition names match
``[A-Za-z0-9_-]{1,64}`` (docs/events.md), so every derived name is a legal Kafka topic name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from aiokafka import TopicPartition

from events.log.names import (
    DEFAULT_ADMIN_TOPIC,
    DEFAULT_DEADLETTER_TOPIC,
    DEFAULT_DECISIONS_TOPIC,
    DEFAULT_INPUT_TOPIC,
    DEFAULT_SHARD,
)
from events.log.port import LogError

_SHARD_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


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


@dataclass(frozen=True, slots=True)
class ShardTopics:
    """The topics one shard (scheduler partition) reads and writes."""

    shard: str
    inputs: tuple[str, ...]
    decisions: str
    deadletter: str
    admin: str = DEFAULT_ADMIN_TOPIC


def shard_topics(
    shard: str,
    *,
    input_topics: Sequence[str] = (DEFAULT_INPUT_TOPIC,),
    decisions_topic: str = DEFAULT_DECISIONS_TOPIC,
    deadletter_topic: str = DEFAULT_DEADLETTER_TOPIC,
    admin_topic: str = DEFAULT_ADMIN_TOPIC,
) -> ShardTopics:
    """The topics of ``shard`` given the base names.

    >>> shard_topics("default").inputs, shard_topics("gpu").inputs
    (('evsched.inputs',), ('evsched.inputs.gpu',))
    >>> shard_topics("gpu", decisions_topic="prod.decisions").decisions
    'prod.decisions.gpu'
    """
    if not _SHARD_NAME.fullmatch(shard):
        raise ValueError(f"not a partition name (expected [A-Za-z0-9_-]{{1,64}}): {shard!r}")
    if not input_topics:
        raise ValueError("at least one input topic is required")

    def name(base: str) -> str:
        return base if shard == DEFAULT_SHARD else f"{base}.{shard}"

    return ShardTopics(shard, tuple(name(t) for t in input_topics), name(decisions_topic), name(deadletter_topic),
                       name(admin_topic))
