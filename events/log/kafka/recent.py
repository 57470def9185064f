"""The last batch of input records handed out per partition, to answer a re-read without a fetch.

Recovery reads a batch, uses the first cycle's records and asks again from where that
cycle ended, cycle after cycle. Served by the consumer, every such read would be a seek
back and a fetch round trip (and Tansu holds every fetch for ``fetch_max_wait_ms``): a
takeover of a shard with a few hundred cycles took seconds. The live loop never reads a
position twice, so for it this is one dictionary lookup per partition.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence

from aiokafka import TopicPartition

from events.log.kafka.topics import channel_name
from events.log.port import LogRecord


def _offset(record: LogRecord) -> int:
    return record.offset


class RecentBatches:
    """Per partition: the records of the last batch handed out (offsets ascending)."""

    def __init__(self) -> None:
        self._batches: dict[TopicPartition, list[LogRecord]] = {}

    def remember(self, tp: TopicPartition, records: list[LogRecord]) -> None:
        """Keep ``records`` (non-empty, ascending) as the last batch of ``tp``."""
        self._batches[tp] = records

    def forget(self, tp: TopicPartition) -> None:
        self._batches.pop(tp, None)

    def again(
        self,
        partitions: Sequence[TopicPartition],
        positions: Mapping[str, int],
        delivered: Mapping[TopicPartition, int],
        max_records: int,
    ) -> list[LogRecord]:
        """Records from ``positions`` on that the last batches still hold (up to ``max_records``);
        empty when no partition's position falls inside its last batch."""
        out: list[LogRecord] = []
        for tp in partitions:
            records = self._batches.get(tp)
            wanted = positions.get(channel_name(tp), 0)
            if records is None or not records[0].offset <= wanted < delivered.get(tp, 0):
                continue
            start = bisect.bisect_left(records, wanted, key=_offset)
            out.extend(records[start : start + max_records - len(out)])
            if len(out) >= max_records:
                break
        return out
