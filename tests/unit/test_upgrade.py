"""Upgrade: a log written by the evsched before the rules version (tests/fixtures/upgrade-v0,
made by commit 9056fd4) is recovered by this build from its recorded outputs, the service
goes on deciding under the current rules, and ``replay verify`` says which cycles it
re-derived and which it could only check."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from events.log.file import FileLog
from events.resources import fits
from replay.reader import open_file_log
from replay.rederive import Rederiver
from replay.verify import verify
from replay.whatif import whatif
from scheduler.core import cycle as cycle_module
from scheduler.core.engine import Engine
from scheduler.core.reservations import Step
from scheduler.core.rules_version import RULES_VERSION
from scheduler.service.recovery import recover
from scheduler.storage.snapshot_files import SnapshotStore, with_content_hash
from tests.logdrive import copy_log

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "upgrade-v0"
OLD_CYCLES = 8

Allocations = set[tuple[str, str, str]]  # (app, ask, node)


@pytest.fixture
def old_log(tmp_path: Path) -> Path:
    """A copy of the fixture log (tests never write to the fixture)."""
    dst = tmp_path / "log"
    shutil.copytree(FIXTURE / "log", dst)
    return dst


def _outputs(directory: Path) -> list[dict[str, Any]]:
    log = FileLog(directory)
    try:
        return [orjson.loads(r.value) for r in log.iter_outputs()]
    finally:
        log.close_sync()


def _inputs(directory: Path) -> list[dict[str, Any]]:
    log = FileLog(directory)
    try:
        return [orjson.loads(r.value) for r in log.iter_inputs()]
    finally:
        log.close_sync()


def recorded_allocations(directory: Path) -> Allocations:
    """What the resource manager runs after the log: every recorded decision, less recorded
    revocations and the releases the scheduler accepted."""
    outs = _outputs(directory)
    refused = {o["data"]["input_id"] for o in outs if o["type"] == "input.rejected"}
    held: dict[tuple[str, str], str] = {}
    for o in outs:
        d = o["data"]
        if o["type"] == "allocation.decided":
            held[(d["app_id"], d["ask_id"])] = d["node_id"]
        elif o["type"] == "allocation.revoked":
            held.pop((d["app_id"], d["ask_id"]), None)
    for i in _inputs(directory):
        if i["type"] == "allocation.released" and i["id"] not in refused:
            held.pop((i["data"]["app_id"], i["data"]["ask_id"]), None)
    return {(app, ask, node) for (app, ask), node in held.items()}


def engine_allocations(engine: Engine) -> Allocations:
    return {(al.app_id, al.ask_id, al.node_id) for part in engine.state.partitions.values()
            for app in part.apps.values() for al in app.allocations.values()}


def _recovered(directory: Path, snapshots: SnapshotStore | None = None) -> Any:
    log = FileLog(directory)
    try:
        return asyncio.run(recover(log, source="evsched", snapshots=snapshots))
    finally:
        log.close_sync()


def _evsched(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "scheduler", *args], cwd=ROOT, capture_output=True, input=stdin,
                          timeout=120, check=False)


def test_fixture_is_a_log_without_rules_versions(old_log: Path) -> None:
    outs = _outputs(old_log)
    cycles = [o for o in outs if o["type"] == "cycle.completed"]
    assert len(cycles) == OLD_CYCLES
    assert all("rules_version" not in o["data"] for o in outs if o["type"].startswith("cycle."))
    assert sum(o["type"] == "allocation.decided" for o in outs) >= 7
    assert recorded_allocations(old_log)  # something is running when the upgrade happens


NEW_INPUTS = [
    {"id": "up-n5", "source": "rm", "type": "node.added",
     "data": {"node_id": "n5", "capacity": {"vcore": 8000, "memory": 16000000000}}},
    {"id": "up-b2-3", "source": "rm", "type": "ask.added",
     "data": {"app_id": "b2", "ask_id": "b2-3", "resources": {"vcore": 3000, "memory": 1000000000}}},
    {"id": "up-rel-p1-1", "source": "rm", "type": "allocation.released", "data": {"app_id": "p1", "ask_id": "p1-1"}},
    {"id": "up-s1-3", "source": "rm", "type": "ask.added",
     "data": {"app_id": "s1", "ask_id": "s1-3", "resources": {"vcore": 1000, "memory": 1000000000}}},
]


def test_upgrade_resumes_from_the_record_and_verify_tells_both_parts(old_log: Path, tmp_path: Path) -> None:
    recorded = recorded_allocations(old_log)
    recovered = _recovered(old_log)
    assert recovered.digest_mismatches == []
    assert recovered.engine.cycle_number == OLD_CYCLES
    assert engine_allocations(recovered.engine) == recorded
    # The recovery before issue 18 re-ran the cycles: rules version 2 decides this log otherwise
    # (e.g. s1-pin goes to its unschedulable required node), so it would resume with other work.
    assert _rederived_allocations(old_log) != recorded

    # The service itself: new inputs, then `evsched run` of this build over the old log.
    feed = tmp_path / "new.jsonl"
    feed.write_bytes(b"".join(orjson.dumps(i) + b"\n" for i in NEW_INPUTS))
    assert _evsched("submit", "--log", str(old_log), str(feed)).returncode == 0
    run = _evsched("run", "--log", str(old_log), "--once", "--snapshot-every", "1")
    assert run.returncode == 0, run.stderr.decode()
    outs = _outputs(old_log)
    new = [o for o in outs if o["type"] == "cycle.started" and o["data"]["cycle"] > OLD_CYCLES]
    assert new and all(o["data"]["rules_version"] == RULES_VERSION for o in new)
    decided = [o["data"] for o in outs if o["type"] == "allocation.decided" and o["data"]["cycle"] > OLD_CYCLES]
    # New asks (and old pending ones the new node makes room for) are decided; that they are what
    # the current rules decide is verify's job below (it re-derives these cycles byte for byte).
    assert {("b2", "b2-3"), ("s1", "s1-3")} <= {(d["app_id"], d["ask_id"]) for d in decided}
    # Old allocations stay where the record put them; p1-1 was released by the new inputs.
    after = recorded_allocations(old_log)
    assert after == (recorded - {("p1", "p1-1", "n2")}) | {(d["app_id"], d["ask_id"], d["node_id"]) for d in decided}
    assert engine_allocations(_recovered(old_log).engine) == after

    # verify: the old cycles are checked, not re-derived; the new ones are re-derived.
    with open_file_log(old_log) as source:
        report = verify(source)
    assert report.ok, report.summary_lines()
    assert dict(report.checked) == {1: OLD_CYCLES}
    assert dict(report.rederived) == {RULES_VERSION: len(new)}
    cli = _evsched("replay", "verify", "--log", str(old_log), "--jobs", "1")
    text = cli.stdout.decode()
    assert cli.returncode == 0, text + cli.stderr.decode()
    assert f"checked only, not re-derived: {OLD_CYCLES} cycles made under rules version 1" in text
    assert f"re-derived under rules version {RULES_VERSION} (this build): {len(new)} cycles" in text


def test_snapshots_survive_a_rules_version(old_log: Path) -> None:
    """A snapshot written under another rules version (same schema) is still used."""
    store = SnapshotStore(old_log / "snapshots")
    assert _evsched("run", "--log", str(old_log), "--once", "--snapshot-every", "1").returncode == 0
    path = store.candidates()[0]
    body = orjson.loads(path.read_bytes())
    del body["content_sha256"]
    body["rules_version"] = RULES_VERSION + 1
    path.write_bytes(with_content_hash(orjson.dumps(body)))  # as that build would have written it
    again = _recovered(old_log, SnapshotStore(old_log / "snapshots"))
    assert again.from_snapshot == body["cycle"]


def _move_s1_1_to_n3(values: list[bytes]) -> list[bytes]:
    out = []
    for raw in values:
        obj = orjson.loads(raw)
        if obj["type"] == "allocation.decided" and obj["data"]["ask_id"] == "s1-1":
            obj["data"]["node_id"] = "n3"  # unschedulable
        out.append(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS))
    return out


def _folded_digests(directory: Path) -> dict[int, str]:
    with open_file_log(directory) as source:
        return {step.number: str(step.folded_digest)
                for step in Rederiver(source, rederive_versions=frozenset()).steps()}


def test_a_tampered_old_cycle_fails_the_check(old_log: Path, tmp_path: Path) -> None:
    """Checking is not a pass-through: an old decision moved onto an unschedulable node is
    caught by its digest, and, when the digests were rewritten to match, by the invariants."""
    log = FileLog(old_log)
    copy_log(log, tmp_path / "bad", outputs=_move_s1_1_to_n3).close_sync()
    log.close_sync()
    with open_file_log(tmp_path / "bad") as source:
        report = verify(source)
    assert report.divergence is not None and report.divergence.cycle == 4
    assert "recorded state_digest" in report.divergence.reason

    digests = _folded_digests(tmp_path / "bad")

    def consistent(values: list[bytes]) -> list[bytes]:
        out = []
        for raw in _move_s1_1_to_n3(values):
            obj = orjson.loads(raw)
            if obj["type"] == "cycle.completed":
                obj["data"]["state_digest"] = digests[obj["data"]["cycle"]]
            out.append(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS))
        return out

    log = FileLog(old_log)
    copy_log(log, tmp_path / "worse", outputs=consistent).close_sync()
    log.close_sync()
    with open_file_log(tmp_path / "worse") as source:
        report = verify(source)
    assert report.divergence is not None and report.divergence.cycle == 4
    assert "(node-unschedulable)" in report.divergence.reason


def _reversed_place(part: Any, app: Any, ask: Any, memo: Any, now_us: int) -> Any:
    """Other scheduling rules: the fitting node with the highest id wins (not the least used)."""
    if not cycle_module.fits_queue_headroom(part, app.queue, ask.resources):
        return None
    for node_id in sorted(part.nodes, reverse=True):
        node = part.nodes[node_id]
        if node_id in part.index and fits(ask.resources, node.available()):
            return Step(app, ask, node)
    return ORIGINAL_PLACE(part, app, ask, memo, now_us)  # fits nowhere: reserve as the rules say


ORIGINAL_PLACE = cycle_module.place


@pytest.fixture
def other_rules(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(cycle_module, "place", _reversed_place)
    yield


def _rederived_allocations(directory: Path) -> Allocations:
    """The recovery before this version: re-run every cycle with the current code."""
    with open_file_log(directory) as source:
        rederiver = Rederiver(source, rederive_versions=None)
        for _ in rederiver.steps():
            pass
        assert rederiver.engine is not None
        return engine_allocations(rederiver.engine)


def test_under_other_rules_fact_recovery_keeps_the_record_and_rederiving_would_not(
        old_log: Path, other_rules: None) -> None:
    """With rules that decide differently, recovery still resumes with the recorded
    allocations; the old recovery (re-deriving) would have moved running work."""
    recorded = recorded_allocations(old_log)
    assert engine_allocations(_recovered(old_log).engine) == recorded
    rederived = _rederived_allocations(old_log)
    assert rederived != recorded
    with open_file_log(old_log) as source:
        preview = whatif(source, None)
    assert preview.differing() > 0 and dict(preview.recorded_versions) == {1: OLD_CYCLES}


def test_whatif_rules_current_previews_an_old_log(old_log: Path) -> None:
    """The upgrade preview on the command line: the old log's cycles re-run under this build's
    rules with the recorded configs, compared with the recorded decisions."""
    out = _evsched("replay", "whatif", "--rules", "current", "--log", str(old_log), "--json")
    assert out.returncode == 0, out.stderr.decode()
    body = orjson.loads(out.stdout)
    assert body["rules"] == {"current": RULES_VERSION, "recorded": {"1": OLD_CYCLES}}
    assert body["config"] == "recorded" and body["cycles"] == OLD_CYCLES
    recorded = sum(o["type"] == "allocation.decided" for o in _outputs(old_log))
    assert body["decisions"]["before"] == recorded
    bare = _evsched("replay", "whatif", "--log", str(old_log))
    assert bare.returncode == 1 and b"--rules current" in bare.stderr
