"""The Kafka adapter of the EventLog port (aiokafka), with the shard group that splits partitions.

``log`` (``KafkaLog``: the port over input topics and a decisions topic), ``recent``
(re-reads without a fetch), ``outputs`` (batched appends, dead-letter headers, reading the
decisions topic and true end offsets), ``clients`` (connection options, topic creation, the
transactions probe), ``topics`` (channel and shard topic names), ``lease`` (active/standby)
and ``membership`` with ``assignment`` (the consumer group that splits scheduler partitions
— shards — between instances). This package is where the project imports aiokafka; the only
other place is the producer API's sender (``events.producer``), lazily, when it starts.
"""

from events.log.kafka.assignment import MemberShards, assign_shards
from events.log.kafka.lease import KafkaLease
from events.log.kafka.log import KafkaLog, OffsetCommitter, RevokeCallback
from events.log.kafka.membership import ShardMembership
from events.log.kafka.topics import (
    ShardTopics,
    channel_name,
    parse_channel,
    shard_topics,
)
from events.log.names import DEFAULT_SHARD

__all__ = [
    "DEFAULT_SHARD",
    "KafkaLease",
    "KafkaLog",
    "MemberShards",
    "OffsetCommitter",
    "RevokeCallback",
    "ShardMembership",
    "ShardTopics",
    "assign_shards",
    "channel_name",
    "parse_channel",
    "shard_topics",
]
