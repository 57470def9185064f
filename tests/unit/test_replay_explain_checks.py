"""``replay explain`` cross-checks and harder walks: a log that disagrees with the re-derivation
is called out, apps skipped by maxapplications or the stateaware gate are explained, and
decision ids count steps across partitions."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from events.log.file import FileLog
from replay.explain.decision import Explanation
from replay.explain.from_log import explain_from_log
from scheduler.cli.explain import add_explain
from tests.explain_logdrive import LogDriver, copy_log
from tests.sim import app, ask, node, root_queues

LIMITS = root_queues("""
          - name: limited
            maxapplications: 1
          - name: gated
            properties: {application.sort.policy: stateaware}
""")

TWO_PARTITIONS = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: default
  - name: other
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: q
"""


def explain(directory: Path, decision_id: str) -> Explanation:
    with FileLog(directory, readonly=True) as log:
        return explain_from_log(log, decision_id)


def app_entry(e: Explanation, app_id: str) -> dict[str, Any]:
    assert e.leaf is not None
    found: dict[str, Any] = next(a for a in e.leaf["apps"] if a["app_id"] == app_id)
    return found


def test_tampered_decision_is_called_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with LogDriver(tmp_path / "orig") as drv:
        drv.submit(node("n1"), node("n2"), app("x"), ask("x", "x1"))
        drv.cycle()

    def move(batches: list[list[dict[str, Any]]]) -> None:
        for o in batches[0]:
            if o["type"] == "allocation.decided":
                o["data"]["node_id"] = "n2"

    copy_log(tmp_path / "orig", tmp_path / "bad", move)
    e = explain(tmp_path / "bad", "default-1-1")
    assert not e.verified and e.chosen is not None and e.chosen["node_id"] == "n1"
    assert e.problems == [
        "the log records {'app_id': 'x', 'ask_id': 'x1', 'node_id': 'n2', 'queue': 'root.default'} but re-deriving "
        "the step gives {'app_id': 'x', 'ask_id': 'x1', 'node_id': 'n1', 'queue': 'root.default'}"
    ]
    assert e.summary.startswith("WARNING: the log records")
    parser = argparse.ArgumentParser()
    add_explain(parser.add_subparsers())
    args = parser.parse_args(["explain", "default-1-1", "--log", str(tmp_path / "bad")])
    assert args.handler(args) == 2
    assert "NOT VERIFIED" in capsys.readouterr().out


def test_app_held_by_max_applications_is_skipped(tmp_path: Path) -> None:
    with LogDriver(tmp_path / "log", LIMITS) as drv:
        drv.submit(node("n1", 16000, 16000), app("first", "root.limited"), ask("first", "f1"))
        drv.cycle()
        # second is newer than first, so a higher priority makes it sort first in the leaf.
        drv.submit(app("second", "root.limited"), ask("second", "s1", priority=9), ask("first", "f2"))
        drv.cycle()
    e = explain(tmp_path / "log", "default-2-1")
    assert e.verified and e.chosen is not None and e.chosen["app_id"] == "first"
    second = app_entry(e, "second")
    assert second["outcome"] == "skipped" and second["position"] == 1
    assert second["why_not"] == {
        "rule": "docs/semantics.md#maxapplications",
        "message": "app second is Accepted and queue root.limited already runs 1 of its maxapplications 1",
    }
    assert "second sorted earlier but could not allocate: app second is Accepted" in e.summary
    assert e.leaf is not None and e.leaf["deciding_factor"] == "every app sorted before it was skipped"


def test_stateaware_gate_is_explained(tmp_path: Path) -> None:
    with LogDriver(tmp_path / "log", LIMITS) as drv:
        drv.submit(node("n1", 16000, 16000), app("old", "root.gated"), app("new", "root.gated"),
                   ask("new", "n1", priority=5), ask("old", "o1"), ask("old", "o2"))
        drv.cycle()
    # Step 1: only the oldest Accepted app (old) may start, although new has the higher priority.
    e = explain(tmp_path / "log", "default-1-1")
    assert e.verified and e.chosen is not None and e.chosen["ask_id"] == "o1"
    assert e.leaf is not None and e.leaf["stateaware_allowed"] == ["old"]
    new = app_entry(e, "new")
    assert new["why_not"]["rule"] == "docs/semantics.md#stateaware"
    assert "only the oldest Accepted app may start" in new["why_not"]["message"]
    # Step 2: old is Starting now and holds back new.
    e = explain(tmp_path / "log", "default-1-2")
    assert e.chosen is not None and e.chosen["ask_id"] == "o2"
    assert "app old is Starting, which holds back app new" in app_entry(e, "new")["why_not"]["message"]


def test_decision_ids_count_steps_across_partitions(tmp_path: Path) -> None:
    with LogDriver(tmp_path / "log", TWO_PARTITIONS) as drv:
        other = {"partition": "other"}
        drv.submit(node("d1"), app("a"), ask("a", "a1"), ask("a", "a2"),
                   {"type": "node.added", "data": {"node_id": "o1", "capacity": {"vcore": 4000}, **other}},
                   {"type": "app.added", "data": {"app_id": "b", "queue": "root.q", "user": "u", **other}},
                   {"type": "ask.added", "data": {"app_id": "b", "ask_id": "b1", "resources": {"vcore": 1}, **other}})
        drv.cycle()
    e = explain(tmp_path / "log", "other-1-3")
    assert e.verified and e.partition == "other" and e.chosen is not None
    assert (e.chosen["app_id"], e.chosen["node_id"]) == ("b", "o1")
    assert explain(tmp_path / "log", "default-1-2").verified


def test_explains_a_cycle_re_run_after_a_crash(tmp_path: Path) -> None:
    with LogDriver(tmp_path / "orig") as drv:
        drv.submit(node("n1"), app("x"), ask("x", "x1"))
        drv.cycle()
        drv.submit(ask("x", "x2"), ask("x", "x3"))
        drv.cycle()

    def crash(batches: list[list[dict[str, Any]]]) -> None:
        batches.insert(1, [dict(o) for o in batches[1][:2]])  # cycle 2 cut short, then written again in full

    copy_log(tmp_path / "orig", tmp_path / "rerun", crash)
    e = explain(tmp_path / "rerun", "default-2-2")
    assert e.verified and e.chosen is not None and e.chosen["ask_id"] == "x3" and e.notes == []
