"""Parallel verify: cut the log at snapshot boundaries and verify the ranges in worker processes.

The service's snapshots split the log into ranges ``(s_i, s_i+1]`` of cycles. Range ``i``
restores snapshot ``s_i`` (validated as recovery does: ``replay.snapshot_start``; range 0
starts from a fresh engine), re-derives and compares its cycles with ``replay.verify``,
and stops after cycle ``s_i+1``. Ranges run in a process pool (``jobs`` workers).

Why the result equals a sequential verify: a range that verifies ends with a re-derived
state whose digest equals the log's ``cycle.completed`` of ``s_i+1``, and additionally
the whole engine dump (every fact the snapshot holds, seen input ids and timers
included: ``scheduler.core.snapshot.dump``) is hashed and compared with the hash of the
snapshot file the next range started from. So each range starts from exactly the state
a sequential run would have reached, and the first divergence in log order is the
divergence of the first range (in log order) that has one; the ranges after it are
cancelled. A snapshot that cannot be used (unreadable, another schema, not vouched for by the
log, or not equal to the state re-derived up to it) is dropped as a boundary and the
ranges around it are re-planned as one.

Ranges are planned from the snapshot headers (cycle, input positions) and file sizes
(``replay.verify_plan``): one per worker, cut where the slowest range, its snapshot restore
and end hash included, is fastest. Progress: every worker puts
``(range, cycles, inputs, outputs)`` on a queue after each cycle; ``on_progress`` gets
the sum over ranges. Ranges no longer needed are cancelled cooperatively: the parent sets
an event that every worker checks after each cycle (never ``Pool.terminate``, whose SIGTERM
can catch a worker holding the result queue's lock and hang the pool for good). This module
is shell code: processes, queues, files.
"""

from __future__ import annotations

import atexit
import gc
import hashlib
import itertools
import multiprocessing
import queue as queue_module
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from events.log.open import LogSettings
from replay.heap_pad import keep_heap_pad
from replay.reader import FileSource, LogSource, input_total
from replay.rederive import Rederiver
from replay.snapshot_start import restore_start
from replay.verify_plan import MIN_RANGE_INPUTS, Boundary, Range, plan_ranges
from scheduler.core import snapshot
from scheduler.core.engine import Engine
from scheduler.core.rules_version import rules_version_problem
from scheduler.storage.snapshot_files import SnapshotStore

Spec = LogSettings  # what a worker opens the log with (``replay.open_source``); frozen, picklable


@dataclass
class RangeResult:
    """A range's verify report, and what it says about the snapshots at its two ends."""

    report: Any  # replay.verify.VerifyReport
    start_hash: str | None = None  # hash of the start snapshot's engine (None: fresh engine)
    end_hash: str | None = None  # hash of the engine re-derived through the end cycle
    bad_start: str | None = None  # why the start snapshot could not be used


def engine_hash(dumped: dict[str, Any]) -> str:
    """sha256 of an engine dump with its order-free parts put in order (timers, classes, sources).

    The timer heap's list order depends on how the heap was built (pushes vs. a restore's
    heapify), not on the state; sorting makes two equal states hash equal. The seen input
    ids are hashed source by source, each source's ids in their order, which is state: it
    decides which id the window forgets next (``events.seen``). The sources are sorted by
    name: their order (least recently active first) decides only what the total forgets
    once over ``SEEN_TOTAL``, and snapshots written before that rule hold them in first-seen
    order; hashing it would fail those snapshots (docs/events.md).
    """
    body = dict(dumped)
    grouped: dict[str, list[str]] = body.pop("seen", {})
    body["timers"] = sorted(body.get("timers", []))
    body["classes"] = sorted(body.get("classes", []))
    digest = hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS))
    for source in sorted(grouped):
        digest.update(orjson.dumps([source, grouped[source]]))
    return digest.hexdigest()


def derived_engine_hash(engine: Engine) -> str:
    """``engine_hash`` of a live engine, equal to that of its snapshot file's ``engine``."""
    return engine_hash(snapshot.dump(engine))


def plan_boundaries(store: SnapshotStore | None) -> list[Boundary]:
    """Usable-looking snapshot boundaries (header readable, made by this code), by cycle."""
    if store is None:
        return []
    out: dict[int, Boundary] = {}
    for path in store.candidates():
        head = store.header(path)
        if head is None or not isinstance(head.get("cycle"), int) or head["cycle"] < 1:
            continue
        positions = head.get("positions") or {}
        inputs = sum(v for v in positions.values() if isinstance(v, int))
        try:
            size = Path(path).stat().st_size
        except OSError:
            size = 0
        out.setdefault(head["cycle"], Boundary(head["cycle"], inputs, str(path), size))
    return [out[c] for c in sorted(out)]


# ---------------------------------------------------------------------------------- worker side

_QUEUE: Any = None
_STOP: Any = None  # the parent's "stop: the outcome is settled" event


class RangeCancelled(Exception):
    """A worker's range stopped early because the parent no longer needs its result."""


_SOURCES: dict[str, tuple[ExitStack, LogSource]] = {}
_INHERITED: LogSource | None = None  # the parent's open log, in workers forked inside ``shared``
# A worker's last re-derived engine, left for the process's exit: a pool worker ends with
# ``os._exit``, so nothing frees it object by object (0.02-0.04 s at the end of a range).
_LAST_ENGINE: list[Any] = []


def _init_worker(progress_queue: Any, stop: Any) -> None:
    global _QUEUE, _STOP
    _QUEUE, _STOP = progress_queue, stop
    # Progress is advisory: a worker exits without waiting to flush it into a pipe nobody reads.
    progress_queue.cancel_join_thread()
    # No cyclic collection in a worker at all (``paused_gc`` says why a range needs none): a
    # worker only runs ranges and exits. Collecting after each range instead re-scanned, in
    # one young collection, every object the range had left alive (~0.1 s per range).
    gc.disable()
    keep_heap_pad()  # a forked worker has the parent's already; a spawned one asks again
    atexit.register(_close_sources)


def _close_sources() -> None:
    for stack, _ in _SOURCES.values():
        stack.close()
    _SOURCES.clear()


def _source(spec: Spec) -> LogSource:
    """The worker's open log for ``spec``: the parent's when forked from it (``shared``), else
    opened once per worker process and reused by its ranges."""
    if _INHERITED is not None:
        return _INHERITED
    key = orjson.dumps(spec, option=orjson.OPT_SORT_KEYS).decode()
    if key not in _SOURCES:
        from replay.open_source import open_source

        stack = ExitStack()
        source = stack.enter_context(open_source(spec))
        _SOURCES[key] = (stack, source)
    return _SOURCES[key][1]


@contextmanager
def paused_gc() -> Iterator[None]:
    """Run the body without cyclic garbage collection; it is back on (if it was) after.

    A range is finite work over a large heap: re-deriving 100,000 inputs spent ~3% of its
    time (two workers at once: ~8%) in collections that found a few hundred cyclic objects
    in all (reference counting frees everything else); they wait for the next collection.
    Hashing the engine at a range's end (a dump of the whole state) took 0.18 s with
    collections and 0.12 s without.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def verify_range(
    spec: Spec, rng: Range, source: LogSource | None = None, progress: Callable[[Any], None] | None = None
) -> RangeResult:
    """Verify one range: in a worker, or in this process when ``source`` is given."""
    from replay.verify import VerifyReport, verify_with

    if _STOP is not None and _STOP.is_set():  # queued before the outcome was settled
        raise RangeCancelled(f"range {rng.index} cancelled")
    if _LAST_ENGINE:  # a worker's second range (a re-plan): free the first's engine, cycles too
        _LAST_ENGINE.clear()
        gc.collect()
    source = source if source is not None else _source(spec)
    start = None
    start_hash = None
    if rng.start.path is not None:
        path = Path(rng.start.path)
        store = SnapshotStore(path.parent)
        body = store.read(path)
        start = restore_start(source, store, path, body) if body is not None else None
        if body is None or start is None or start.engine.cycle_number != rng.start.cycle:
            return RangeResult(VerifyReport(), bad_start=f"snapshot {path} cannot be used")
        start_hash = engine_hash(body["engine"])

    def report_progress(report: VerifyReport) -> None:
        if progress is not None:
            progress(report)
        if _QUEUE is not None:
            _QUEUE.put((rng.index, report.cycles, report.inputs, report.outputs))
        if _STOP is not None and _STOP.is_set():
            raise RangeCancelled(f"range {rng.index} cancelled")

    rederiver = Rederiver(source, start=start, through_cycle=None if rng.end is None else rng.end.cycle)
    report = verify_with(rederiver, progress=report_progress)
    end_hash = None
    engine = rederiver.engine
    if rng.end is not None and report.ok and engine is not None and engine.cycle_number == rng.end.cycle:
        end_hash = derived_engine_hash(engine)
    if _QUEUE is not None:  # in a worker
        _LAST_ENGINE[:] = [rederiver]
    return RangeResult(report, start_hash=start_hash, end_hash=end_hash)


# ---------------------------------------------------------------------------------- parent side


@dataclass
class ParallelRun:
    """Progress over all ranges (what ``on_progress`` sees), and the plan that was run."""

    ranges: list[Range] = field(default_factory=list)
    per_range: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    passes: int = 0  # how many plans were run (more than 1: a snapshot was dropped)
    dropped: list[str] = field(default_factory=list)

    def totals(self) -> tuple[int, int, int]:
        """(cycles, inputs, outputs) verified so far over all ranges."""
        c = sum(v[0] for v in self.per_range.values())
        i = sum(v[1] for v in self.per_range.values())
        o = sum(v[2] for v in self.per_range.values())
        return c, i, o


def merge_results(ranges: list[Range], results: dict[tuple[int, int | None], RangeResult]) -> Any:
    """One ``VerifyReport`` for the ranges in log order: sums, and the first divergence."""
    from replay.verify import Divergence, VerifyReport

    merged = VerifyReport()
    for rng in ranges:
        part = results[rng.key].report
        if part.first_rules is not None:  # a range starts where a snapshot cut the log: join the versions
            cycle, version = part.first_rules
            problem = rules_version_problem(version, merged.last_rules_version)
            if problem is not None:
                merged.divergence = Divergence(reason=f"cycle {cycle}: {problem}", cycle=cycle)
                return merged
            merged.last_rules_version = part.last_rules_version
        if part.divergence is not None:
            merged.divergence = part.divergence
            merged.cycles += part.cycles  # the cycles of its range verified before it
            return merged
        merged.cycles += part.cycles
        merged.inputs += part.inputs
        merged.outputs += part.outputs
        merged.rerun_cycles.extend(part.rerun_cycles)
        merged.rederived.update(part.rederived)
        merged.checked.update(part.checked)
        merged.incomplete_cycle = part.incomplete_cycle
        merged.unconsumed_inputs = part.unconsumed_inputs
    return merged


def _broken_links(ranges: list[Range], results: dict[tuple[int, int | None], RangeResult]) -> list[Boundary]:
    """Boundaries that cannot be trusted: their snapshot was unusable, or is not the state the
    range before re-derived. Only judged where that range verified from a trusted start: a
    range that started from a bad snapshot ends in a state that proves nothing."""
    bad: list[Boundary] = []
    for before, after in itertools.pairwise(ranges):
        prev, nxt = results.get(before.key), results.get(after.key)
        if nxt is None or prev is None or (bad and bad[-1] == before.start) or not prev.report.ok:
            continue
        if nxt.bad_start is not None or prev.end_hash != nxt.start_hash:
            bad.append(after.start)
    return bad


def _settled(ranges: list[Range], results: dict[tuple[int, int | None], RangeResult]) -> bool:
    """True when the outcome is known: every range is done, or a range diverged and every
    range before it is done, verified and linked."""
    for i, rng in enumerate(ranges):
        res = results.get(rng.key)
        if res is None:
            return False
        if res.bad_start is not None:
            return False
        if i > 0 and results[ranges[i - 1].key].end_hash != res.start_hash:
            return False
        if not res.report.ok:
            return True
    return True


def verify_parallel(
    source: LogSource,
    spec: Spec,
    store: SnapshotStore | None,
    jobs: int,
    on_progress: Callable[[ParallelRun], None] | None = None,
    min_range_inputs: int = MIN_RANGE_INPUTS,
    run: ParallelRun | None = None,
) -> Any:
    """Verify ``source`` in ranges over ``jobs`` worker processes (see the module docstring).

    ``spec`` is the ``LogSettings`` a worker opens the same log with. With a single range
    (no usable snapshots, a short log, ``jobs`` 1) it runs in this process. ``run``, when
    given, is filled in with the plan, the progress and the snapshots dropped.
    """
    total = input_total(source) or 0
    boundaries = plan_boundaries(store) if jobs > 1 else []
    run = run if run is not None else ParallelRun()
    results: dict[tuple[int, int | None], RangeResult] = {}
    while True:
        run.ranges = plan_ranges(boundaries, total, jobs, min_range_inputs)
        run.passes += 1
        todo = [r for r in run.ranges if r.key not in results]
        run.per_range = {  # progress of this plan: the ranges already verified count in full
            r.index: (results[r.key].report.cycles, results[r.key].report.inputs, results[r.key].report.outputs)
            for r in run.ranges if r.key in results
        }
        if len(run.ranges) == 1 and todo:
            only = run.ranges[0]

            def local(report: Any) -> None:
                run.per_range[0] = (report.cycles, report.inputs, report.outputs)
                if on_progress is not None:
                    on_progress(run)

            # A worker runs without cyclic collection (``_init_worker``); here the range, its
            # snapshot restore included, is as finite: its few cyclic objects wait till after.
            with paused_gc():
                results[only.key] = verify_range(spec, only, source, progress=local)
        elif todo:
            _run_ranges(spec, source, todo, jobs, run, results, on_progress)
        bad = _broken_links(run.ranges, results)
        if not bad:
            return merge_results(run.ranges, results)
        run.dropped.extend(b.path or "" for b in bad)
        boundaries = [b for b in boundaries if b not in bad]


def start_method() -> str:
    """``fork`` where the platform has it and this process runs no other thread, else ``spawn``.

    A thread (a Kafka source's event loop, say) may hold a lock at the moment of the fork,
    and the child would wait on it for ever; a single-threaded process has no such lock.
    """
    if "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1:
        return "fork"
    return "spawn"


@contextmanager
def shared(source: LogSource | None) -> Iterator[None]:
    """While open, workers forked from this process use ``source`` instead of opening the log
    again (only the embedded log: its reads are ``pread`` calls on descriptors, so a forked
    copy reads the same bytes without disturbing this one)."""
    global _INHERITED
    if not isinstance(source, FileSource):
        yield
        return
    _INHERITED = source
    try:
        yield
    finally:
        _INHERITED = None


def _run_ranges(
    spec: Spec,
    source: LogSource,
    todo: list[Range],
    jobs: int,
    run: ParallelRun,
    results: dict[tuple[int, int | None], RangeResult],
    on_progress: Callable[[ParallelRun], None] | None,
) -> None:
    """Run ``todo`` on a pool of ``jobs`` processes until the outcome is settled.

    The workers are forked when that is safe (``start_method``): they start at once, with
    this process's modules imported and, for the embedded log, its open log (``shared``):
    spawning re-imported everything and re-scanned the log in every worker, about half a
    second before the first cycle (benchmarks/RESULTS.md).
    """
    method = start_method()
    ctx = multiprocessing.get_context(method)
    progress_queue = ctx.Queue()
    stop = ctx.Event()
    with shared(source if method == "fork" else None):
        pool = ctx.Pool(min(jobs, len(todo)), initializer=_init_worker, initargs=(progress_queue, stop))
    try:
        pending = {rng.key: (rng, pool.apply_async(verify_range, (spec, rng))) for rng in todo}
        by_index = {rng.index: rng for rng in run.ranges}
        while pending:
            next(iter(pending.values()))[1].wait(0.2)
            for key, (rng, job) in list(pending.items()):
                if job.ready():
                    results[key] = job.get()
                    rep = results[key].report
                    run.per_range[rng.index] = (rep.cycles, rep.inputs, rep.outputs)
                    del pending[key]
            for index, counts in _drain(progress_queue):
                if index in by_index and by_index[index].key not in results:
                    run.per_range[index] = counts
            if on_progress is not None:
                on_progress(run)
            if _settled(run.ranges, results):
                break
        if pending:
            stop.set()  # the outcome is known: running ranges stop after their cycle
    except Exception:
        stop.set()  # a range failed: the others stop after their cycle
        raise
    except BaseException:
        pool.terminate()  # interrupted (the workers got the SIGINT too): nothing to wait for
        raise
    finally:
        pool.close()  # idle workers exit and close their logs
        pool.join()
        progress_queue.close()


def _drain(progress_queue: Any) -> Iterator[tuple[int, tuple[int, int, int]]]:
    while True:
        try:
            index, cycles, inputs, outputs = progress_queue.get_nowait()
        except (queue_module.Empty, OSError, ValueError):
            return
        yield index, (cycles, inputs, outputs)


__all__ = [
    "ParallelRun", "RangeResult", "engine_hash", "merge_results", "paused_gc", "plan_boundaries", "shared",
    "start_method", "verify_parallel", "verify_range",
]
