"""Where the HTTP surface gets its state: a running service, or a log re-derived on request.

``LiveState`` reads the service's engine between cycles (a cycle runs in a worker thread;
the server, on the service's event loop, waits until none runs — ``all_between_cycles`` —
and then builds its view without awaiting, so a handler never sees a cycle half done) and
re-derives older cycles from
the log when asked (time travel). ``LogState`` (``evsched serve``) has no service: every
engine is re-derived from the log with ``replay.rederive``, a few kept in a small cache.
Explanations always come from the log (``replay.explain``), in a worker thread, so a
long re-derivation never stalls the cycle.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from events.log.source import LogSource
from replay import state_at
from replay.explain.from_log import explain_ask_from_log, explain_from_log
from replay.explain.text import render_explanation, render_pending
from replay.history import History, completed_cycles, read_history, recent_decisions
from replay.rederive import StartPoint
from scheduler.core.engine import Engine
from scheduler.core.recorded_cycles import COMPLETED, record_type
from scheduler.http import views
from scheduler.http.metrics import ScrapeInputs
from scheduler.http.observer import ServiceObserver

LOG = logging.getLogger("evsched.http")
OpenSource = Callable[[], AbstractContextManager[LogSource]]
# Where a live service re-derives its history from: given the log and its last complete cycle,
# a start point (a snapshot a little before the cycles to show) or None (the beginning).
HistoryStart = Callable[[LogSource, int], StartPoint | None]
# Time travel (?cycle=N) re-derives a whole state: bounded so that no page of requests can
# take the service's memory (docs/reliability.md). One re-derivation at a time, the last
# ENGINE_CACHE results kept by cycle, at most MAX_WAITING requests queued behind it (503 beyond).
ENGINE_CACHE = 2
MAX_WAITING = 8


class NotAvailable(Exception):
    """The request needs something this server does not have (e.g. a log to explain from)."""


class UnknownTarget(Exception):
    """The decision, ask or cycle asked about does not exist (HTTP 404)."""


class Busy(Exception):
    """Too many time-travel requests already waiting for a re-derivation (HTTP 503)."""


class LiveService(Protocol):
    """What the surface reads of ``scheduler.service.loop.Service``."""

    engine: Engine
    positions: dict[str, int]
    recovery_s: float | None
    snapshot_writes: int
    running: bool

    @property
    def between_cycles(self) -> bool: ...

    async def wait_between_cycles(self) -> None: ...

    async def lag(self) -> int: ...


async def all_between_cycles(services: list[LiveService]) -> None:
    """Until every service is between cycles at once (cycles run in worker threads; a view
    built right after this, with no await in between, reads whole states)."""
    while True:
        busy = next((s for s in services if not s.between_cycles), None)
        if busy is None:
            return
        await busy.wait_between_cycles()


class StateSource(Protocol):
    """The surface's view of a scheduler, live or from a log."""

    live: bool

    async def engine(self, partition: str, cycle: int | None) -> Engine: ...
    async def partitions(self, cycle: int | None) -> list[dict[str, Any]]: ...
    async def latest_cycle(self) -> int: ...
    async def scrape(self) -> ScrapeInputs: ...
    async def readiness(self) -> tuple[bool, dict[str, Any]]: ...
    async def decisions(self, limit: int) -> list[dict[str, Any]]: ...
    async def series(self, partition: str, last: int) -> list[dict[str, Any]]: ...
    async def explain_decision(self, decision_id: str) -> dict[str, Any]: ...
    async def explain_ask(self, app_id: str, ask_id: str) -> dict[str, Any]: ...


def engine_at(source: LogSource, cycle: int | None, start: StartPoint | None = None) -> Engine:
    """The engine after ``cycle`` (None: the last complete cycle), re-derived from the log (after ``start``)."""
    try:
        return state_at.engine_at(source, cycle, start)
    except state_at.StateError as exc:
        if exc.structural:
            raise
        raise UnknownTarget(str(exc)) from None


class _Explainer:
    """Explanations from the log, run in a worker thread."""

    def __init__(self, open_source: OpenSource | None) -> None:
        self.open_source = open_source

    def _need(self) -> OpenSource:
        if self.open_source is None:
            raise NotAvailable("explanations need the log: this server was started without one")
        return self.open_source

    async def decision(self, decision_id: str) -> dict[str, Any]:
        opener = self._need()

        def work() -> dict[str, Any]:
            with opener() as source:
                e = explain_from_log(source, decision_id)
            return {"explanation": e.to_dict(), "text": render_explanation(e)}

        return await asyncio.to_thread(work)

    async def ask(self, app_id: str, ask_id: str) -> dict[str, Any]:
        opener = self._need()

        def work() -> dict[str, Any]:
            with opener() as source:
                p = explain_ask_from_log(source, app_id, ask_id, None)
            if p.status in ("unknown-app", "unknown-ask"):
                raise UnknownTarget(f"unknown ask {app_id}/{ask_id}: {p.summary}")
            return {"explanation": p.to_dict(), "text": render_pending(p)}

        return await asyncio.to_thread(work)


class _CompletedCount:
    """``completed_cycles``, counted once: each later call reads only the outputs appended since."""

    def __init__(self) -> None:
        self.offset = 0
        self.count = 0
        self._lock = threading.Lock()  # called from worker threads

    def __call__(self, source: LogSource) -> int:
        with self._lock:
            for record in source.iter_outputs(self.offset):
                if record_type(record) == COMPLETED:
                    self.count += 1
                self.offset = record.offset + 1
            return self.count


class _EngineCache:
    """Re-derived engines by cycle number: ``ENGINE_CACHE`` kept (least recently used evicted),
    one re-derivation at a time, ``MAX_WAITING`` requests queued for one (``Busy`` beyond).

    Requests for the same cycle share one re-derivation: the ones queued behind it find its
    result in the cache. So memory is bounded by ``ENGINE_CACHE + 1`` states whatever the
    requests, and CPU by one worker thread.
    """

    def __init__(self, open_source: OpenSource, start_for: HistoryStart | None = None) -> None:
        self.open_source = open_source
        self.start_for = start_for  # a snapshot at or before the cycle asked for (None: from cycle 1)
        self.engines: OrderedDict[int, Engine] = OrderedDict()
        self.derivations = 0  # re-derivations run (for tests and the curious)
        self._one_at_a_time = asyncio.Lock()
        self._waiting = 0

    def _cached(self, cycle: int) -> Engine | None:
        engine = self.engines.get(cycle)
        if engine is not None:
            self.engines.move_to_end(cycle)
        return engine

    async def get(self, cycle: int) -> Engine:
        cached = self._cached(cycle)
        if cached is not None:
            return cached
        if self._waiting >= MAX_WAITING:
            raise Busy(f"{MAX_WAITING} requests for earlier cycles are already waiting; try again shortly")
        self._waiting += 1
        try:
            async with self._one_at_a_time:
                cached = self._cached(cycle)  # re-derived while this request waited
                if cached is not None:
                    return cached
                while len(self.engines) >= ENGINE_CACHE:  # make room first: the peak stays bounded
                    self.engines.popitem(last=False)

                def work() -> Engine:
                    with self.open_source() as source:
                        start = self.start_for(source, cycle) if self.start_for is not None else None
                        return engine_at(source, cycle, start)

                self.derivations += 1
                engine = await asyncio.to_thread(work)
                self.put(cycle, engine)
                return engine
        finally:
            self._waiting -= 1

    def put(self, cycle: int, engine: Engine) -> None:
        """Keep ``engine`` as the state after ``cycle``."""
        self.engines[cycle] = engine
        self.engines.move_to_end(cycle)
        while len(self.engines) > ENGINE_CACHE:
            self.engines.popitem(last=False)


class LiveState:
    """A running service, its observer, and optionally its log for explanations and time travel."""

    live = True

    def __init__(self, service: LiveService, observer: ServiceObserver, open_source: OpenSource | None = None,
                 *, ready_max_lag: int = 10_000, history_start: HistoryStart | None = None,
                 cycle_start: HistoryStart | None = None) -> None:
        self.service = service
        self.observer = observer
        self.open_source = open_source
        self.explainer = _Explainer(open_source)
        self.history = _EngineCache(open_source, cycle_start) if open_source is not None else None
        self.ready_max_lag = ready_max_lag
        self.history_start = history_start
        self._seeded: asyncio.Task[None] | None = None

    def load_history(self) -> None:
        """Start reading the log's recent history (decisions, samples, the last cycle's time) into
        the observer, in a worker thread; requests that show history wait for it (``_seeded``)."""
        if self.open_source is None or self._seeded is not None:
            return
        opener, pick = self.open_source, self.history_start

        def work() -> History:
            with opener() as source:
                latest = completed_cycles(source)  # the cycles before this start; later ones are observed
                start = pick(source, latest) if pick is not None and latest > 0 else None
                return read_history(source, start, through_cycle=latest)

        async def seed() -> None:
            try:
                history = await asyncio.to_thread(work)
            except Exception as exc:  # history is a convenience: say why, and serve on without it
                LOG.warning("recent history not read from the log: %s", exc)
                return
            self.observer.seed(history)

        self._seeded = asyncio.get_running_loop().create_task(seed())

    async def _history_loaded(self) -> None:
        if self._seeded is not None:
            await asyncio.shield(self._seeded)

    async def engine(self, partition: str, cycle: int | None) -> Engine:
        return await self._engine(cycle)

    async def partitions(self, cycle: int | None) -> list[dict[str, Any]]:
        return views.partitions_view(await self._engine(cycle))

    async def _engine(self, cycle: int | None) -> Engine:
        await all_between_cycles([self.service])
        live = self.service.engine
        if cycle is None or cycle == live.cycle_number:
            return live
        if cycle < 0 or cycle > live.cycle_number:
            raise UnknownTarget(f"cycle {cycle} does not exist (the last is {live.cycle_number})")
        if self.history is None:
            raise NotAvailable("earlier cycles need the log: this server was started without one")
        return await self.history.get(cycle)

    async def latest_cycle(self) -> int:
        return self.service.engine.cycle_number

    async def scrape(self) -> ScrapeInputs:
        lag = await self._lag_by_channel()
        await self._history_loaded()
        await all_between_cycles([self.service])
        store = getattr(self.service, "snapshots", None)
        return ScrapeInputs(engines=[(self.service.engine, None)], observer=self.observer, lag=lag,
                            recovery_s=self.service.recovery_s, snapshot_writes=self.service.snapshot_writes,
                            snapshots_failed_integrity=getattr(store, "integrity_failures", 0))

    async def _lag_by_channel(self) -> dict[str, int]:
        log = getattr(self.service, "log", None)
        if log is None:
            return {}
        end: dict[str, int] = await log.input_end()
        positions = self.service.positions
        return {ch: max(0, end[ch] - positions.get(ch, 0)) for ch in end}

    async def readiness(self) -> tuple[bool, dict[str, Any]]:
        recovered = self.service.recovery_s is not None
        lag = sum((await self._lag_by_channel()).values()) if recovered else None
        ready = recovered and self.service.running and lag is not None and lag <= self.ready_max_lag
        return ready, {"recovered": recovered, "consuming": self.service.running, "lag": lag,
                       "maxLag": self.ready_max_lag, "cycle": self.service.engine.cycle_number}

    async def decisions(self, limit: int) -> list[dict[str, Any]]:
        await self._history_loaded()
        return self.observer.decisions(limit)

    async def series(self, partition: str, last: int) -> list[dict[str, Any]]:
        await self._history_loaded()
        views.partition_of(self.service.engine, partition)
        return [s.to_dict() for s in self.observer.series(partition, last)]

    async def explain_decision(self, decision_id: str) -> dict[str, Any]:
        return await self.explainer.decision(decision_id)

    async def explain_ask(self, app_id: str, ask_id: str) -> dict[str, Any]:
        return await self.explainer.ask(app_id, ask_id)


class LogState:
    """A log with no service (``evsched serve``): state re-derived on request."""

    live = False

    def __init__(self, open_source: OpenSource) -> None:
        self.open_source = open_source
        self.explainer = _Explainer(open_source)
        self.history = _EngineCache(open_source)
        self._read: History | None = None  # the log's history, re-read when the log has more cycles
        self._reading = asyncio.Lock()  # one history read at a time: the others wait for its result
        self._completed = _CompletedCount()

    async def latest_cycle(self) -> int:
        def work() -> int:
            with self.open_source() as source:
                return self._completed(source)

        return await asyncio.to_thread(work)

    async def engine(self, partition: str, cycle: int | None) -> Engine:
        return await self._engine(cycle)

    async def partitions(self, cycle: int | None) -> list[dict[str, Any]]:
        return views.partitions_view(await self._engine(cycle))

    async def _engine(self, cycle: int | None) -> Engine:
        if cycle is None:  # the latest state comes with the history: one re-derivation gives both
            return (await self._latest()).engine or Engine()
        latest = await self.latest_cycle()
        if cycle > latest:  # answered from the count, before any re-derivation
            raise UnknownTarget(f"cycle {cycle} is not in the log (it holds {latest} complete cycles)")
        return await self.history.get(cycle)

    async def _latest(self) -> History:
        """The log's history through its last complete cycle, read again when the log has more."""
        async with self._reading:
            latest = await self.latest_cycle()
            if self._read is None or self._read.last_cycle != latest:
                def work() -> History:
                    with self.open_source() as source:
                        return read_history(source, through_cycle=latest)

                self._read = await asyncio.to_thread(work)
                if self._read.engine is not None:
                    self.history.put(self._read.last_cycle, self._read.engine)
            return self._read

    async def scrape(self) -> ScrapeInputs:
        return ScrapeInputs(engines=[(await self._engine(None), None)])

    async def readiness(self) -> tuple[bool, dict[str, Any]]:
        return True, {"mode": "log", "cycle": await self.latest_cycle()}

    async def decisions(self, limit: int) -> list[dict[str, Any]]:
        def work() -> list[dict[str, Any]]:
            with self.open_source() as source:
                return recent_decisions(source, limit)

        return await asyncio.to_thread(work)

    async def series(self, partition: str, last: int) -> list[dict[str, Any]]:
        read = await self._latest()
        engine = read.engine or Engine()
        views.partition_of(engine, partition)
        return [s.to_dict() for s in read.samples.get(partition, [])[-last:]] if last > 0 else []

    async def explain_decision(self, decision_id: str) -> dict[str, Any]:
        return await self.explainer.decision(decision_id)

    async def explain_ask(self, app_id: str, ask_id: str) -> dict[str, Any]:
        return await self.explainer.ask(app_id, ask_id)


class ShardedState:
    """The shards a sharded instance runs now (``run --partition``): each partition answered by its shard.

    Shards come and go with the consumer group's assignments; a partition this instance
    does not run now is a 404 that names the ones it does. Counters are summed over the
    shards' observers; explanations and time travel are per-shard logs and not offered here.
    """

    live = True

    def __init__(self, running: Callable[[], dict[str, LiveState]], *, ready_max_lag: int = 10_000) -> None:
        self.running = running
        self.ready_max_lag = ready_max_lag

    def _shard(self, partition: str) -> LiveState:
        shards = self.running()
        if partition not in shards:
            raise UnknownTarget(f"partition {partition!r} is not run by this instance now "
                                f"(it runs: {', '.join(sorted(shards)) or 'none'})")
        return shards[partition]

    async def engine(self, partition: str, cycle: int | None) -> Engine:
        shard = self._shard(partition)
        if cycle is not None and cycle != shard.service.engine.cycle_number:
            raise NotAvailable("earlier cycles of a shard: use evsched serve --kafka … --partition NAME")
        await all_between_cycles([shard.service])
        return shard.service.engine

    async def partitions(self, cycle: int | None) -> list[dict[str, Any]]:
        rows = []
        await all_between_cycles([shard.service for shard in self.running().values()])
        for name, shard in sorted(self.running().items()):
            rows += [r for r in views.partitions_view(shard.service.engine) if r["name"] == name]
        return rows

    async def latest_cycle(self) -> int:
        return max((s.service.engine.cycle_number for s in self.running().values()), default=0)

    async def scrape(self) -> ScrapeInputs:
        merged = ServiceObserver()
        engines: list[tuple[Engine, str | None]] = []
        lag: dict[str, int] = {}
        writes = 0
        for name, shard in sorted(self.running().items()):
            engines.append((shard.service.engine, name))
            obs = shard.observer
            merged.cycles += obs.cycles
            merged.outputs_by_type.update(obs.outputs_by_type)
            merged.rejections_by_reason.update(obs.rejections_by_reason)
            merged.bucket_counts = [a + b for a, b in zip(merged.bucket_counts, obs.bucket_counts, strict=True)]
            merged.seconds_sum += obs.seconds_sum
            last = [t for t in (merged.last_cycle_unix, obs.last_cycle_unix) if t is not None]
            merged.last_cycle_unix = max(last) if last else None
            lag.update(await shard._lag_by_channel())
            writes += shard.service.snapshot_writes
        await all_between_cycles([shard.service for shard in self.running().values()])
        return ScrapeInputs(engines=engines, observer=merged, lag=lag, snapshot_writes=writes)

    async def readiness(self) -> tuple[bool, dict[str, Any]]:
        shards = self.running()
        details = {name: (await shard.readiness())[1] for name, shard in sorted(shards.items())}
        lag = sum(d["lag"] or 0 for d in details.values())
        ready = bool(shards) and all(d["recovered"] and d["consuming"] for d in details.values())
        ready = ready and lag <= self.ready_max_lag
        return ready, {"shards": details, "lag": lag, "maxLag": self.ready_max_lag}

    async def decisions(self, limit: int) -> list[dict[str, Any]]:
        every = [d for shard in self.running().values() for d in shard.observer.decisions(limit)]
        return sorted(every, key=lambda d: (d["time"], d["decisionId"]), reverse=True)[:limit]

    async def series(self, partition: str, last: int) -> list[dict[str, Any]]:
        return await self._shard(partition).series(partition, last)

    async def explain_decision(self, decision_id: str) -> dict[str, Any]:
        raise NotAvailable("explanations of a sharded instance: use evsched replay explain --partition NAME")

    async def explain_ask(self, app_id: str, ask_id: str) -> dict[str, Any]:
        raise NotAvailable("explanations of a sharded instance: use evsched replay explain --partition NAME")
