"""Logs with placement rules and user/group limits: ``evsched audit`` passes clean logs and flags
a decision that takes a user past a ``maxresources`` (``user-limit``); ``replay verify``,
``replay state`` and ``replay whatif`` see dynamic queues and per-user usage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replay.reader import open_file_log
from replay.whatif import whatif
from scheduler.cli.replay import main
from scheduler.config import load_config
from tests.explain_logdrive import LogDriver, copy_log
from tests.sim import ask, node
from tests.unit.test_audit import audit
from tests.unit.test_user_limits import PROPERTY_CONFIG


def _app(app_id: str, user: str, groups: list[str] | None = None) -> dict[str, Any]:
    return {"type": "app.added", "data": {"app_id": app_id, "user": user, "groups": groups or []}}


def limited_log(directory: Path) -> None:
    with LogDriver(directory, PROPERTY_CONFIG) as drv:
        drv.submit(node("n1", 20_000, 20_000), _app("a", "alice"), _app("b", "bob", ["ops"]),
                   *[ask("a", f"a{i}", vcore=1000, memory=1) for i in range(3)],
                   *[ask("b", f"b{i}", vcore=1000, memory=1) for i in range(4)])
        drv.cycle()
        drv.submit({"type": "allocation.released", "data": {"app_id": "a", "ask_id": "a0"}},
                   {"type": "config.updated", "data": {"yaml": PROPERTY_CONFIG.replace("vcore: 2}", "vcore: 3}")}},
                   ask("a", "a3", vcore=1000, memory=1))
        drv.cycle()


def test_placed_apps_and_limits_audit_clean(tmp_path: Path) -> None:
    limited_log(tmp_path / "log")
    auditor = audit(tmp_path / "log")
    assert auditor.violations == []
    assert auditor.counts["decisions"] == 2 + 3 + 2  # alice 2, bob 3 (wildcard), alice 2 more


def test_decision_past_a_user_limit_is_flagged(tmp_path: Path) -> None:
    limited_log(tmp_path / "clean")

    def plant(batches: list[list[dict[str, Any]]]) -> None:
        first = batches[0]
        alice = next(o for o in first if o["type"] == "allocation.decided" and o["data"]["app_id"] == "a")
        extra = {**alice, "id": alice["id"] + "-x",
                 "data": {**alice["data"], "ask_id": "a2", "decision_id": alice["data"]["decision_id"] + "9"}}
        first.insert(first.index(alice) + 1, extra)
        done = first[-1]
        done["data"]["decisions"] += 1

    copy_log(tmp_path / "clean", tmp_path / "bad", plant)
    auditor = audit(tmp_path / "bad")
    rules = {v.rule for v in auditor.violations}
    assert "user-limit" in rules
    message = next(v.message for v in auditor.violations if v.rule == "user-limit")
    assert "user 'alice' on root.users: vcore used 3 cores > maxresources 2 cores" in message


def test_replay_verify_state_and_whatif_with_placement_and_limits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    limited_log(tmp_path / "log")
    assert main(["replay", "verify", "--log", str(tmp_path / "log")]) == 0
    capsys.readouterr()
    assert main(["replay", "state", "--cycle", "1", "--log", str(tmp_path / "log")]) == 0
    state = json.loads(capsys.readouterr().out)
    assert {"root.users.alice", "root.users.bob"} <= set(state["queues"])
    assert state["usage"]["users"]["alice"]["root.users.alice"]["allocated"]["vcore"] == 2000
    # What if alice had had no limit of her own (the wildcard's 3 vcore and 1 app instead)?
    without = "\n".join(line for line in PROPERTY_CONFIG.split("\n") if "limit: alice" not in line)
    assert without != PROPERTY_CONFIG
    with open_file_log(tmp_path / "log") as source:
        report = whatif(source, load_config(without))
    assert report.differing() > 0
    cycle_of = {(d["ask_id"], run): d["cycle"] for run, ds in (("before", report.before), ("after", report.after))
                for d in ds}
    assert cycle_of[("a2", "before")] == 2 and cycle_of[("a2", "after")] == 1  # 3 vcore at once, not 2
