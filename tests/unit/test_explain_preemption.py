"""``replay explain`` on preemption: a revocation names its preemptor, the fence, the
guarantees checked and every node tried; a pending ask that may preempt says what an
attempt would find."""

from __future__ import annotations

import json
from pathlib import Path

from replay.explain.from_log import explain_ask_from_log
from replay.explain.revocation import explain_revocation_from_log
from replay.reader import open_file_log
from tests.cli import evsched
from tests.explain_logdrive import LogDriver
from tests.sim import app, ask, node
from tests.unit.test_audit_preemption import CONFIG, preemption_log


def test_a_revocation_names_preemptor_guarantees_fence_and_nodes(tmp_path: Path) -> None:
    preemption_log(tmp_path / "log")
    with open_file_log(tmp_path / "log") as source:
        report = explain_revocation_from_log(source, "be", "f3")
    assert report["preemptor"] == {"app_id": "c", "ask_id": "c1", "queue": "root.crit", "priority": 1000,
                                   "resources": {"vcore": 2000, "memory": 2000}}
    assert report["fence"] == "root" and "no queue from root.crit up" in report["fence_reason"]
    queues = {q["queue"]: q for q in report["queues"]}
    assert queues["root.best"]["guaranteed"] == {"vcore": 6000, "memory": 6000}
    assert queues["root.best"]["allocated"] == {"vcore": 8000, "memory": 8000}
    assert queues["root.crit"]["guaranteed"] == {"vcore": 4000, "memory": 4000}
    assert queues["root.crit"]["role"] == "preemptor"
    assert [(n["node_id"], n["start_index"], n["victims"], n["chosen"]) for n in report["nodes_tried"]] == [
        ("n1", 0, ["be/f3"], True), ("n2", 0, ["be/f4"], False)]
    assert report["victims"][0]["decision_id"] == report["revoked"]["decision_id"]
    assert "tie broken by node id" in report["why_node"]
    summary = report["summary"]
    assert not summary.startswith("WARNING")
    for part in ("for c/c1", "Fence: root", "root.best guarantees", "Node n1 won"):
        assert part in summary


def test_the_cli_explains_a_revocation(tmp_path: Path) -> None:
    preemption_log(tmp_path / "log")
    text = evsched("replay", "explain", "--revoked", "be/f3", "--log", str(tmp_path / "log")).stdout.decode()
    assert "CHOSEN n1: start index 0" in text and "Fence: root" in text
    out = evsched("replay", "explain", "--revoked", "be/f3", "--log", str(tmp_path / "log"), "--json").stdout
    assert json.loads(out)["node"] == "n1"
    missing = evsched("replay", "explain", "--revoked", "be/f1", "--log", str(tmp_path / "log"), check=False)
    assert missing.returncode == 1 and b"no preemption of be/f1" in missing.stderr


def test_a_pending_ask_that_may_preempt_says_what_an_attempt_finds(tmp_path: Path) -> None:
    """best holds 8000 of a 6000 guarantee: one 2000 victim may go. n1 would need two (f4, f1)
    and n3 is too small, so only n2 (f2) can make room — but the delay has not passed yet."""
    with LogDriver(tmp_path / "log", CONFIG) as drv:
        drv.submit(node("n1"), node("n2"), app("be", "root.best"),
                   *(ask("be", f"f{i}", vcore=2000, memory=2000) for i in range(1, 4)),
                   node("n3", 2000, 2000), ask("be", "f4", vcore=2000, memory=2000))
        drv.cycle()
        drv.submit(node("small", 1000, 1000))
        drv.cycle()
        drv.submit(app("c", "root.crit"), ask("c", "c1", vcore=4000, memory=4000, priority=1000, preempt_other=True))
        drv.cycle()
    with open_file_log(tmp_path / "log") as source:
        pending = explain_ask_from_log(source, "c", "c1")
    assert pending.preemption is not None and pending.preemption["delay_us"] == 1_000_000
    attempt = pending.preemption["attempt"]
    assert pending.preemption["delay_passed"] is False and not pending.preemption["triggered"]
    assert attempt["node"] == "n2" and attempt["fence"] == "root"
    assert [v["ask_id"] for v in attempt["victims"]] == ["f2"]
    assert [n["node_id"] for n in attempt["nodes_tried"]] == ["n2"]
    assert "It may preempt; an attempt now (fence root) would preempt 1 on n2" in pending.summary


def test_a_revocation_under_the_19_profile_names_the_rule_behind_each_candidate(tmp_path: Path) -> None:
    """yunikorn-1.9 (docs/semantics.md#yunikorn-19): the queues carry their remaining guarantee,
    and each candidate the chosen node looked at is named with the rule that took or kept it.
    best's remaining guarantee is 6000 − 8000 = −2000 in both types, so f3 (the newest on n1)
    is taken; then best is at its guarantee (remaining 0: not below zero), so f1, behind f3 on n1,
    and every candidate of the additional pass are kept."""
    config = CONFIG.replace("  - name: default\n", "  - name: default\n    rules: yunikorn-1.9\n", 1)
    with LogDriver(tmp_path / "log", config) as drv:
        drv.submit(node("n1"), node("n2"), app("be", "root.best"),
                   *(ask("be", f"f{i}", vcore=2000, memory=2000) for i in range(1, 5)))
        drv.cycle()
        drv.submit(app("c", "root.crit"), ask("c", "c1", vcore=2000, memory=2000, priority=1000, preempt_other=True))
        drv.cycle()
        drv.now_us += 2_000_000
        drv.cycle()
    with open_file_log(tmp_path / "log") as source:
        report = explain_revocation_from_log(source, "be", "f3")
    assert report["profile"] == "yunikorn-1.9" and report["rule"] == "docs/semantics.md#yunikorn-19"
    assert report["fence"] == "root" and report["fence_by"] == "root"
    queues = {q["queue"]: q for q in report["queues"]}
    assert queues["root.best"]["remaining_guarantee"] == {"vcore": -2000, "memory": -2000}
    assert queues["root.crit"]["remaining_guarantee"] == {"vcore": 4000, "memory": 4000}
    assert [v["ask_id"] for v in report["victims"]] == ["f3"]
    rules = [(r["stage"], r["victim"], r["verdict"]) for r in report["victim_rules"]]
    assert rules == [("node", "be/f3", "taken"), ("node", "be/f1", "kept-victim-queue-within-guarantee"),
                     *(("additional", f"be/{k}", "kept-victim-queue-within-guarantee") for k in ("f4", "f2", "f1"))]
    assert all("YUNIKORN" in r["rule"] or "v1.9.0" in r["rule"] or r["verdict"].startswith("taken-last")
               or r["verdict"] == "not-reached" for r in report["victim_rules"])
    text = evsched("replay", "explain", "--revoked", "be/f3", "--log", str(tmp_path / "log")).stdout.decode()
    assert "remaining guarantee" in text and "Candidates and the rule that took or kept each (yunikorn-1.9)" in text
    assert "be/f3 [node]: taken" in text
