"""Recovery and replay trust the same snapshots: one judge, ``snapshot_files.vouched_digest``.

A snapshot is trusted when the last output record before its output offset is its cycle's
``cycle.completed``. On a transactional Kafka log a commit marker takes the offset just before
(no record there): recovery reads the two offsets before, replay asks ``output_at`` (which on
such a log answers with the first record at or after an offset). Both must find the digest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping

import orjson
import pytest

from events.log.port import LogRecord
from replay.snapshot_start import recorded_completion
from scheduler.storage.snapshot_files import vouched_digest


def _record(offset: int, kind: str, cycle: int = 3, digest: str = "sha256:ab") -> LogRecord:
    data = {"cycle": cycle, "state_digest": digest} if kind == "cycle.completed" else {"cycle": cycle}
    return LogRecord("outputs", offset, orjson.dumps({"type": kind, "data": data}), 0)


class GappedOutputs:
    """Output records at the given offsets; the others hold markers (no record), as on Kafka."""

    def __init__(self, records: list[LogRecord]) -> None:
        self.records = {r.offset: r for r in records}

    def output_at(self, offset: int) -> LogRecord | None:  # replay's view: first record at or after
        return next((self.records[o] for o in sorted(self.records) if o >= offset), None)

    async def read_outputs(self, start: int = 0, max_records: int | None = None) -> list[LogRecord]:
        span = range(start, start + (max_records or 1))  # recovery's view: the offsets asked for
        return [self.records[o] for o in span if o in self.records]

    def iter_inputs(self, start_positions: Mapping[str, int] | None = None) -> Iterator[LogRecord]:
        return iter(())

    def iter_outputs(self, start: int = 0) -> Iterator[LogRecord]:
        return (self.records[o] for o in sorted(self.records) if o >= start)


def _both(log: GappedOutputs, body: dict[str, object]) -> tuple[str | None, str | None]:
    """(what recovery finds, what replay finds) for ``body``."""
    offset = body["output_offset"]
    assert isinstance(offset, int)
    recovery = vouched_digest(body, asyncio.run(log.read_outputs(max(0, offset - 2), 2)))
    return recovery, recorded_completion(log, body)


@pytest.mark.parametrize("gap", [False, True], ids=["dense", "commit-marker"])
def test_recovery_and_replay_find_the_same_completion(gap: bool) -> None:
    records = [_record(8, "cycle.started"), _record(9, "allocation.decided"), _record(10, "cycle.completed"),
               _record(12 if gap else 11, "cycle.started", cycle=4)]
    end = 12 if gap else 11  # the snapshot's output offset: one past the cycle's last record (or marker)
    log = GappedOutputs(records)
    assert _both(log, {"output_offset": end, "cycle": 3}) == ("sha256:ab", "sha256:ab")
    assert _both(log, {"output_offset": end, "cycle": 2}) == (None, None)  # another cycle's completion
    assert _both(log, {"output_offset": 10, "cycle": 3}) == (None, None)  # ends before its completion


def test_no_completion_no_offset_no_trust() -> None:
    log = GappedOutputs([_record(0, "cycle.started"), _record(1, "allocation.decided")])
    assert _both(log, {"output_offset": 2, "cycle": 3}) == (None, None)
    assert vouched_digest({"output_offset": 0, "cycle": 3}, []) is None
    assert vouched_digest({"cycle": 3}, [_record(0, "cycle.completed")]) is None
