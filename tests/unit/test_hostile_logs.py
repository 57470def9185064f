"""Hostile logs and snapshots, round two (issue 36): forged rules versions, flipped snapshot
bytes, snapshots of another log, a deleted input directory."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from events.codec import dumps
from events.log.file import FileLog
from events.log.port import LogMismatch
from replay.reader import open_file_log
from replay.verify import verify
from replay.verify_parallel import merge_results
from scheduler.core.rules_version import RULES_VERSION
from scheduler.service.loop import Service
from scheduler.simulation.workload import WorkloadSpec
from scheduler.storage.snapshot_files import SnapshotStore, content_hash_problem, with_content_hash
from tests.contracts.log_contract import run
from tests.logdrive import copy_log, driven_file_log
from tests.unit.test_audit import audit

SPEC = WorkloadSpec(nodes=6, apps=6, asks=150, leaves=4, seed=11)


@pytest.fixture(scope="module")
def driven(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return driven_file_log(tmp_path_factory.mktemp("hostile") / "log", SPEC, 30)


def _restamped(src: Path, dst: Path, cycle: int, version: Any, *, completed_too: bool = True) -> Path:
    """A copy whose cycle ``cycle`` records another ``rules_version`` (a forger's cycle)."""

    def edit(values: list[bytes]) -> list[bytes]:
        out = []
        for value in values:
            obj = orjson.loads(value)
            if obj["type"] in ("cycle.started", "cycle.completed") and obj["data"]["cycle"] == cycle and (
                completed_too or obj["type"] == "cycle.started"
            ):
                obj["data"]["rules_version"] = version
                value = dumps(obj)
            out.append(value)
        return out

    with FileLog(src, readonly=True) as log:
        copy_log(log, dst, outputs=edit).close_sync()
    return dst


@pytest.mark.parametrize("version", [RULES_VERSION - 1, RULES_VERSION + 1, 999, 0, -5])
def test_a_cycle_stamped_with_a_forged_rules_version_is_a_divergence_and_a_violation(
    driven: Path, tmp_path: Path, version: int
) -> None:
    path = _restamped(driven, tmp_path / "forged", 6, version)
    with open_file_log(path) as source:
        report = verify(source)
    assert report.divergence is not None, report.summary_lines()
    assert report.divergence.cycle == 6 and f"rules version {version}" in report.divergence.reason
    assert report.cycles == 5
    violations = [v for v in audit(path).violations if v.rule == "rules-version"]
    assert [v.cycle for v in violations] == [6]


def test_cycle_started_and_completed_disagreeing_on_the_rules_version_is_caught(driven: Path, tmp_path: Path) -> None:
    path = _restamped(driven, tmp_path / "split", 3, RULES_VERSION - 1, completed_too=False)
    with open_file_log(path) as source:
        report = verify(source)
    assert report.divergence is not None and report.divergence.cycle == 3
    assert [v.cycle for v in audit(path).violations if v.rule == "rules-version"] == [3]


def test_the_unforged_log_is_clean(driven: Path) -> None:
    with open_file_log(driven) as source:
        assert verify(source).ok
    assert not audit(driven).violations


def test_parallel_ranges_are_joined_by_their_rules_versions() -> None:
    from replay.verify import VerifyReport
    from replay.verify_parallel import RangeResult
    from replay.verify_plan import Boundary, Range

    first = VerifyReport(cycles=4, first_rules=(1, RULES_VERSION), last_rules_version=RULES_VERSION)
    second = VerifyReport(cycles=4, first_rules=(5, RULES_VERSION - 1), last_rules_version=RULES_VERSION - 1)
    cut = Boundary(4, 10, "snapshot-000000000004.json")
    ranges = [Range(0, Boundary(0, 0), cut), Range(1, cut, None)]
    merged = merge_results(ranges, {ranges[0].key: RangeResult(first), ranges[1].key: RangeResult(second)})
    assert merged.divergence is not None and merged.divergence.cycle == 5
    assert "never go back" in merged.divergence.reason and merged.cycles == 4


# -- snapshots -----------------------------------------------------------------------


def _node(i: int) -> tuple[bytes, bytes]:
    return (f"n{i}".encode(), orjson.dumps({"id": f"n{i}", "source": "t", "type": "node.added",
                                            "data": {"node_id": f"n{i}", "capacity": {"vcore": 1000}}}))


def _serve_once(log_dir: Path, snap_dir: Path, n: int, start: int = 0) -> Service:
    async def body() -> Service:
        with FileLog(log_dir) as log:
            log.append_inputs_sync([_node(i) for i in range(start, start + n)])
            service = Service(log, snapshots=SnapshotStore(snap_dir), snapshot_every=1)
            await service.start()
            await service.run(once=True)
            return service

    return run(body())


def _restart(log_dir: Path, snap_dir: Path) -> Service:
    async def body() -> Service:
        with FileLog(log_dir) as log:
            service = Service(log, snapshots=SnapshotStore(snap_dir))
            await service.start()
            return service

    return run(body())


def test_content_hash_round_trip() -> None:
    body = orjson.dumps({"a": 1, "b": [1, 2]})
    data = with_content_hash(body)
    assert orjson.loads(data)["a"] == 1 and content_hash_problem(data) is None
    assert content_hash_problem(data.replace(b'"a":1', b'"a":3')) is not None
    assert content_hash_problem(body) is None  # no hash: older snapshots are judged as before


def test_a_flipped_bit_in_a_snapshot_is_caught_and_the_log_folded_instead(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log_dir, snap_dir = tmp_path / "log", tmp_path / "snaps"
    first = _serve_once(log_dir, snap_dir, 3)
    assert first.engine.cycle_number == 1
    (path,) = SnapshotStore(snap_dir).candidates()
    data = path.read_bytes()
    # The state digest does not cover the seen ids: a flip there went unnoticed before.
    assert b'"n2"' in data
    path.write_bytes(data.replace(b'"n2"', b'"m2"', 1))
    with caplog.at_level("WARNING"):
        second = _restart(log_dir, snap_dir)
    assert "fails its integrity check" in caplog.text
    assert second.snapshots is not None and second.snapshots.integrity_failures == 1
    assert second.engine.cycle_number == 1 and second.engine.digest() == first.engine.digest()
    assert ("t", "n2") in second.engine.seen


def test_a_snapshot_without_a_hash_is_still_used(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log_dir, snap_dir = tmp_path / "log", tmp_path / "snaps"
    _serve_once(log_dir, snap_dir, 2)
    (path,) = SnapshotStore(snap_dir).candidates()
    body = orjson.loads(path.read_bytes())
    del body["content_sha256"]
    path.write_bytes(orjson.dumps(body))
    with caplog.at_level("INFO"):
        second = _restart(log_dir, snap_dir)
    assert "has no content hash" in caplog.text and "restored cycle 1" in caplog.text
    assert second.snapshots is not None and second.snapshots.integrity_failures == 0


def test_a_snapshot_of_another_log_is_refused_plainly_and_at_once(tmp_path: Path) -> None:
    _serve_once(tmp_path / "a", tmp_path / "snaps", 3)
    _serve_once(tmp_path / "a", tmp_path / "snaps", 3, start=3)  # cycle 2: the snapshot is past b's end
    _serve_once(tmp_path / "b", tmp_path / "b-snaps", 1, start=10)
    for snap in (tmp_path / "snaps").iterdir():
        shutil.copy(snap, tmp_path / "b-snaps" / snap.name)
    with pytest.raises(LogMismatch, match="belongs to another log") as err:
        _restart(tmp_path / "b", tmp_path / "b-snaps")
    assert "lost its tail" not in str(err.value) and "--snapshot-dir" in str(err.value)
    shutil.rmtree(tmp_path / "b" / "outputs")  # an empty output log: still another log's snapshot
    with pytest.raises(LogMismatch, match="this output log is empty"):
        _restart(tmp_path / "b", tmp_path / "snaps")


def test_a_deleted_inputs_directory_is_noticed_when_a_snapshot_exists(tmp_path: Path) -> None:
    log_dir, snap_dir = tmp_path / "log", tmp_path / "snaps"
    _serve_once(log_dir, snap_dir, 3)
    shutil.rmtree(log_dir / "inputs")
    with pytest.raises(LogMismatch, match="input inputs holds 0 records, but this state consumed 3"):
        _restart(log_dir, snap_dir)


def test_verify_counts_the_cycles_it_verified_before_a_divergence(
    driven: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scheduler.cli.replay import main

    path = _restamped(driven, tmp_path / "forged", 2, 999)
    for jobs in ("1", "2"):  # in one range of parallel verify, its cycles before the divergence count too
        assert main(["replay", "verify", "--log", str(path), "--jobs", jobs]) == 2
        out = capsys.readouterr().out
        assert "(1 cycle verified before it)" in out, out
        assert "rules version 999 is unknown to this build" in out


def test_recovery_says_so_when_the_log_holds_a_cycle_of_a_forged_rules_version(
    driven: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from scheduler.service.recovery import recover

    path = _restamped(driven, tmp_path / "forged", 4, 999)

    async def body() -> list[int]:
        with FileLog(path) as log:
            return (await recover(log, source="evsched")).forged_versions

    with caplog.at_level("ERROR"):
        assert run(body()) == [4]
    assert "cycle 4: rules version 999 is unknown to this build" in caplog.text


def test_a_log_whose_first_output_was_deleted_judges_snapshots_by_the_other_checks(tmp_path: Path) -> None:
    """A decisions topic given a retention (against the docs) loses its first record: it cannot
    say who it is, so its own snapshots are used as before rather than refused."""
    from events.log.memory import MemoryLog
    from events.log.port import LogRecord

    class Retained(MemoryLog):
        retained_from = 0

        async def read_outputs(self, start: int = 0, max_records: int | None = None) -> list[LogRecord]:
            got = await super().read_outputs(max(start, self.retained_from), max_records)
            return [r for r in got if r.offset >= self.retained_from]

    async def body() -> int:
        log = Retained()
        await log.append_inputs([_node(i) for i in range(3)])
        first = Service(log, snapshots=SnapshotStore(tmp_path), snapshot_every=1)
        await first.start()
        await first.run(once=True)
        log.retained_from = 1  # cycle 1's cycle.started is gone
        second = Service(log, snapshots=SnapshotStore(tmp_path))
        await second.start()
        assert second.snapshots is not None and second.snapshots.log_identity is not None  # carried on
        return second.engine.cycle_number

    assert run(body()) == 1
