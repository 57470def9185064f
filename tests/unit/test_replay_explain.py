"""``replay explain`` of decisions: golden explanations (fence, offsets, disabled priority sorting,
binpacking) that must name the deciding factor, the step check, big clusters and the CLI.

Goldens live in tests/golden/explain/<name>.json (sorted keys). Regenerate with
``EVSCHED_UPDATE_GOLDEN=1 pytest tests/unit/test_replay_explain.py`` and review the diff:
the assertions below check the deciding factor independently of the golden text.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from events.log.file import FileLog
from replay.explain.decision import ExplainError, Explanation
from replay.explain.from_log import explain_from_log
from replay.explain.text import render_explanation
from scheduler.cli.explain import add_explain
from tests.explain_logdrive import LogDriver
from tests.sim import app, ask, node, root_queues

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "explain"

OFFSETS = root_queues("""
          - name: a
            properties: {priority.offset: "5"}
            queues:
              - name: a1
                properties: {priority.offset: "3"}
          - name: b
""")

FENCE = root_queues("""
          - name: critical
            properties: {priority.policy: fence, priority.offset: "100"}
          - name: prod
          - name: sandbox
            properties: {priority.policy: fence, priority.offset: "1"}
""")

DISABLED = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        properties: {application.sort.priority: disabled}
        queues:
          - name: a
          - name: b
"""

BINPACKING = """
partitions:
  - name: default
    nodesortpolicy: {type: binpacking}
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: default
"""


def offsets(drv: LogDriver) -> None:
    # One ask P0 in a1: leaf 3 = offset 3 + 0, parent a 8 = offset 5 + 3 — beats b's P6.
    drv.submit(node("n1"), app("x", "root.a.a1"), app("y", "root.b"), ask("x", "x1", priority=0),
               ask("y", "y1", priority=6))
    drv.cycle()


def fence(drv: LogDriver) -> None:
    # critical is fenced at 100 (its P0 ask is ignored); sandbox is fenced at 1 (its P1000 ask is capped).
    drv.submit(node("n1", vcore=8000, memory=8000), app("c", "root.critical"), app("p", "root.prod"),
               app("s", "root.sandbox"), ask("s", "s1", priority=1000), ask("p", "p1", priority=50),
               ask("c", "c1", priority=0))
    drv.cycle()


def disabled(drv: LogDriver) -> None:
    # Cycle 1 gives a 2 vcore; in cycle 2 b (nothing allocated) goes first despite a's P10.
    drv.submit(node("n1", vcore=16000, memory=16000), app("a0", "root.a"), ask("a0", "big", vcore=2000, memory=2000))
    drv.cycle()
    drv.submit(app("a1", "root.a"), app("b1", "root.b"), ask("a1", "hi", priority=10), ask("b1", "lo", priority=1))
    drv.cycle()


def binpacking(drv: LogDriver) -> None:
    # Usage: n3 87.5% (too full for the ask), n4 75% (fits exactly), n2 50%, n1 idle.
    drv.submit(
        node("n1"), node("n2", occupied={"vcore": 2000, "memory": 2000}),
        node("n3", occupied={"vcore": 3500, "memory": 3500}), node("n4", occupied={"vcore": 3000, "memory": 3000}),
        app("x"), ask("x", "x1"),
    )
    drv.cycle()


SCENARIOS: dict[str, tuple[str, Callable[[LogDriver], None], str]] = {
    "offsets": (OFFSETS, offsets, "default-1-1"),
    "fence": (FENCE, fence, "default-1-1"),
    "priority_disabled": (DISABLED, disabled, "default-2-1"),
    "binpacking": (BINPACKING, binpacking, "default-1-1"),
}


def build(tmp_path: Path, name: str) -> Path:
    """Write the scenario's log; returns its directory."""
    config, play, _ = SCENARIOS[name]
    directory = tmp_path / name
    with LogDriver(directory, config) as drv:
        play(drv)
    return directory


def explain(directory: Path, decision_id: str) -> Explanation:
    with FileLog(directory, readonly=True) as log:
        return explain_from_log(log, decision_id)


def check_golden(name: str, explanation: Explanation) -> dict[str, Any]:
    """Compare with (or, with EVSCHED_UPDATE_GOLDEN=1, rewrite) the golden file."""
    text = json.dumps(explanation.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    path = GOLDEN / f"{name}.json"
    if os.environ.get("EVSCHED_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.read_text(encoding="utf-8") == text, f"{path} differs; regenerate with EVSCHED_UPDATE_GOLDEN=1"
    result: dict[str, Any] = json.loads(text)
    return result


def entry(level: dict[str, Any], queue: str) -> dict[str, Any]:
    found: dict[str, Any] = next(e for e in level["candidates"] if e["queue"] == queue)
    return found


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_golden_explanations_are_verified(tmp_path: Path, name: str) -> None:
    e = explain(build(tmp_path, name), SCENARIOS[name][2])
    assert e.verified and not e.problems, e.summary
    assert e.chosen == e.engine_choice
    assert e.recorded is not None and e.recorded["node_id"] == e.chosen["node_id"]  # type: ignore[index]
    check_golden(name, e)


def test_offsets_add_up_the_tree(tmp_path: Path) -> None:
    e = check_golden("offsets", explain(build(tmp_path, "offsets"), "default-1-1"))
    root = e["queue_walk"][0]
    assert root["chosen"] == "root.a"
    a = entry(root, "root.a")
    assert (a["priority"], a["raw_priority"], a["offset"], a["priority_formula"]) == (8, 3, 5, "8 = offset 5 + 3")
    assert entry(root, "root.b")["priority"] == 6
    assert root["deciding_factor"] == "higher priority (8 vs 6)"
    assert entry(e["queue_walk"][1], "root.a.a1")["priority_formula"] == "3 = offset 3 + 0"
    assert "queue root.a (priority 8 = offset 5 + 3) was first under root" in e["summary"]
    assert e["summary"].startswith("Ask x1 of app x went to node n1 because")


def test_fence_shows_the_offset_not_the_asks(tmp_path: Path) -> None:
    e = check_golden("fence", explain(build(tmp_path, "fence"), "default-1-1"))
    root = e["queue_walk"][0]
    assert [c["queue"] for c in root["candidates"]] == ["root.critical", "root.prod", "root.sandbox"]
    critical, sandbox = entry(root, "root.critical"), entry(root, "root.sandbox")
    assert critical["fence"] and critical["priority"] == 100 and critical["raw_priority"] == 0
    assert sandbox["fence"] and (sandbox["priority"], sandbox["raw_priority"]) == (1, 1000)
    assert "fenced at offset 100" in e["summary"] and "higher priority (100 vs 50)" in e["summary"]
    assert e["chosen"]["queue"] == "root.critical"


def test_disabled_priority_sorting_puts_fair_share_first(tmp_path: Path) -> None:
    e = check_golden("priority_disabled", explain(build(tmp_path, "priority_disabled"), "default-2-1"))
    root = e["queue_walk"][0]
    assert root["priority_sorting"] is False and root["chosen"] == "root.b"
    assert entry(root, "root.a")["priority"] > entry(root, "root.b")["priority"]
    assert entry(root, "root.b")["fair_share"] == [] and entry(root, "root.a")["fair_share"] == [2000.0, 2000.0]
    assert "despite lower priority (1 vs 10)" in root["deciding_factor"]
    assert "application.sort.priority is disabled" in e["summary"]
    assert e["leaf"]["priority_sorting"] is False


def test_binpacking_picks_the_most_used_node_that_fits(tmp_path: Path) -> None:
    e = check_golden("binpacking", explain(build(tmp_path, "binpacking"), "default-1-1"))
    nodes = e["nodes"]
    assert nodes["policy"] == "binpacking"
    first = nodes["nodes"][0]
    assert first["node_id"] == "n3" and first["outcome"] == "passed over"
    assert "vcore short: needs 1 core, has 500m" in first["why_not"]["message"]
    chosen = next(n for n in nodes["nodes"] if n["outcome"] == "chosen")
    assert chosen["node_id"] == e["chosen"]["node_id"] == "n4"
    # Independently: among the nodes with room for 1000/1000, n4 has the highest usage (75%).
    usage = {"n1": 0.0, "n2": 0.5, "n3": 0.875, "n4": 0.75}
    room = {"n1": 4000, "n2": 2000, "n3": 500, "n4": 1000}
    assert max((n for n in usage if room[n] >= 1000), key=usage.__getitem__) == "n4"
    assert chosen["usage_score"] == 0.75
    assert "n4 was the most used node that fit (score 0.75)" in e["summary"]


def test_big_cluster_shows_first_nodes_and_the_winner(tmp_path: Path) -> None:
    with LogDriver(tmp_path / "big") as drv:
        # 30 idle but small nodes sort first (fair: least used first); z is a little used and fits.
        drv.submit(*[node(f"s{i:02d}", 1000, 1000) for i in range(30)], node("z", 8000, 8000, occupied={"vcore": 1000}),
                   app("x"), ask("x", "x1", vcore=2000))
        drv.cycle()
    e = explain(tmp_path / "big", "default-1-1")
    assert e.verified
    assert e.nodes is not None
    listed = [n["node_id"] for n in e.nodes["nodes"]]
    assert listed[:10] == [f"s{i:02d}" for i in range(10)] and listed[-1] == "z"
    assert e.nodes["passed_over_not_shown"] == 20 and e.nodes["winner_rank"] == 31
    assert e.nodes["passed_over_reasons"] == {"does not fit: vcore short": 20}
    assert "the 30 nodes before it in order did not fit" in e.summary
    assert "… 20 more passed over" in render_explanation(e)


def test_skipped_queue_and_app_are_explained(tmp_path: Path) -> None:
    # root.a sorts first (P9) but its only ask is too big for any node, so the walk moves on.
    config = OFFSETS.replace('properties: {priority.offset: "5"}', "")
    with LogDriver(tmp_path / "skip", config) as drv:
        drv.submit(node("n1"), node("n2"), app("x", "root.a.a1"), app("y", "root.b"),
                   ask("x", "huge", vcore=6000, priority=9), ask("y", "y1", priority=1))
        drv.cycle()
    e = explain(tmp_path / "skip", "default-1-1")
    assert e.verified and e.chosen is not None and e.chosen["ask_id"] == "y1"
    a = entry(e.queue_walk[0], "root.a")
    assert a["outcome"] == "skipped" and "the most on any node is 4 cores" in a["why_not"]["message"]
    assert "root.a sorted earlier but could not allocate" in e.summary


def test_later_steps_see_earlier_allocations(tmp_path: Path) -> None:
    directory = build(tmp_path, "fence")
    e = explain(directory, "default-1-2")
    assert e.verified and e.chosen is not None and e.chosen["queue"] == "root.prod"
    assert [c["queue"] for c in e.queue_walk[0]["candidates"]] == ["root.prod", "root.sandbox"]


def test_unknown_decisions_raise(tmp_path: Path) -> None:
    directory = build(tmp_path, "offsets")
    for bad, text in (("default-1-9", "recorded decisions: default-1-1, default-1-2"), ("default-7-1", "no cycle 7"),
                      ("nonsense", "not a decision id")):
        with pytest.raises(ExplainError, match=text):
            explain(directory, bad)


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="evsched replay")
    add_explain(parser.add_subparsers())
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_text_json_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = str(build(tmp_path, "offsets"))
    code, out, _ = run_cli(["explain", "default-1-1", "--log", directory], capsys)
    assert code == 0 and "Summary:" in out and "8 = offset 5 + 3" in out and "— CHOSEN" in out
    code, out, _ = run_cli(["explain", "default-1-1", "--log", directory, "--json"], capsys)
    assert code == 0 and json.loads(out)["chosen"]["queue"] == "root.a.a1"
    code, _, err = run_cli(["explain", "default-1-5", "--log", directory], capsys)
    assert code == 1 and "unknown decision default-1-5" in err
    code, _, err = run_cli(["explain", "--log", directory], capsys)
    assert code == 1 and "either a DECISION_ID or --ask" in err
    code, _, err = run_cli(["explain", "default-1-1", "--log", str(tmp_path / "missing")], capsys)
    assert code == 1 and "does not exist" in err
