"""Snapshot-backed replay: state and explain from the newest trustworthy snapshot equal a full
re-derivation; untrustworthy snapshots are passed over; cycles are found by bisection."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from events.log.file import FileLog
from events.log.port import LogRecord
from replay.explain.from_log import explain_from_log
from replay.find_cycle import find_cycle, scan_for_cycle
from replay.reader import FileSource, open_file_log
from replay.snapshot_start import pick_snapshot
from replay.state_at import state_at, states_at
from scheduler.cli.replay import main
from scheduler.core.engine import Engine
from scheduler.core.recorded_cycles import recorded_cycles
from scheduler.simulation.workload import WorkloadSpec, config_yaml
from scheduler.storage.snapshot_files import SnapshotStore, with_content_hash
from tests.logdrive import copy_log, drive, workload_records, write_inputs

SPEC = WorkloadSpec(nodes=60, apps=6, asks=300, leaves=4, seed=13)
SPEC_CONFIG_WITH_BINPACKING = config_yaml(replace(SPEC, node_policy="binpacking"))
EVERY = 4


def snapshot_saver(log: FileLog, store: SnapshotStore, every: int) -> Callable[[Engine], None]:
    """``drive``'s per-cycle hook: save a snapshot every ``every`` cycles, as the service does."""

    def on_cycle(engine: Engine) -> None:
        if engine.cycle_number % every:
            return
        end = asyncio.run(log.output_end())
        completed = orjson.loads(next(log.iter_outputs(end - 1)).value)
        store.save(engine, dict(completed["data"]["inputs_through"]), end)

    return on_cycle


def snapshotted_log(path: Path, spec: WorkloadSpec) -> Path:
    """``spec``'s workload driven for 25 cycles, with a snapshot every ``EVERY`` cycles in ``path/snapshots``."""
    with FileLog(path) as log:
        write_inputs(log, workload_records(spec))
        drive(log, 25, on_cycle=snapshot_saver(log, SnapshotStore(path / "snapshots", keep=0), EVERY))
    return path


@pytest.fixture(scope="module")
def snap_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return snapshotted_log(tmp_path_factory.mktemp("snaps") / "log", SPEC)


@pytest.fixture
def source(snap_log: Path) -> Iterator[FileSource]:
    with open_file_log(snap_log) as src:
        yield src


def last_cycle(source: FileSource) -> int:
    return max(c.number for c in recorded_cycles(source.iter_outputs()))


def decision_ids(source: FileSource) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for rec in source.iter_outputs():
        obj = orjson.loads(rec.value)
        if obj["type"] == "allocation.decided":
            out.setdefault(obj["data"]["cycle"], []).append(obj["data"]["decision_id"])
    return out


def test_the_newest_snapshot_at_or_before_the_cycle_is_picked(snap_log: Path, source: FileSource) -> None:
    store = SnapshotStore(snap_log / "snapshots")
    last = last_cycle(source)
    assert last >= 3 * EVERY
    assert pick_snapshot(source, store, EVERY - 1).start is None
    for wanted, expected in ((EVERY, EVERY), (2 * EVERY - 1, EVERY), (2 * EVERY, 2 * EVERY), (None, 3 * EVERY)):
        pick = pick_snapshot(source, store, wanted)
        assert pick.start is not None and pick.cycle == expected, (wanted, pick)
        assert pick.start.recorded_digest == pick.start.engine.digest()


def test_state_from_a_snapshot_equals_full_rederivation(snap_log: Path, source: FileSource) -> None:
    store = SnapshotStore(snap_log / "snapshots")
    for cycle in range(1, last_cycle(source) + 1):
        start = pick_snapshot(source, store, cycle).start
        fast, full = state_at(source, cycle, start), state_at(source, cycle)
        assert fast == full, cycle
        assert fast.digest_matches
    # diff-style requests: several cycles from one start point
    start = pick_snapshot(source, store, EVERY + 1).start
    assert states_at(source, [0, EVERY + 1, 3 * EVERY], start) == states_at(source, [0, EVERY + 1, 3 * EVERY])


def test_explain_from_a_snapshot_equals_full_rederivation(snap_log: Path, source: FileSource) -> None:
    store = SnapshotStore(snap_log / "snapshots")
    ids = decision_ids(source)
    cycles = [c for c in (EVERY + 1, 2 * EVERY, 2 * EVERY + 1, 3 * EVERY + 1) if c in ids]
    assert len(cycles) >= 3, ids.keys()
    used: list[int] = []

    def start_for(through: int) -> Any:
        used.append(through)
        return pick_snapshot(source, store, through).start

    for cycle in cycles:
        for decision in (ids[cycle][0], ids[cycle][-1]):
            used.clear()
            fast = explain_from_log(source, decision, start_for)
            assert used == [cycle - 1]
            assert fast.to_dict() == explain_from_log(source, decision).to_dict()
            assert fast.verified


def tamper_snapshot(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    body = orjson.loads(path.read_bytes())
    change(body)
    body.pop("content_sha256", None)  # re-hashed: these test the checks after the integrity check
    path.write_bytes(with_content_hash(orjson.dumps(body)))


def test_snapshots_the_log_does_not_vouch_for_are_passed_over(snap_log: Path, tmp_path: Path) -> None:
    snaps = tmp_path / "snaps"
    shutil.copytree(snap_log / "snapshots", snaps)
    store = SnapshotStore(snaps)
    name = "snapshot-{:012d}.json"
    tamper_snapshot(snaps / name.format(3 * EVERY), lambda b: b.update(state_digest="sha256:" + "0" * 64))
    tamper_snapshot(snaps / name.format(2 * EVERY), lambda b: b.update(schema=-1))
    with open_file_log(snap_log) as source:
        pick = pick_snapshot(source, store, None)
        assert pick.cycle == EVERY and pick.candidates == 3
        # A snapshot whose output offset does not point at its cycle's completion is refused too.
        tamper_snapshot(snaps / name.format(EVERY), lambda b: b.update(output_offset=b["output_offset"] - 1))
        assert pick_snapshot(source, store, None).start is None


class CountingSource:
    """A FileSource that counts single-record reads (the bisection's cost)."""

    def __init__(self, inner: FileSource) -> None:
        self.inner = inner
        self.reads = 0
        self.input_channel_order = inner.input_channel_order

    def iter_inputs(self, start: Any = None) -> Iterator[LogRecord]:
        return self.inner.iter_inputs(start)

    def iter_outputs(self, start: int = 0) -> Iterator[LogRecord]:
        return self.inner.iter_outputs(start)

    def output_at(self, offset: int) -> LogRecord | None:
        self.reads += 1
        return self.inner.output_at(offset)

    def outputs_end(self) -> int:
        return self.inner.outputs_end()


def test_cycles_are_found_by_bisection(source: FileSource) -> None:
    counting = CountingSource(source)
    total = counting.outputs_end()
    last = last_cycle(source)
    for number in range(1, last + 1):
        counting.reads = 0
        found = find_cycle(counting, number)
        expected = scan_for_cycle(source, number)
        assert found is not None and expected is not None
        assert found.number == number and [r.offset for r in found.records] == [r.offset for r in expected.records]
        assert counting.reads <= total.bit_length() + 2, (number, counting.reads)
    assert find_cycle(counting, last + 1) is None


def test_bisection_falls_back_to_a_scan_on_a_damaged_log(snap_log: Path, tmp_path: Path) -> None:
    def scramble_ids(values: list[bytes]) -> list[bytes]:
        out = []
        for value in values:
            obj = orjson.loads(value)
            if obj["type"] not in ("cycle.started", "cycle.completed"):
                obj["id"] = "x-" + obj["id"]  # no cycle number: bisection cannot trust the ids
            out.append(orjson.dumps(obj))
        return out

    with FileLog(snap_log, readonly=True) as log:
        copy_log(log, tmp_path / "t", outputs=scramble_ids).close_sync()
    with open_file_log(tmp_path / "t") as damaged:
        for number in (1, 2 * EVERY, last_cycle(damaged)):
            found = find_cycle(damaged, number)
            assert found is not None and found.number == number


def test_cli_state_and_explain_say_when_they_rederive_everything(
    snap_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cycle = 2 * EVERY + 1
    assert main(["replay", "state", "--cycle", str(cycle), "--log", str(snap_log)]) == 0
    fast = capsys.readouterr()
    assert "re-deriving from the first cycle" not in fast.err
    assert main(["replay", "state", "--cycle", str(cycle), "--log", str(snap_log), "--no-snapshots"]) == 0
    full = capsys.readouterr()
    assert full.out == fast.out and "--no-snapshots: re-deriving from the first cycle" in full.err
    diff = ["replay", "diff", "--cycle", "0", "--cycle", str(cycle), "--log", str(snap_log), "--json"]
    assert main(diff) == 0
    fast = capsys.readouterr()
    assert "re-deriving" not in fast.err
    assert main([*diff, "--no-snapshots"]) == 0
    assert capsys.readouterr().out == fast.out
    (tmp_path / "empty").mkdir()
    argv = ["replay", "state", "--cycle", str(cycle), "--log", str(snap_log), "--snapshot-dir", str(tmp_path / "empty")]
    assert main(argv) == 0
    assert "no snapshot at or before cycle 9" in capsys.readouterr().err

    with open_file_log(snap_log) as source:
        decision = decision_ids(source)[cycle][0]
    assert main(["replay", "explain", decision, "--log", str(snap_log), "--json"]) == 0
    fast = capsys.readouterr()
    assert "re-deriving" not in fast.err
    assert main(["replay", "explain", decision, "--log", str(snap_log), "--json", "--no-snapshots"]) == 0
    assert capsys.readouterr().out == fast.out


def test_cli_pending_ask_and_whatif_from_a_snapshot_equal_full_rederivation(
    snap_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_file_log(snap_log) as source:
        last = orjson.loads(next(r for r in reversed(list(source.iter_inputs())) if b"ask.added" in r.value).value)
    ask = f"{last['data']['app_id']}/{last['data']['ask_id']}"
    outputs = []
    for extra in ([], ["--no-snapshots"]):
        assert main(["replay", "explain", "--ask", ask, "--log", str(snap_log), "--json", *extra]) == 0
        outputs.append(capsys.readouterr())
    assert outputs[0].out == outputs[1].out and "re-deriving" not in outputs[0].err

    config = tmp_path / "other.yaml"
    config.write_text(SPEC_CONFIG_WITH_BINPACKING)
    reports = []
    for extra in ([], ["--no-snapshots"]):
        argv = ["replay", "whatif", "--config", str(config), "--from-cycle", str(2 * EVERY + 2), "--json"]
        assert main([*argv, "--log", str(snap_log), *extra]) == 0
        reports.append(capsys.readouterr())
    assert reports[0].out == reports[1].out and "re-deriving" not in reports[0].err
    assert orjson.loads(reports[0].out)["from_cycle"] == 2 * EVERY + 2
