"""Sharded service: run the scheduler partitions (shards) the consumer group gives this instance.

A shard is one scheduler partition run as an independent event-sourced scheduler over its
own log (input topics, decisions topic, cycle numbers, snapshots; see
``events.log.kafka.topics``). Instances that may run the same shards join one consumer
group (``events.log.kafka.ShardMembership``); the group hands each shard to exactly one of
them. ``ShardHost`` follows what the group says:

* assigned a shard it does not have: open its log, restore it (snapshot + log tail: the
  ordinary recovery of ``Service.start``) and run it;
* revoked (inside the rebalance, before anyone else may get it): stop the shard's loop —
  it finishes the cycle in hand and commits — and keep it, paused;
* assigned a paused shard again (the sticky assignor usually hands a shard straight
  back): resume it if its decisions topic has not grown since it stopped (nobody else
  wrote, so its state is the log's), otherwise discard it and restore afresh;
* a paused shard that went to another member: close it;
* a shard whose loop or restore fails on anything but the log (a bug, a poison input):
  that shard alone stops, with an ERROR naming it, and is not restarted by this instance
  while it runs; the instance's other shards go on. A log failure (``LogError``) still
  ends ``run``, so that the process restarts from the log; so does the failure of the last
  shard still running.

The host never runs a shard between a revoke and the next assignment, so two instances
never append to one shard's decisions topic at the same time — except when a member is
expelled without noticing (its session timed out while it was cut off from the broker);
with transactions (``KafkaLog(transactional_id=…)``, one id per shard) the new owner's
producer fences it: its open transaction is aborted, its next commit fails with
``LogFenced``, and the host drops that shard. Without transactions there is no broker-side
fence for that case (see README, Kafka).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from events.log.port import LogError, LogFenced
from scheduler.service.loop import Service

LOG = logging.getLogger("evsched.shards")


@dataclass
class RunningShard:
    """A shard this instance has restored: its service, and the loop running it (None: paused)."""

    service: Service
    close: Callable[[], Awaitable[None]]
    task: asyncio.Task[None] | None = None
    finished_once: bool = False  # --once: caught up and stopped on its own


OpenShard = Callable[[str], Awaitable[RunningShard]]


class ShardHost:
    """Runs the shards assigned to this instance (module docstring)."""

    def __init__(self, open_shard: OpenShard, *, once: bool = False) -> None:
        self._open_shard = open_shard
        self._once = once
        self.shards: dict[str, RunningShard] = {}
        self._desired: set[str] | None = None  # None: a rebalance is under way
        self._changed = asyncio.Event()
        self._lock = asyncio.Lock()  # reconciling and revoking never interleave
        self.stopping = asyncio.Event()
        self._failure: BaseException | None = None
        self.failed: dict[str, BaseException] = {}  # shards stopped alone (module docstring)
        self._fenced: set[str] = set()  # shards whose log another instance took over

    # ------------------------------------------------------------------ membership callbacks

    def assign(self, shards: set[str]) -> None:
        """The group's answer: from now on this instance runs exactly ``shards``."""
        self._desired = set(shards)
        self._changed.set()

    async def revoke(self, shards: set[str]) -> None:
        """Before a rebalance: finish each shard's cycle in hand and pause it — all at once: the
        whole group waits for this member's rejoin, so for its slowest cycle, not for their sum."""
        self._desired = None
        async with self._lock:
            await asyncio.gather(*(self._pause(name) for name in sorted(shards & set(self.shards))))

    def stop(self, *_: object) -> None:
        """Finish every shard's cycle in hand, then return from ``run``."""
        self.stopping.set()
        self._changed.set()

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        """Follow the assignments until stopped (or, with ``once``, until every shard is idle)."""
        try:
            while not self.stopping.is_set():
                await self._wait_for_news()
                self._raise_failures()
                if self._changed.is_set() and not self.stopping.is_set():
                    self._changed.clear()
                    async with self._lock:
                        await self._reconcile()
                if self._once and self._all_caught_up():
                    LOG.info("--once: every assigned shard is caught up")
                    if self.failed:
                        raise next(iter(self.failed.values()))
                    break
        finally:
            await self.shutdown()

    async def _wait_for_news(self) -> None:
        """Until the assignment changes, a shard's loop ends, or we are asked to stop."""
        tasks = [s.task for s in self.shards.values() if s.task is not None]
        changed = asyncio.create_task(self._changed.wait())
        try:
            await asyncio.wait([changed, *tasks], return_when=asyncio.FIRST_COMPLETED)
        finally:
            changed.cancel()
        for name in [n for n, s in self.shards.items() if s.task is not None and s.task.done()]:
            shard = self.shards[name]
            if self._failed(name, shard.task):
                if name in self.failed:  # stopped alone: its state may be ahead of its log
                    await self.shards.pop(name).close()
                continue
            shard.finished_once = self._once and not shard.service.stopping.is_set()
            shard.task = None
        await self._drop_fenced()

    async def _drop_fenced(self) -> None:
        while self._fenced:
            name = self._fenced.pop()
            if self._desired is not None:
                # Our assignment is stale (the group moved the shard while we were cut off):
                # never reopen it — that would fence the new owner — until the group says so.
                self._desired.discard(name)
            if name in self.shards:
                await self.shards.pop(name).close()

    def _failed(self, name: str, task: asyncio.Task[None] | None) -> bool:
        """Whether a finished shard loop failed; a failed shard is dropped (its state may be
        ahead of its log, so it is never resumed) and the failure ends ``run``."""
        exc = task.exception() if task is not None and task.done() and not task.cancelled() else None
        if exc is None:
            return False
        if isinstance(exc, LogFenced):
            # Another instance owns the shard now (its producer fenced ours): not a failure of
            # this instance. Drop the shard; the group's next assignment says what we run.
            LOG.warning("shard %s: %s; dropping it (restored afresh if the group assigns it here again)", name, exc)
            self.shards[name].task = None
            self._fenced.add(name)
            self._changed.set()
            return True
        self.shards[name].task = None
        self._contain(name, exc)
        return True

    def _contain(self, name: str, exc: BaseException) -> None:
        """A log failure ends ``run``; anything else stops this shard alone."""
        if isinstance(exc, LogError) or not isinstance(exc, Exception):
            LOG.error("shard %s failed: %r", name, exc)
            self._failure = self._failure or exc
            return
        LOG.error("shard %s stopped: %r; this instance will not run it again until it is restarted "
                  "(fix the cause first); its other shards go on", name, exc, exc_info=exc)
        self.failed[name] = exc
        self._changed.set()

    def _raise_failures(self) -> None:
        if self._failure is not None:
            raise self._failure
        desired = self._desired
        if self.failed and desired is not None and desired <= set(self.failed):
            LOG.error("every shard assigned to this instance has stopped (%s); stopping", ", ".join(sorted(desired)))
            raise next(self.failed[name] for name in sorted(desired))

    def _all_caught_up(self) -> bool:
        desired = self._desired
        return desired is not None and all(
            name in self.failed or (name in self.shards and self.shards[name].finished_once) for name in desired
        )

    async def _reconcile(self) -> None:
        desired = self._desired
        if desired is None:
            return  # revoked and not yet re-assigned: wait for the group's answer
        for name in sorted(set(self.shards) - desired):
            await self._pause(name)
            await self.shards.pop(name).close()
            LOG.info("shard %s: handed over to another instance", name)
        for name in sorted(desired - set(self.failed)):
            shard = self.shards.get(name)
            if shard is not None and shard.task is None and not await self._still_current(shard):
                LOG.info("shard %s: another instance wrote to it meanwhile; restoring it again", name)
                await self.shards.pop(name).close()
                shard = None
            if shard is None:
                LOG.info("shard %s: assigned to this instance; restoring it", name)
                try:
                    shard = self.shards[name] = await self._open_shard(name)
                except LogError:
                    raise
                except Exception as exc:  # a restore that fails on its data: this shard alone
                    self._contain(name, exc)
                    continue
            elif shard.task is None and not shard.finished_once:
                LOG.info("shard %s: kept; resuming after cycle %d", name, shard.service.engine.cycle_number)
            if shard.task is None and not shard.finished_once:
                shard.service.resume()
                shard.task = asyncio.create_task(shard.service.run(once=self._once), name=f"shard-{name}")

    @staticmethod
    async def _still_current(shard: RunningShard) -> bool:
        """A paused shard's state is the log's while nobody else has appended to its outputs."""
        end = await shard.service.log.output_end()
        mine = shard.service.output_offset
        # A transactional shard's last commit marker sits after its last output.
        return shard.finished_once or end == mine or (shard.service.transactional and end == mine + 1)

    async def _pause(self, name: str) -> None:
        shard = self.shards[name]
        task, shard.task = shard.task, None
        if task is None:
            return
        shard.service.stop()
        await asyncio.gather(task, return_exceptions=True)
        shard.finished_once = False
        if self._failed(name, task):
            self._fenced.discard(name)
            await self.shards.pop(name).close()

    async def shutdown(self) -> None:
        """Stop and close every shard (idempotent)."""
        async with self._lock:
            for name in sorted(self.shards):
                await self._pause(name)
            while self.shards:
                _, shard = self.shards.popitem()
                await shard.close()
