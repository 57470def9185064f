"""Replay over Kafka: a synchronous ``LogSource`` that reads through ``KafkaLog``'s async API.

The replay tools walk a log with plain iterators; ``KafkaLog`` speaks asyncio. An
``EventLogSource`` bridges the two for any started ``EventLog``: a private event loop runs
on a daemon thread (``LoopThread``), and each iterator step that needs records submits one
``read_inputs`` / ``read_outputs`` call of up to ``batch`` records to it and waits for the
answer. Memory stays bounded by one batch per open iterator; while the replay works on a
batch, the Kafka client's background fetcher keeps running on the loop thread.

``open_kafka_source(settings)`` builds the ``KafkaLog`` exactly as ``evsched run`` does
(``events.log.open.open_log``: bootstrap, input topics, decisions topic, security
options, credentials from the environment) and takes the channel order from the
log's ``input_channels()`` — topic order as configured, then partition — which is the
order the service merges channels in (docs/contract.md §4), not the names sorted.

This module is part of replay's shell (threads, an event loop, a clock for stall
timeouts); nothing in the replay core imports it, and only ``events.log.kafka`` imports
aiokafka. Reading never commits offsets: replay's default consumer group is
``evsched-replay``, never the service's.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from events.log.open import LogSettings, open_log
from events.log.port import EventLog, GappedOutputs, LogError, LogRecord

READ_BATCH = 5_000
STALL_S = 10.0  # how long reads may bring nothing while the log's end offsets say more is there
CALL_TIMEOUT_S = 120.0
REPLAY_GROUP = "evsched-replay"
_T = TypeVar("_T")


class LoopThread:
    """An asyncio event loop running on its own daemon thread; ``call`` runs a coroutine there."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="replay-log-loop", daemon=True)
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, _T], timeout_s: float = CALL_TIMEOUT_S) -> _T:
        """Run ``coro`` on the loop and wait for its result (its exception is raised here)."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout_s)
        except TimeoutError:
            future.cancel()
            raise LogError(f"the log did not answer within {timeout_s:.0f} s") from None

    def stop(self) -> None:
        """Stop the loop and its thread (idempotent)."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class EventLogSource:
    """A started ``EventLog`` read synchronously, as a ``LogSource`` (see the module docstring)."""

    def __init__(self, log: EventLog, runner: LoopThread, *, batch: int = READ_BATCH) -> None:
        self.log = log
        self.runner = runner
        self.batch = batch
        self.input_channel_order: list[str] = runner.call(log.input_channels())

    def inputs_end(self) -> dict[str, int]:
        """One past the last input record of each channel, as of now."""
        return self.runner.call(self.log.input_end())

    def outputs_end(self) -> int:
        """One past the last output record, as of now."""
        return self.runner.call(self.log.output_end())

    def output_at(self, offset: int) -> LogRecord | None:
        """The output record at ``offset``, or None past the end. On a Kafka log with
        transactions an offset may hold a commit marker: then the first record after it
        (bisection on cycle numbers stays monotonic)."""
        gapped = isinstance(self.log, GappedOutputs) and self.log.gapped_outputs
        found = self.runner.call(self.log.read_outputs(offset, 3 if gapped else 1))
        return found[0] if found else None

    def iter_inputs(self, start_positions: Mapping[str, int] | None = None) -> Iterator[LogRecord]:
        """Input records from ``start_positions`` to the end of every channel.

        The end is taken when the walk starts and looked up again once reached, so records
        appended meanwhile are read too. Records of one channel come in offset order.
        Kafka's end offsets may count offsets no record will fill (transaction markers,
        compacted records): when reads bring nothing for ``STALL_S`` the walk ends there, and
        a cycle that needs a missing record reports it (``InputCursor``'s gap check).
        """
        positions = dict(start_positions or {})
        ends = self.inputs_end()
        stalled_since: float | None = None
        while True:
            if all(positions.get(ch, 0) >= end for ch, end in ends.items()):
                fresh = self.inputs_end()
                if all(positions.get(ch, 0) >= end for ch, end in fresh.items()):
                    return
                ends = fresh
            records = self.runner.call(self.log.read_inputs(positions, self.batch))
            fresh_records = [r for r in records if r.offset >= positions.get(r.channel, 0)]
            if not fresh_records:
                stalled_since = stalled_since or time.monotonic()
                if time.monotonic() - stalled_since > STALL_S:
                    return
                continue
            stalled_since = None
            for rec in fresh_records:
                positions[rec.channel] = rec.offset + 1
                yield rec

    def iter_outputs(self, start: int = 0) -> Iterator[LogRecord]:
        """Output records from ``start`` to the end (looked up again once reached).

        Without transactions every offset holds a record: a read that brings nothing for
        ``STALL_S`` raises ``LogError`` rather than end early (a verify must never pass on a
        log it did not read to the end). With transactions, commit markers (and an aborted
        transaction's records, which a read_committed reader skips) take offsets too: a read
        of a range that returns normally has read the range to its end, so an empty answer
        from a log that says so (``gapped_outputs``) moves past the range.
        """
        offset = start
        end = self.outputs_end()
        stalled_since: float | None = None
        while True:
            if offset >= end:
                end = self.outputs_end()
                if offset >= end:
                    return
            span = min(self.batch, end - offset)
            records = self.runner.call(self.log.read_outputs(offset, span))
            if not records and isinstance(self.log, GappedOutputs) and self.log.gapped_outputs:
                offset += span  # markers or aborted records only
                continue
            if not records:
                stalled_since = _check_stall(stalled_since, f"output records from offset {offset} (end {end})")
                continue
            stalled_since = None
            yield from records
            offset = records[-1].offset + 1

    def close(self) -> None:
        """Close the log's clients on the loop, then stop the loop."""
        try:
            self.runner.call(self.log.close())
        finally:
            self.runner.stop()


def _check_stall(since: float | None, what: str) -> float:
    now = time.monotonic()
    if since is None:
        return now
    if now - since > STALL_S:
        raise LogError(f"the log reports {what} but delivered none for {STALL_S:.0f} s")
    return since


@contextmanager
def open_kafka_source(settings: LogSettings) -> Iterator[EventLogSource]:
    """The Kafka log ``settings`` name, read-only.

    Raises ``LogError`` when the brokers cannot be reached.
    """
    runner = LoopThread()
    try:
        log = runner.call(open_log(settings, readonly=True))
    except BaseException:
        runner.stop()
        raise
    try:
        source = EventLogSource(log, runner)
    except BaseException:
        runner.call(log.close())
        runner.stop()
        raise
    try:
        yield source
    finally:
        source.close()
