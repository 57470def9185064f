"""Parallel verify: ranges between snapshots, verified in worker processes, report what a
sequential verify reports — the same counts, the same first divergence — and drop a snapshot
that is not the state re-derived up to it."""

from __future__ import annotations

import gc
import itertools
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events.log.file import FileLog
from events.log.open import LogSettings
from replay import open_source as open_source_module
from replay import verify_parallel as verify_parallel_module
from replay.reader import open_file_log
from replay.snapshot_start import pick_snapshot
from replay.verify import VerifyReport, verify
from replay.verify_parallel import (
    ParallelRun,
    derived_engine_hash,
    engine_hash,
    paused_gc,
    start_method,
    verify_parallel,
)
from replay.verify_plan import Boundary, estimated_work, plan_ranges, range_cost
from scheduler.cli.replay import main
from scheduler.simulation.workload import WorkloadSpec
from scheduler.storage.snapshot_files import SnapshotStore, with_content_hash
from tests.logdrive import copy_log
from tests.unit.test_replay_snapshots import EVERY, snapshotted_log

SPEC = WorkloadSpec(nodes=60, apps=6, asks=300, leaves=4, seed=29)
MIN_INPUTS = 40  # tiny ranges, so a small log is cut at every snapshot


@pytest.fixture(scope="module")
def snap_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return snapshotted_log(tmp_path_factory.mktemp("parallel") / "log", SPEC)


def sequential(path: Path) -> VerifyReport:
    with open_file_log(path) as source:
        return verify(source)


def parallel(path: Path, snapshots: Path, run: ParallelRun | None = None) -> VerifyReport:
    with open_file_log(path) as source:
        report: VerifyReport = verify_parallel(
            source, LogSettings(directory=str(path)), SnapshotStore(snapshots), jobs=3, min_range_inputs=MIN_INPUTS,
            run=run,
        )
    return report


def with_outputs_of(src: Path, dst: Path, change: Any) -> Path:
    with FileLog(src, readonly=True) as log:
        copy_log(log, dst, outputs=change).close_sync()
    shutil.copytree(src / "snapshots", dst / "snapshots")
    return dst


def forge_decision_in(cycles: set[int]) -> Any:
    def change(values: list[bytes]) -> list[bytes]:
        out, done = [], set()
        for value in values:
            obj = orjson.loads(value)
            cycle = obj["data"].get("cycle")
            if obj["type"] == "allocation.decided" and cycle in cycles and cycle not in done:
                obj["data"]["node_id"] = "node-forged"
                done.add(cycle)
            out.append(orjson.dumps(obj))
        assert done == cycles, f"no decision in cycles {cycles - done}"
        return out

    return change


def test_ranges_are_cut_at_snapshots_into_balanced_pieces() -> None:
    snaps = [Boundary(c, c * 1000, f"s{c}") for c in range(10, 100, 10)]  # every 10 cycles, 10,000 inputs
    assert [r.key for r in plan_ranges(snaps, 100_000, jobs=2, min_inputs=20_000)] == [(0, 50), (50, None)]
    assert [r.key for r in plan_ranges(snaps, 100_000, jobs=4, min_inputs=20_000)] == [
        (0, 20), (20, 40), (40, 70), (70, None)]  # no range over 30,000; of those the earliest cuts
    assert [r.key for r in plan_ranges(snaps, 100_000, jobs=1, min_inputs=20_000)] == [(0, None)]
    assert [r.key for r in plan_ranges([], 100_000, jobs=2)] == [(0, None)]
    # never a last range of almost nothing, nor a range under min_inputs
    assert [r.key for r in plan_ranges(snaps, 12_000, jobs=2, min_inputs=10_000)] == [(0, None)]
    assert [r.key for r in plan_ranges(snaps, 100_000, jobs=8, min_inputs=30_000)] == [(0, 30), (30, 60), (60, None)]


def test_the_range_after_a_cut_is_shorter_by_the_restore_it_starts_with() -> None:
    """Snapshots every 10,000 inputs, 3 MB per 10,000: the inputs' work balances at 50,000, but
    the range after the cut first restores its snapshot (15 MB there), so the cut comes later."""
    snaps = [Boundary(c, c * 1000, f"s{c}", state_bytes=c * 300_000) for c in range(10, 100, 10)]
    through, total = estimated_work(snaps, 100_000)
    assert through == sorted(through) and total > through[-1]
    inputs_only = min(snaps, key=lambda b: abs(2 * through[snaps.index(b)] - total))
    assert inputs_only.cycle == 50
    assert [r.key for r in plan_ranges(snaps, 100_000, jobs=2)] == [(0, 60), (60, None)]
    flat = [Boundary(b.cycle, b.inputs, b.path) for b in snaps]  # nothing to restore: the work alone decides
    assert [r.key for r in plan_ranges(flat, 100_000, jobs=2)] == [(0, 50), (50, None)]


def _cost(plan: list[tuple[int, int | None]], snaps: list[Boundary], total: int) -> float:
    through, total_work = estimated_work(snaps, total)
    at = {b.cycle: (b, w) for b, w in zip(snaps, through, strict=True)}
    costs = []
    for start, end in plan:
        s, ws = at[start] if start else (None, 0.0)
        e, we = at[end] if end is not None else (None, total_work)
        costs.append(range_cost(ws, we, s, e))
    return max(costs)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40_000), st.integers(0, 30_000_000)), min_size=0, max_size=7),
       st.integers(1, 4), st.sampled_from((5_000, 20_000)))
def test_the_plan_has_the_fastest_slowest_range(steps: list[tuple[int, int]], jobs: int, min_inputs: int) -> None:
    """Against every allowed choice of cuts: none has a cheaper slowest range than the plan."""
    snaps, inputs = [], 0
    for i, (more, size) in enumerate(steps):
        inputs += more
        snaps.append(Boundary(i + 1, inputs, f"s{i}", size))
    total = inputs + 10_000
    plan = [r.key for r in plan_ranges(snaps, total, jobs, min_inputs)]
    assert len(plan) <= jobs and plan[0][0] == 0 and plan[-1][1] is None
    assert all(a[1] == b[0] for a, b in itertools.pairwise(plan))
    best = min(
        _cost(keys, snaps, total)
        for k in range(min(jobs, len(snaps) + 1))
        for chosen in itertools.combinations(snaps, k)
        if all(b.inputs - a >= min_inputs for a, b in zip([0, *(c.inputs for c in chosen)], chosen, strict=False))
        and (not chosen or total - chosen[-1].inputs >= min_inputs // 2)
        for keys in [[*zip([0, *(c.cycle for c in chosen)], [*(c.cycle for c in chosen), None], strict=True)]]
    )
    assert _cost(plan, snaps, total) <= best + 1e-9


def test_engine_hash_ignores_timer_heap_order() -> None:
    dumped = {"seen": {"s": ["1"], "t": ["0"]}, "classes": [["b", 1], ["a", 2]], "timers": [[5, 1], [3, 2], [4, 0]]}
    reordered = {**dumped, "timers": [[3, 2], [4, 0], [5, 1]], "classes": [["a", 2], ["b", 1]]}
    assert engine_hash(dumped) == engine_hash(reordered)
    assert engine_hash(dumped) == engine_hash({**dumped, "seen": {"t": ["0"], "s": ["1"]}})  # sources: order-free
    assert engine_hash(dumped) != engine_hash({**dumped, "seen": {"s": ["1"], "t": ["1"]}})
    assert engine_hash(dumped) != engine_hash({**dumped, "seen": {"s": ["1t"], "": ["0"]}})  # no run-together
    assert engine_hash(dumped) != engine_hash({**dumped, "seen": {"s": ["1"], "t": ["0", ""]}})
    # A source's ids in another order are another state: the window forgets its oldest first.
    two = {**dumped, "seen": {"s": ["1", "2"], "t": ["0"]}}
    assert engine_hash(two) != engine_hash({**two, "seen": {"s": ["2", "1"], "t": ["0"]}})


def test_a_live_engine_hashes_as_its_snapshot(snap_log: Path) -> None:
    store = SnapshotStore(snap_log / "snapshots")
    path = store.candidates()[0]
    body = store.read(path)
    assert body is not None
    with open_file_log(snap_log) as source:
        start = pick_snapshot(source, store, None).start
    assert start is not None
    assert derived_engine_hash(start.engine) == engine_hash(body["engine"])
    assert start.engine.seen, "the dump must not have cleared the engine's seen ids"


def test_parallel_verify_equals_sequential_on_a_clean_log(snap_log: Path) -> None:
    run = ParallelRun()
    report = parallel(snap_log, snap_log / "snapshots", run)
    expected = sequential(snap_log)
    assert report.ok and expected.ok
    assert (report.cycles, report.inputs, report.outputs) == (expected.cycles, expected.inputs, expected.outputs)
    assert len(run.ranges) >= 3 and run.passes == 1 and not run.dropped
    assert run.totals()[0] == report.cycles


@contextmanager
def another_thread() -> Iterator[None]:
    release = threading.Event()
    thread = threading.Thread(target=release.wait)
    thread.start()
    try:
        yield
    finally:
        release.set()
        thread.join()


def test_workers_are_forked_only_from_a_single_threaded_process() -> None:
    assert threading.active_count() == 1
    assert start_method() == "fork"
    with another_thread():
        assert start_method() == "spawn"


def test_spawned_workers_verify_as_forked_ones(snap_log: Path) -> None:
    forked = parallel(snap_log, snap_log / "snapshots")
    with another_thread():
        run = ParallelRun()
        spawned = parallel(snap_log, snap_log / "snapshots", run)
    assert spawned.ok and forked.ok and len(run.ranges) >= 3
    assert (spawned.cycles, spawned.inputs, spawned.outputs) == (forked.cycles, forked.inputs, forked.outputs)


def test_a_forked_worker_reads_through_the_parents_open_log(snap_log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Forked workers inherit this patch: one that opened the log again would fail its range.
    def refuse(settings: LogSettings) -> Any:
        raise AssertionError("a forked worker opened the log again")

    monkeypatch.setattr(open_source_module, "open_source", refuse)
    assert start_method() == "fork"
    run = ParallelRun()
    report = parallel(snap_log, snap_log / "snapshots", run)
    assert report.ok and len(run.ranges) >= 3
    assert verify_parallel_module._INHERITED is None  # only while the pool was made


def test_parallel_verify_reports_the_first_divergence_in_log_order(snap_log: Path, tmp_path: Path) -> None:
    late, early = 3 * EVERY, EVERY + 2  # in different ranges; the late one is found by its range first or not
    both = with_outputs_of(snap_log, tmp_path / "both", forge_decision_in({early, late}))
    report, expected = parallel(both, both / "snapshots"), sequential(both)
    assert report.divergence is not None and report.divergence.cycle == early
    assert report.divergence == expected.divergence
    only_late = with_outputs_of(snap_log, tmp_path / "late", forge_decision_in({late}))
    report = parallel(only_late, only_late / "snapshots")
    assert report.divergence is not None and report.divergence == sequential(only_late).divergence
    assert b"node-forged" in (report.divergence.recorded or b"")


def test_a_snapshot_unlike_the_rederived_state_is_dropped(snap_log: Path, tmp_path: Path) -> None:
    snaps = tmp_path / "snaps"
    shutil.copytree(snap_log / "snapshots", snaps)
    path = snaps / f"snapshot-{2 * EVERY:012d}.json"
    body = orjson.loads(path.read_bytes())
    seen = body["engine"]["seen"]
    first = next(iter(seen))
    seen[first] = seen[first][1:]  # forget one input id: a fact the digest may not cover
    del body["content_sha256"]  # re-hashed: this tests the link between ranges, not the integrity check
    path.write_bytes(with_content_hash(orjson.dumps(body)))
    run = ParallelRun()
    report = parallel(snap_log, snaps, run)
    expected = sequential(snap_log)
    assert report.ok and (report.cycles, report.inputs) == (expected.cycles, expected.inputs)
    assert run.dropped == [str(path)] and run.passes == 2


def test_cli_verify_with_jobs(snap_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "verify", "--log", str(snap_log), "--jobs", "2", "--progress"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("ok: ") and "verify [" in out.err and "100%" in out.err
    assert main(["replay", "verify", "--log", str(snap_log), "--jobs", "0"]) == 1


def test_a_range_runs_without_cyclic_collection_and_restores_it() -> None:
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()  # left as it was found
    finally:
        gc.enable()
