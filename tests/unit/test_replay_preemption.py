"""Replay covers preemption: ``verify`` re-derives every revocation byte for byte; ``whatif``
shows which revocations another config would remove."""

from __future__ import annotations

from pathlib import Path

from replay.reader import open_file_log
from replay.verify import verify
from replay.whatif import whatif
from scheduler.config import load_config
from tests.unit.test_audit_preemption import CONFIG, preemption_log


def test_verify_rederives_the_revocations(tmp_path: Path) -> None:
    preemption_log(tmp_path / "log")
    with open_file_log(tmp_path / "log") as source:
        report = verify(source)
    assert report.ok and report.cycles == 4


def test_whatif_lists_the_revocations_a_config_removes(tmp_path: Path) -> None:
    preemption_log(tmp_path / "log")
    line = "resources: {guaranteed: {vcore: 6, memory: 6000}}"
    protected = CONFIG.replace(line, "properties: {preemption.policy: disabled}\n            " + line)
    assert protected != CONFIG
    with open_file_log(tmp_path / "log") as source:
        report = whatif(source, load_config(protected))
    removed, added = report.preemptions()
    assert [(d["ask_id"], d["preemptor"]["ask_id"]) for d in removed] == [("f3", "c1")] and added == []
    assert "  removed: be/f3 on n1 for c/c1 (root.crit)" in report.lines()
    with open_file_log(tmp_path / "log") as source:
        same = whatif(source, load_config(CONFIG))
    assert same.preemptions() == ([], []) and len(same.revoked_after) == 1
