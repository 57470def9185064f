"""The live scheduler service: the asyncio loop that reads inputs, runs cycles, writes outputs.

Loop (docs/architecture.md, "One input"): read a batch after the current positions → decode,
merge, apply → cycle → append ``cycle.started``, the outputs and ``cycle.completed`` in one
durable batch → commit input positions (Kafka) → hand outputs to the publisher → repeat.
Where the log is transactional (Kafka with a transactional id) the outputs and the input
positions commit in one transaction instead (exactly-once); a fenced log raises ``LogFenced``.
On start it recovers from the log (``scheduler.service.recovery``). SIGINT/SIGTERM finish the
current cycle, then stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from events.codec import encode_output
from events.log.clock import wall_clock_us
from events.log.port import CommitsOffsets, DeadLetters, EventLog, LogError, LogFenced, LogRecord, TransactionalLog
from events.models import OutputEvent
from scheduler.core.engine import DEFAULT_SOURCE, Engine
from scheduler.core.logged_cycle import advance, run_logged_cycle
from scheduler.service.cycle_gc import CycleCollector
from scheduler.service.recovery import recover
from scheduler.service.settings import ServiceSettings
from scheduler.service.stall import watched
from scheduler.storage.snapshot_files import SnapshotStore, log_identity

LOG = logging.getLogger("evsched.service")
FENCE_FRESH_S = 1.0  # an end offset that took longer to arrive is asked for again (``_fence``)
FENCE_TRIES = 10
ONCE_STALL_S = 30.0  # run(once=True): give up on inputs the log reports but never delivers
# Overlapped commits: how many decided cycles may wait for the transaction in flight before the loop
# waits too. They then commit together, in one transaction (``_CycleWrite``).
MAX_QUEUED_CYCLES = 16


class CycleListener(Protocol):
    """Something that wants every cycle's outputs after they are durable (e.g. the MQTT bridge)."""

    def cycle_done(self, engine: Engine, outputs: list[OutputEvent]) -> None: ...


def next_batch(asked: int, got: int, base: int, maximum: int) -> int:
    """The next read's batch size: twice the last while reads come back full (a backlog), up
    to ``maximum``; ``base`` again after a short one (caught up).

    >>> [next_batch(5, 5, 5, 20), next_batch(20, 20, 5, 20), next_batch(10, 7, 5, 20)]
    [10, 20, 5]
    """
    return min(2 * asked, maximum) if got >= asked else base


@dataclass(frozen=True)
class _CycleWrite:
    """One decided cycle waiting to be made durable: what ``Service._write_cycles`` writes for it."""

    cycle: int
    records: list[LogRecord]
    outputs: list[OutputEvent]
    encoded: list[bytes]
    through: dict[str, int]
    unreadable: list[tuple[LogRecord, str]]
    began: float


@dataclass
class Progress:
    """Counters for the periodic progress line."""

    started: float = field(default_factory=time.monotonic)
    last_report: float = field(default_factory=time.monotonic)
    events: int = 0
    decisions: int = 0
    window_events: int = 0
    window_decisions: int = 0


class Service:
    """One scheduler instance over one log."""

    def __init__(
        self,
        log: EventLog,
        *,
        now_us: Callable[[], int] = wall_clock_us,
        batch_records: int = ServiceSettings.batch,
        max_batch_records: int | None = None,
        source: str = DEFAULT_SOURCE,
        poll_interval_s: float = 0.2,
        progress_every_s: float = 5.0,
        listeners: list[CycleListener] | None = None,
        snapshots: SnapshotStore | None = None,
        snapshot_every: int = ServiceSettings.snapshot_every,
        name: str = "",
        commit_interval_s: float = 0.2,
        collector: CycleCollector | None = None,
        accept_admin_on_inputs: bool = ServiceSettings.accept_admin_on_inputs,
        overlap_commits: bool = True,
    ) -> None:
        self.log = log
        # False: rules changes (events.models.ADMIN_TYPES) only from the log's admin channels;
        # True: from any channel, as before the admin channel (each cycle records which).
        self.accept_admin_on_inputs = accept_admin_on_inputs
        self.admin_channels: list[str] | None = None
        self.name = name
        # A sharded instance runs one Service per shard: its lines name the shard.
        self._log = LOG.getChild(name) if name else LOG
        self.now_us = now_us
        self.batch_records = batch_records
        # Under a backlog, batches double from batch_records up to this (None: no growth).
        self.max_batch_records = max(batch_records, max_batch_records or batch_records)
        self._batch = batch_records
        self.source = source
        self.poll_interval_s = poll_interval_s
        self.progress_every_s = progress_every_s
        self.listeners = listeners or []
        self.snapshots = snapshots
        self.collector = collector  # None: CPython collects whenever its thresholds say
        self.snapshot_every = snapshot_every
        self.output_offset = 0
        self._snapshot_cycle = 0
        self.engine = Engine(source=source)
        self.positions: dict[str, int] = {}
        self.channels: list[str] = []
        self.stopping = asyncio.Event()
        self._between = asyncio.Event()  # set while no cycle runs in the worker thread
        self._between.set()
        self.progress = Progress()
        self._commit: asyncio.Task[None] | None = None
        # Overlapped commits: the writer task committing decided cycles while the loop reads and decides
        # the next (None: none running), and the cycles decided meanwhile, which it commits next — all
        # of them in one transaction (``_writer``).
        self._pending: asyncio.Task[None] | None = None
        self._queued: list[_CycleWrite] = []
        self._snapshot_write: asyncio.Task[Path] | None = None  # a snapshot file written meanwhile
        # Whether a transactional cycle's commit may overlap the next cycle's read and decide
        # (``run``): off when a listener reads the engine in ``cycle_done`` (the MQTT bridge's
        # queue status), which must see the state of the cycle it is told about.
        self.overlap_commits = overlap_commits
        self._committed_positions: dict[str, int] = {}
        self._next_commit = 0.0
        self.commit_interval_s = commit_interval_s
        # Read by the HTTP surface (scheduler.http) between cycles; never by the core.
        self.recovery_s: float | None = None  # None until start() has recovered the state
        self.last_cycle_s = 0.0  # the last cycle's decide-and-write time
        self.snapshot_writes = 0
        self.running = False  # inside run(): reading and deciding

    @classmethod
    def from_settings(cls, log: EventLog, settings: ServiceSettings, **wiring: Any) -> Service:
        """The service ``evsched run``'s settings describe, over ``log``; ``wiring``: what the caller
        builds (listeners, snapshots, collector, a shard's name and source, timings)."""
        return cls(log, batch_records=settings.batch, max_batch_records=settings.max_batch or 4 * settings.batch,
                   snapshot_every=settings.snapshot_every, accept_admin_on_inputs=settings.accept_admin_on_inputs,
                   **wiring)

    @property
    def transactional(self) -> bool:
        """Whether each cycle's outputs and input offsets commit in one transaction (Kafka)."""
        return isinstance(self.log, TransactionalLog) and self.log.transactional

    async def start(self) -> None:
        """Recover state from the log and report what was found."""
        began = time.monotonic()
        rec = await recover(self.log, source=self.source, snapshots=self.snapshots)
        self.engine = rec.engine
        self.positions = rec.positions
        # Counted from the snapshot recovery started at, not from multiples of snapshot_every: a
        # service killed again and again before the next multiple would otherwise re-derive more
        # and more cycles on every start.
        self._snapshot_cycle = rec.from_snapshot or 0
        self.output_offset = await self.log.output_end()
        self.channels = await self.log.input_channels()
        if self.accept_admin_on_inputs:
            self._log.warning(
                "--accept-admin-on-inputs: config.updated and priorityclass events are accepted from "
                "every input channel, not only the admin channel — any producer may change the rules"
            )
        else:
            self.admin_channels = await self.log.admin_channels()
        lag = await self.lag()
        self.recovery_s = time.monotonic() - began
        if rec.cycles or rec.from_snapshot:
            origin = f"snapshot of cycle {rec.from_snapshot} + " if rec.from_snapshot else ""
            self._log.info(
                origin + "recovered %d cycles from the log (last cycle %d, state %s); "
                "resuming at %s with %d inputs waiting",
                rec.cycles, self.engine.cycle_number, self.engine.digest()[:19], self.positions, lag,
            )
        else:
            self._log.info("starting on an empty output log; %d inputs waiting", lag)
        if rec.repaired_outputs:
            self._log.warning("completed a cycle cut short by a crash: wrote %d missing outputs", rec.repaired_outputs)
        if rec.digest_mismatches:
            self._log.error("re-derived state differs from the recorded digest in cycles %s", rec.digest_mismatches)

    async def run_cycle_once(self, *, overlap: bool = False) -> int:
        """Read one batch and run one cycle over it; returns the number of inputs consumed.
        Its outputs are durable on return (and any cycle's before it) — unless ``overlap`` (``run``
        asks for it) and ``overlap_commits`` on a transactional log: then the cycle goes to the writer
        task and the loop reads and decides the next cycle while it commits. Cycles decided while a
        transaction is in flight wait for it and then commit together, in one transaction (a group
        commit: fewer transactions — each costs the broker several writes and markers — the longer
        commits take, and the loop never idles on a commit while inputs wait). Cycles still commit in
        order, and a failed commit stops the loop at its next cycle, before anything later is written.

        With no new inputs a cycle still runs when an app timer is due (so Starting apps
        time out and Completing apps complete); otherwise nothing is written.
        """
        records = await watched("reading inputs", self.log.read_inputs(self.positions, self._batch), self._log)
        # A full batch means more is waiting: the next one may be twice as large (up to the
        # maximum), spreading each cycle's fixed costs (state digest, cycle records, broker
        # round trips) over more inputs; a short one means caught up, back to the base size
        # so that decisions follow their inputs closely again.
        self._batch = next_batch(self._batch, len(records), self.batch_records, self.max_batch_records)
        now = self.now_us()
        if not records and not self.engine.state.timer_due(now):
            return 0
        began = time.perf_counter()
        through = advance(self.positions, records)
        unreadable: list[tuple[LogRecord, str]] = []
        # The cycle's CPU work runs in a worker thread, so the event loop stays free for the
        # Kafka client's heartbeats (a long cycle on the loop got the owner expelled from
        # its group while it went on deciding) and for the last cycle's commit (overlap).
        # Nothing else touches the engine meanwhile.
        self._between.clear()
        try:
            outputs, encoded = await asyncio.to_thread(self._cycle, records, now, through, unreadable)
        finally:
            self._between.set()
        snapshot_due = (self.snapshots is not None
                        and self.engine.cycle_number - self._snapshot_cycle >= self.snapshot_every)
        write = _CycleWrite(self.engine.cycle_number, records, outputs, encoded, through, unreadable, began)
        if overlap and self.overlap_commits and self.transactional:
            # The producer epoch fences this log (no end-offset check to wait for), and the next
            # read starts after these inputs whether or not their transaction has committed yet.
            self.positions = through
            await self._enqueue(write)
            if snapshot_due:
                # The snapshot must hold this cycle's state and output offset, so it waits for the commit
                # and is captured before the next cycle; its file is written while the next cycles run.
                await self.written()
                await self._snapshot_in_background()
        else:
            # Cycles commit in order: the last one's transaction first (a failure stops here, before
            # this cycle writes anything; its decisions, never written, are re-derived on restart).
            await self.written()
            await self._write_cycles([write], overlapped=False)
            if snapshot_due:
                await asyncio.to_thread(self._snapshot)  # CPU work too: off the event loop
        decisions = sum(1 for o in outputs if o.type == "allocation.decided")
        await self._count(len(records), decisions)
        return len(records)

    async def _enqueue(self, write: _CycleWrite) -> None:
        """Hand a decided cycle to the writer task (started when none runs). While a transaction is in
        flight the cycles decided meanwhile queue up and then commit together; the loop waits only
        when ``MAX_QUEUED_CYCLES`` are queued, or when the writer failed (raising its error)."""
        if self._pending is not None and self._pending.done():
            await self.written()  # raises the writer's error, if it failed
        if len(self._queued) >= MAX_QUEUED_CYCLES:
            await self.written()
        self._queued.append(write)
        if self._pending is None:
            self._pending = asyncio.create_task(self._writer())

    async def _writer(self) -> None:
        """Commit the queued cycles, in order: each transaction takes every cycle queued when it
        begins. A failure ends the writer; the cycles still queued are never written (the loop stops
        on the error, and a restart re-derives them)."""
        while self._queued:
            group, self._queued = self._queued, []
            await self._write_cycles(group, overlapped=True)

    async def _write_cycles(self, group: list[_CycleWrite], *, overlapped: bool) -> None:
        """Make the cycles' outputs durable — in one transaction with the last one's input offsets where
        the log has transactions — then dead-letter their unreadable inputs and tell the listeners.
        ``overlapped``: later cycles are being read and decided meanwhile (the positions are already
        past these inputs)."""
        if not self.transactional:
            # Without transactions nothing else fences a second writer; a transactional log is
            # fenced by its producer epoch (and its commit markers take offsets of their own).
            await self._fence()
        first, last = group[0].cycle, group[-1].cycle
        cycles = f"cycle {last}" if first == last else f"cycles {first}-{last}"
        what = f"{cycles}: writing outputs"
        encoded = [value for write in group for value in write.encoded]
        through = group[-1].through
        for write in group:  # `run -v`: the kill tests aim at the write by these lines (tests.progress)
            self._log.debug("cycle %d writing %d outputs", write.cycle, len(write.encoded))
        offsets: dict[str, int] = {}
        try:
            if isinstance(self.log, TransactionalLog) and self.log.transactional:  # one commit, or none
                offsets = await self._offsets_due(through)  # (the input offsets only when due)
                end = await watched(what, self.log.append_cycle(encoded, offsets), self._log)
            else:
                await watched(what, self.log.append_outputs(encoded), self._log)
                end = None
        except LogFenced:
            raise
        except LogError as exc:  # e.g. a full disk: stop rather than run on with state the log lacks
            again = "this cycle" if first == last else "these cycles"
            raise LogError(f"{cycles}: outputs not written ({exc}); stopping — "
                           f"a restart re-runs {again} from the log") from exc
        if self.output_offset == 0 and encoded and self.snapshots is not None:  # the log's first output
            self.snapshots.log_identity = log_identity(encoded[0])
        await self._dead_letter([bad for write in group for bad in write.unreadable])
        # With transactions, commit markers take offsets too: the next cycle's first output is
        # not at end + 1 but the offset after this one's last output is known from the ack.
        self.output_offset = end if end is not None else self.output_offset + len(encoded)
        self.last_cycle_s = time.perf_counter() - group[-1].began
        if offsets:
            self._committed_positions = dict(offsets)
        if self._log.isEnabledFor(logging.DEBUG):  # `run -v`: tests pace themselves by these lines
            for write in group:
                self._log.debug("cycle %d written: %d inputs, %d outputs; %d inputs consumed",
                                write.cycle, len(write.records), len(write.outputs), sum(write.through.values()))
        if not overlapped:  # (overlapped: the transaction committed the offsets; the positions are further on)
            self.positions = through
            await self._commit_positions(force=False)
        for write in group:
            for listener in self.listeners:
                listener.cycle_done(self.engine, write.outputs)

    async def _offsets_due(self, through: dict[str, int]) -> dict[str, int]:
        """The input offsets a cycle's transaction commits: ``through`` at most every
        ``commit_interval_s``, else none. Committed offsets serve lag monitoring only (recovery reads
        the positions from the output log), and sending them costs the transaction two round trips
        (AddOffsetsToTxn, TxnOffsetCommit); an idle or stopping loop commits what is left."""
        if time.monotonic() < self._next_commit:
            return {}
        await self.committed()  # an idle loop's plain commit of older positions lands first
        self._next_commit = time.monotonic() + self.commit_interval_s
        return dict(through)

    async def written(self) -> None:
        """Wait until every decided cycle's outputs are durable (raises the writer's error)."""
        task, self._pending = self._pending, None
        if task is not None:
            await task  # (the writer commits what is queued before it ends)

    @property
    def between_cycles(self) -> bool:
        """No cycle is changing the engine right now (readers on the event loop may read it)."""
        return self._between.is_set()

    async def wait_between_cycles(self) -> None:
        """Until no cycle is changing the engine. A reader on the event loop that reads the
        engine right after this, without awaiting anything in between, reads a whole state:
        a cycle starts its worker thread only from this loop."""
        await self._between.wait()

    def _cycle(
        self, records: list[LogRecord], now: int, through: dict[str, int], unreadable: list[tuple[LogRecord, str]]
    ) -> tuple[list[OutputEvent], list[bytes]]:
        outputs = run_logged_cycle(
            self.engine, records, self.channels, now, self.positions, through, unreadable=unreadable,
            admin_channels=self.admin_channels,
        )
        return outputs, [encode_output(o) for o in outputs]

    async def _fence(self) -> None:
        """Before an append: the output log must end where this instance last wrote.

        One end-offset look-up per cycle. A different end means another writer appended
        since (two instances running one partition: a group member expelled without
        noticing, or two unsharded ``run --kafka`` in one group); appending now would fork
        the log, so the cycle is dropped and the service stops — a restart restores from
        the log, the other writer's cycles included. (Transactions, where the broker has
        them, fence at the broker instead.)
        """
        # A slow answer may be stale: a process frozen (SIGSTOP, a stalled VM) while the
        # question was in flight reads, once it runs again, an answer from before another
        # instance took over. So the answer counts only when it came back promptly.
        for _ in range(FENCE_TRIES):
            asked = time.monotonic()
            end = await watched("checking the output log's end", self.log.output_end(), self._log)
            if time.monotonic() - asked <= FENCE_FRESH_S:
                break
        if end != self.output_offset:
            raise LogError(
                f"cycle {self.engine.cycle_number}: the output log ends at {end}, but this instance last wrote up "
                f"to {self.output_offset}: another instance appended to it (two instances running one partition?); "
                "stopping without writing — a restart restores from the log"
            )

    async def _commit_positions(self, *, force: bool) -> None:
        """Commit the input positions (Kafka), after their outputs are acknowledged.

        Committed offsets are for lag monitoring (recovery reads positions from the output
        log), so a commit's round trip overlaps the next read, and a busy loop commits at
        most every ``commit_interval_s`` (one request per cycle cost latency); an idle or
        stopping loop commits what is left. Commits go out one at a time, in order.
        """
        commit = self.log.commit if isinstance(self.log, CommitsOffsets) else None
        if commit is None or self.positions == self._committed_positions:
            return
        if not force and time.monotonic() < self._next_commit:
            return
        await self.committed()
        self._committed_positions = dict(self.positions)
        self._next_commit = time.monotonic() + self.commit_interval_s
        self._commit = asyncio.create_task(commit(self._committed_positions))

    async def committed(self) -> None:
        """Wait for the last cycle's offset commit (raises its error)."""
        task, self._commit = self._commit, None
        if task is not None:
            await watched("committing input offsets", task, self._log)

    async def _dead_letter(self, unreadable: list[tuple[LogRecord, str]]) -> None:
        """Park unreadable records' raw bytes where the log has a dead-letter topic (Kafka).

        Sent after the cycle's outputs and before its offsets are committed; positions
        come from the output log, so the record is never read again (no stall) and never
        parked twice. A crash between the outputs and this send loses the parked copy
        only: the ``input.rejected`` output and the record's bytes at its input offset remain.
        """
        if not isinstance(self.log, DeadLetters):
            return
        dead_letter = self.log.dead_letter
        for record, error in unreadable:
            await dead_letter(record, error)
            self._log.warning("dead-lettered unreadable input %s: %s", record.position, error[:200])

    def _snapshot(self) -> None:
        assert self.snapshots is not None
        try:
            path = self.snapshots.save(self.engine, self.positions, self.output_offset)
        except OSError as exc:
            self._snapshot_failed(self.engine.cycle_number, exc)
            return
        self._snapshot_cycle = self.engine.cycle_number
        self.snapshot_writes += 1
        self._log.debug("wrote %s", path)

    def _snapshot_failed(self, cycle: int, exc: OSError) -> None:
        # A snapshot only shortens the next start; the log stays the truth. A full disk
        # must not crash the service here: the next append reports it (and stops).
        self._log.warning("snapshot of cycle %d not written (%s); a restart re-derives from the log instead",
                          cycle, exc)

    async def _snapshot_in_background(self) -> None:
        """Capture the engine now (the next cycle changes it: CPU work, off the event loop) and write
        the file (tmp, fsync, rename) while the next cycles run; one write at a time, in order."""
        assert self.snapshots is not None
        await self._snapshot_written()
        cycle, data = await asyncio.to_thread(self.snapshots.capture, self.engine, dict(self.positions),
                                              self.output_offset)
        self._snapshot_cycle = cycle  # due again `snapshot_every` cycles on, whether or not this write succeeds
        self._snapshot_write = asyncio.create_task(asyncio.to_thread(self.snapshots.write, cycle, data))

    async def _snapshot_written(self) -> None:
        """Wait for the snapshot file being written in the background, if any (a failure is logged)."""
        task, self._snapshot_write = self._snapshot_write, None
        if task is None:
            return
        try:
            path = await task
        except OSError as exc:
            self._snapshot_failed(self._snapshot_cycle, exc)
            return
        self.snapshot_writes += 1
        self._log.debug("wrote %s", path)

    async def _count(self, events: int, decisions: int) -> None:
        p = self.progress
        p.events += events
        p.decisions += decisions
        p.window_events += events
        p.window_decisions += decisions
        now = time.monotonic()
        if now - p.last_report >= self.progress_every_s:
            span = now - p.last_report
            pending = sum(len(a.asks) for part in self.engine.state.partitions.values() for a in part.apps.values())
            self._log.info(
                "cycle %d: %.0f events/s, %.0f decisions/s, %d asks pending, %d inputs behind",
                self.engine.cycle_number, p.window_events / span, p.window_decisions / span, pending,
                await self.lag(),
            )
            p.last_report = now
            p.window_events = p.window_decisions = 0

    async def lag(self) -> int:
        """Inputs in the log not yet consumed."""
        end = await self.log.input_end()
        return sum(max(0, end.get(ch, 0) - self.positions.get(ch, 0)) for ch in end)

    async def run(self, *, once: bool = False) -> None:
        """Run until stopped (or, with ``once``, until every present input is processed)."""
        self.running = True
        try:
            await self._loop(once)
            await self.written()
            await self._snapshot_written()
        except BaseException:
            self.running = False
            for task in (self._commit, self._pending, self._snapshot_write):
                if task is not None:  # the loop failed: nobody will wait for this commit
                    task.cancel()
            self._pending = self._snapshot_write = None
            self._queued = []  # decided, never written: a restart re-derives them
            raise
        self.running = False
        await self._commit_positions(force=True)
        await self.committed()
        if self.snapshots is not None and self.engine.cycle_number > self._snapshot_cycle:
            self._snapshot()  # a clean stop leaves nothing to re-derive on the next start
        p = self.progress
        self._log.info(
            "stopped after cycle %d: %d events, %d decisions in %.1f s",
            self.engine.cycle_number, p.events, p.decisions, time.monotonic() - p.started,
        )

    async def _loop(self, once: bool) -> None:
        idle_since = time.monotonic()
        while not self.stopping.is_set():
            consumed = await self.run_cycle_once(overlap=True)
            if self.collector is not None:
                self.collector.after_cycle()  # the cycle's records and outputs are freed by now
            if consumed:
                idle_since = time.monotonic()
                continue
            await self.written()  # idle: the last cycle's commit has had a whole read to finish
            await self._commit_positions(force=True)  # idle: nothing more is coming to commit with
            if once:
                # Kafka can answer a poll with nothing while records wait (the fetch after a
                # seek is still in flight), so "done" is an empty read *and* no lag — bounded,
                # in case the end offset counts records that never arrive.
                waiting = await self.lag()
                if not waiting:
                    break
                if time.monotonic() - idle_since > ONCE_STALL_S:
                    self._log.warning("--once: %d inputs reported, none arrived in %.0f s; stopping",
                                      waiting, ONCE_STALL_S)
                    break
                continue
            if self.poll_interval_s > 0:  # a log whose read waits for records (Kafka) needs no nap
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), self.poll_interval_s)

    def stop(self, *_: Any) -> None:
        """Ask the loop to finish its current cycle and return."""
        self.stopping.set()

    def resume(self) -> None:
        """Let ``run`` be called again after a stop (a shard handed back to this instance)."""
        self.stopping.clear()
