"""``replay explain --ask``: why an ask is still pending (queue max, no node, stateaware,
maxapplications, required node, missing resource type) and the CLI around it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from events.log.file import FileLog
from events.times import format_time
from replay.explain.from_log import explain_ask_from_log
from replay.explain.pending import PendingExplanation
from replay.explain.pending_list import pending_in_queue
from replay.explain.text import render_pending
from replay.state_at import engine_at
from scheduler.cli.explain import add_explain
from tests.explain_logdrive import MS, LogDriver
from tests.sim import app, ask, node, root_queues

CONFIG = root_queues("""
          - name: capped
            resources: {max: {vcore: 2}}
          - name: gated
            properties: {application.sort.policy: stateaware}
          - name: limited
            maxapplications: 1
          - name: open
""")


def pending(tmp_path: Path, *events: dict[str, Any], target: tuple[str, str]) -> PendingExplanation:
    directory = tmp_path / "log"
    with LogDriver(directory, CONFIG) as drv:
        drv.submit(*events)
        drv.cycle()
    with FileLog(directory, readonly=True) as log:
        return explain_ask_from_log(log, *target)


def messages(p: PendingExplanation) -> list[str]:
    return [r["message"] for r in p.reasons]


def test_pending_because_of_queue_max(tmp_path: Path) -> None:
    p = pending(tmp_path, node("n1"), app("x", "root.capped"), ask("x", "k1", vcore=1500), ask("x", "k2", vcore=1000),
                target=("x", "k2"))
    assert p.status == "pending" and not p.allocatable_now
    assert messages(p) == ["queue root.capped max vcore 2 cores: 1500m allocated + 1 core asked exceeds it"]
    assert p.reasons[0]["rule"] == "docs/semantics.md#queue-max"
    assert "is still pending after cycle 1 because queue root.capped max vcore 2 cores" in p.summary


def test_pending_because_no_node_fits(tmp_path: Path) -> None:
    p = pending(tmp_path, node("n1"), node("n2", vcore=6000, memory=2000), app("x", "root.open"),
                ask("x", "big", vcore=5000, memory=3000), target=("x", "big"))
    # 9000 memory and 10000 vcore in the cluster, so root's max holds it; no one node does.
    assert messages(p) == [
        "each type is available somewhere (most on any one node: memory 4 kB, vcore 6 cores) "
        "but no single schedulable node has all"
    ]
    p = pending(tmp_path / "2", node("n1"), node("n2"), app("x", "root.open"), ask("x", "big", vcore=5000),
                target=("x", "big"))
    assert messages(p) == ["no schedulable node has vcore 5 cores available (the most on any node is 4 cores)"]
    assert p.reasons[0]["rule"]== "docs/semantics.md#choosing-a-node"


def test_pending_because_of_stateaware(tmp_path: Path) -> None:
    p = pending(tmp_path, node("n1"), app("first", "root.gated"), app("second", "root.gated"),
                ask("first", "f1"), ask("second", "s1"), target=("second", "s1"))
    assert len(p.reasons) == 1 and p.reasons[0]["rule"] == "docs/semantics.md#stateaware"
    assert "app first is Starting, which holds back app second (Accepted)" in p.reasons[0]["message"]
    assert p.app_position is not None and p.app_position["sort_policy"] == "stateaware"


def test_pending_because_of_max_applications(tmp_path: Path) -> None:
    p = pending(tmp_path, node("n1"), app("one", "root.limited"), app("two", "root.limited"),
                ask("one", "o1"), ask("two", "t1"), target=("two", "t1"))
    assert messages(p) == ["app two is Accepted and queue root.limited already runs 1 of its maxapplications 1"]


def test_required_node_and_missing_resource_type(tmp_path: Path) -> None:
    p = pending(tmp_path, node("n1"), node("n2", vcore=500, schedulable=False), app("x", "root.open"),
                ask("x", "pin", required_node="n2"), ask("x", "ghost", required_node="nope"), target=("x", "pin"))
    assert messages(p) == ["required node n2 could never hold it (capacity memory 4 kB, vcore 500m), "
                           "so app x's turn ends here"]
    with FileLog(tmp_path / "log", readonly=True) as log:
        assert messages(explain_ask_from_log(log, "x", "ghost")) == [
            "required node nope does not exist, so app x's turn ends here"]
    gpu = ask("x", "gpu")
    gpu["data"]["resources"]["gpu"] = 1
    p = pending(tmp_path / "2", node("n1"), app("x", "root.open"), gpu, target=("x", "gpu"))
    assert "the cluster has no resource type 'gpu'" in messages(p)[0]
    assert "no node has resource type 'gpu' at all" in messages(p)[1]


def test_unschedulable_node_that_would_fit_is_named(tmp_path: Path) -> None:
    p = pending(tmp_path, node("n1"), node("n2", vcore=8000, memory=8000, schedulable=False), app("x", "root.open"),
                ask("x", "big", vcore=6000), target=("x", "big"))
    assert messages(p) == [
        "no schedulable node has vcore 6 cores available (the most on any node is 4 cores)"
        " (unschedulable node(s) n2 would fit)"
    ]


def test_allocated_unknown_and_not_yet_consumed(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    with LogDriver(directory, CONFIG) as drv:
        drv.submit(node("n1"), app("x", "root.open"), ask("x", "k1"))
        drv.cycle()
        drv.submit(ask("x", "late"))  # no cycle runs after it
    with FileLog(directory, readonly=True) as log:
        done = explain_ask_from_log(log, "x", "k1")
        assert (done.status, done.decision_id) == ("allocated", "default-1-1")
        late = explain_ask_from_log(log, "x", "late")
        assert late.status == "unknown-ask" and "after the last cycle's inputs" in late.summary
        assert explain_ask_from_log(log, "nobody", "k").status == "unknown-app"


def test_cli_ask(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = tmp_path / "log"
    with LogDriver(directory, CONFIG) as drv:
        drv.submit(node("n1"), app("x", "root.capped"), ask("x", "k1", vcore=1500), ask("x", "k2", vcore=1000))
        drv.cycle()
    parser = argparse.ArgumentParser(prog="evsched replay")
    add_explain(parser.add_subparsers())

    def cli(*argv: str) -> tuple[int, str, str]:
        args = parser.parse_args(["explain", *argv, "--log", str(directory)])
        code: int = args.handler(args)
        out = capsys.readouterr()
        return code, out.out, out.err

    code, out, _ = cli("--ask", "x/k2")
    assert code == 0 and "Held back by:" in out and "root.capped max vcore 2 cores" in out
    code, out, _ = cli("--ask", "x/k2", "--json")
    assert code == 0 and json.loads(out)["reasons"][0]["rule"] == "docs/semantics.md#queue-max"
    code, _, err = cli("--ask", "x/zzz")
    assert code == 1 and "unknown ask x/zzz" in err
    code, _, err = cli("--ask", "nonsense")
    assert code == 1 and "APP/ASK" in err
    code, _, err = cli("default-1-1", "--ask", "x/k2")
    assert code == 1 and "either" in err


def test_pending_ask_says_where_it_is_reserved(tmp_path: Path) -> None:
    """``explain --ask`` on a reserved ask: "reserved on node X since cycle N" (YuniKorn 1.5
    ``tryAllocate``: a required-node ask that does not fit reserves its node at once)."""
    p = pending(tmp_path, node("n1"), node("n2"), app("x", "root.open"),
                ask("x", "fill", vcore=3000, required_node="n1"), app("y", "root.open"),
                ask("y", "pin", vcore=2000, required_node="n1"), target=("y", "pin"))
    assert messages(p)[0].startswith("reserved on node n1 since cycle 1")
    assert p.reasons[0]["rule"] == "docs/semantics.md#reservations"


def _quota_config(max_units: int) -> str:
    """yunikorn-1.9 with quota preemption: root.a's max, a 60 s ``quota.preemption.delay``."""
    return root_queues(f"""
        - name: a
          resources: {{max: {{vcore: {max_units}, memory: {max_units}}}}}
          properties: {{quota.preemption.delay: 60s}}
    """, partition="rules: yunikorn-1.9\npreemption: {quotapreemptionenabled: true}")


def test_pending_under_a_lowered_max_names_the_quota_preemption_under_way(tmp_path: Path) -> None:
    """yunikorn-1.9: root.a holds 8000 when its max is lowered to 4000; a5 waits on the max, and the
    reason says what frees it: quota preemption due 60 s after the change, then the two revoked
    allocations until they are released. Read from the log (re-derived), as ``explain --ask``,
    ``evsched pending`` (``engine_at`` + ``pending_in_queue``) and the Kubernetes shim read it."""
    directory = tmp_path / "log"
    tick = {"type": "node.updated", "data": {"node_id": "n1", "schedulable": True}}
    with LogDriver(directory, _quota_config(8000)) as drv:
        drv.submit(node("n1", vcore=10000, memory=10000), app("A", "root.a"),
                   *(ask("A", f"a{i}", vcore=2000, memory=2000) for i in range(1, 5)))
        drv.cycle()
        drv.submit({"type": "config.updated", "data": {"yaml": _quota_config(4000)}},
                   ask("A", "a5", vcore=2000, memory=2000))
        changed_us = drv.now_us - MS  # the config change's log time
        drv.cycle()
        with FileLog(directory, readonly=True) as log:
            before = explain_ask_from_log(log, "A", "a5")
        drv.now_us += 61_000_000
        drv.submit(tick)
        drv.cycle()
    due = format_time(changed_us + 60_000_000)
    assert [r["rule"] for r in before.reasons] == ["docs/semantics.md#queue-max",
                                                   "docs/semantics.md#yunikorn-19 (quota preemption)"]
    assert messages(before)[1] == (
        "queue root.a is over its max by memory 4 kB; quota preemption is under way, at "
        f"{due} (quota.preemption.delay 60 s) it revokes allocations until it is within its max (yunikorn-1.9)")
    with FileLog(directory, readonly=True) as log:
        after = explain_ask_from_log(log, "A", "a5")
        engine = engine_at(log, None, None)
    assert messages(after)[1:] == [
        "memory 4 kB, vcore 4 cores of queue root.a's allocations are revoked (preempted) and count against its "
        "max until the resource manager releases them"]
    assert "count against its max until the resource manager releases them" in render_pending(after)
    item = pending_in_queue(engine, "default", "root.a")["items"][0]
    assert item["allocationKey"] == "a5" and item["reasons"] == after.reasons


def test_no_quota_reason_where_nothing_frees_the_max(tmp_path: Path) -> None:
    p = pending(tmp_path, node("n1"), app("x", "root.capped"), ask("x", "k1", vcore=1500), ask("x", "k2", vcore=1000),
                target=("x", "k2"))
    assert [r["rule"] for r in p.reasons] == ["docs/semantics.md#queue-max"]
