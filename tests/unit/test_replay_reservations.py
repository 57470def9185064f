"""Replay of logs with reservations: verify re-derives them, explain names them (YuniKorn 1.5 reservations)."""

from __future__ import annotations

from pathlib import Path

from events.log.file import FileLog
from replay.explain.from_log import explain_from_log
from replay.explain.text import render_explanation
from replay.reader import open_file_log
from replay.verify import verify
from tests.explain_logdrive import LogDriver, copy_log
from tests.sim import app, ask, node
from tests.unit.test_audit import CONFIG, Batches, reservation_log


def test_replay_verifies_and_explains_a_log_with_reservations(tmp_path: Path) -> None:
    """verify re-derives ask.reserved/ask.unreserved byte for byte; a change to one is caught."""
    reservation_log(tmp_path / "log")
    with open_file_log(tmp_path / "log") as source:
        assert verify(source).ok

    def move(batches: Batches) -> None:
        for o in batches[1]:
            if o["type"] == "ask.reserved":
                o["data"]["node_id"] = "n2"

    copy_log(tmp_path / "log", tmp_path / "copy", move)
    with open_file_log(tmp_path / "copy") as source:
        assert not verify(source).ok


def test_explain_a_decision_made_through_a_reservation(tmp_path: Path) -> None:
    """``replay explain`` of a reserved ask's allocation (``partition.go:tryReservedAllocate`` runs
    first): names the node it held and the cycle of the reservation, and verifies the step."""
    with LogDriver(tmp_path / "log", CONFIG) as drv:
        drv.submit(node("n1"), node("n2"), app("x", "root.open"), ask("x", "fill", vcore=3000, required_node="n1"),
                   app("y", "root.open"), ask("y", "pin", vcore=2000, required_node="n1"))
        drv.cycle()
        drv.submit({"type": "allocation.released", "data": {"app_id": "x", "ask_id": "fill"}}, ask("x", "more"))
        drv.cycle()
    with FileLog(tmp_path / "log", readonly=True) as log:
        e = explain_from_log(log, "default-2-1")
    assert e.chosen is not None and e.chosen["ask_id"] == "pin" and e.chosen["node_id"] == "n1"
    assert e.verified and e.rule == "docs/semantics.md#reservations"
    assert "reserved on node n1 since cycle 1" in e.summary
    assert "reserved on node n1 since cycle 1" in render_explanation(e)
