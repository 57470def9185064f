"""``evsched audit``: clean driven logs pass; violations planted in tampered copies are found."""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from events.log.file import FileLog
from events.models import InputEvent
from events.rules_version import RULES_VERSION
from replay.audit.checks import Auditor
from scheduler.cli.audit import add_audit, source_inputs
from tests.explain_logdrive import LogDriver, copy_log
from tests.progress import HANG_S
from tests.sim import app, ask, node, root_queues

REPO = Path(__file__).resolve().parents[2]

CONFIG = root_queues("""
          - name: capped
            resources: {max: {vcore: 2}}
          - name: open
          - name: private
            submitacl: ' '
""")

Batches = list[list[dict[str, Any]]]


def busy_log(directory: Path) -> None:
    """Three cycles with releases, removals, rejections, a duplicate input and a config change."""
    with LogDriver(directory, CONFIG) as drv:
        drv.submit(node("n1", 2000, 2000), node("n2"), app("x", "root.open"), app("c", "root.capped"),
                   app("denied", "root.private"), ask("ghost-app", "g1"),
                   ask("x", "x1"), ask("x", "x2"), ask("x", "x3"), ask("c", "c1", vcore=1500), ask("c", "c2"))
        drv.cycle()
        drv.submit({"type": "allocation.released", "data": {"app_id": "x", "ask_id": "x1"}},
                   {"type": "node.removed", "data": {"node_id": "n2"}},
                   {"type": "ask.removed", "data": {"app_id": "c", "ask_id": "c2"}},
                   node("n3", 8000, 8000), ask("x", "x4", vcore=3000))
        drv.log.append_inputs_sync([(None, orjson.dumps(
            {"id": "in-1", "source": "test", "type": "node.added", "data": {"node_id": "dup", "capacity": {}}}
        ))])  # a duplicate (source, id): the scheduler drops it, so must the audit
        drv.cycle()
        drv.submit({"type": "config.updated", "data": {"yaml": CONFIG.replace("vcore: 2", "vcore: 3")}},
                   ask("c", "c3", vcore=1000), {"type": "app.removed", "data": {"app_id": "x"}}, ask("c", "c4"))
        drv.cycle()


def audit(directory: Path) -> Auditor:
    with FileLog(directory, readonly=True) as log:
        auditor = Auditor(source_inputs(log))
        for rec in log.iter_outputs():
            auditor.feed(rec)
    return auditor


def rules(auditor: Auditor) -> list[str]:
    return [v.rule for v in auditor.violations]


def tampered(tmp_path: Path, edit: Callable[[Batches], None]) -> Auditor:
    busy_log(tmp_path / "orig")
    copy_log(tmp_path / "orig", tmp_path / "copy", edit)
    return audit(tmp_path / "copy")


def decisions(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in batch if o["type"] == "allocation.decided"]


def test_clean_log_passes(tmp_path: Path) -> None:
    busy_log(tmp_path / "log")
    auditor = audit(tmp_path / "log")
    assert auditor.violations == []
    s = auditor.summary()["data"]
    assert s["clean"] and s["cycles"] == 3 and s["decisions"] >= 6 and s["open_cycle"] is None


def test_rerun_cycle_after_a_crash_is_clean(tmp_path: Path) -> None:
    def rerun(batches: Batches) -> None:
        batches.insert(1, [dict(o) for o in batches[1][:3]])  # cycle 2 cut short, then re-run in full

    auditor = tampered(tmp_path, rerun)
    assert auditor.violations == [] and auditor.summary()["data"]["reruns"] == 1


def test_decision_for_an_ask_never_added(tmp_path: Path) -> None:
    def ghost(batches: Batches) -> None:
        decisions(batches[0])[0]["data"]["ask_id"] = "never-added"

    auditor = tampered(tmp_path, ghost)
    assert rules(auditor) == ["ask-not-pending"]
    v = auditor.violations[0]
    assert v.cycle == 1 and v.decision_id == "default-1-1" and "was never added" in v.message
    assert v.as_event()["type"] == "audit.violation"


def test_node_over_capacity(tmp_path: Path) -> None:
    def crowd(batches: Batches) -> None:
        for d in decisions(batches[0]):
            d["data"]["node_id"] = "n1"  # n1 holds 2 vcore; cycle 1 places more than that

    auditor = tampered(tmp_path, crowd)
    assert "node-capacity" in rules(auditor) and set(rules(auditor)) == {"node-capacity"}
    assert "puts node n1 over capacity: vcore allocated + occupied" in auditor.violations[0].message
    assert "> capacity 2 cores" in auditor.violations[0].message


def test_queue_over_max(tmp_path: Path) -> None:
    def overfill(batches: Batches) -> None:
        batch = batches[0]
        extra = dict(decisions(batch)[-1])
        n = len(decisions(batch)) + 1
        extra["id"] = "1-planted"
        extra["data"] = {**extra["data"], "decision_id": f"default-1-{n}", "app_id": "c", "ask_id": "c2",
                         "queue": "root.capped", "node_id": "n2", "resources": {"memory": 1000, "vcore": 1000}}
        batch.insert(len(batch) - 1, extra)
        batch[-1]["data"]["decisions"] += 1

    auditor = tampered(tmp_path, overfill)
    assert rules(auditor) == ["queue-max"]
    assert "queue root.capped over its max: vcore allocated 2500m > 2 cores" in auditor.violations[0].message


def test_duplicate_decision_id_with_other_content(tmp_path: Path) -> None:
    def duplicate(batches: Batches) -> None:
        batch = batches[0]
        first = decisions(batch)[0]
        copy = {**first, "id": "1-copy", "data": {**first["data"], "node_id": "n2"}}
        same = {**first, "id": "1-same"}
        batch.insert(batch.index(first) + 1, copy)
        batch.insert(batch.index(first) + 1, same)  # an identical copy is dropped silently

    auditor = tampered(tmp_path, duplicate)
    assert rules(auditor) == ["decision-id-duplicate"]
    assert "node_id: 'n1' vs 'n2'" in auditor.violations[0].message or "node_id" in auditor.violations[0].message


def drop_cycle_two(batches: Batches) -> None:
    del batches[1]


def test_missing_cycle(tmp_path: Path) -> None:
    auditor = tampered(tmp_path, drop_cycle_two)
    assert rules(auditor) == ["cycle-sequence", "inputs-contiguous"]
    assert "cycle 3 follows cycle 1: cycle 2 is missing" in auditor.violations[0].message


def test_unterminated_and_mislabelled_cycles(tmp_path: Path) -> None:
    def cut(batches: Batches) -> None:
        batches[0].pop()  # cycle 1 never completes
        decisions(batches[1])[0]["data"]["cycle"] = 7

    auditor = tampered(tmp_path, cut)
    assert rules(auditor) == ["cycle-sequence", "cycle-number"]
    assert "cycle 1 started but never completed" in auditor.violations[0].message


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="evsched")
    add_audit(parser.add_subparsers())
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code, capsys.readouterr().out


def test_cli_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    busy_log(tmp_path / "clean")
    code, out = run_cli(["audit", "--log", str(tmp_path / "clean")], capsys)
    assert code == 0 and "clean" in out
    copy_log(tmp_path / "clean", tmp_path / "bad", drop_cycle_two)
    code, out = run_cli(["audit", "--log", str(tmp_path / "bad"), "--json"], capsys)
    # The driver's config travels on the inputs channel of a log before the admin channel: reported apart.
    lines = [json.loads(line) for line in out.splitlines()]
    assert "audit.admin_off_channel" in [line["type"] for line in lines]
    lines = [line for line in lines if line["type"] != "audit.admin_off_channel"]
    assert code == 1 and lines[0]["type"] == "audit.violation" and lines[0]["data"]["rule"] == "cycle-sequence"
    assert lines[-1]["type"] == "audit.summary" and lines[-1]["data"]["clean"] is False
    code, out = run_cli(["audit", "--log", str(tmp_path / "missing")], capsys)
    assert code == 1


def _cycle_two(position: dict[str, int]) -> list[bytes]:
    """Output records of a cycle 2 that allocates an ask nobody added."""
    at = "1970-01-01T00:00:01Z"
    records = [
        {"type": "cycle.started", "id": "2-start",
         "data": {"cycle": 2, "time": at, "inputs_from": position, "inputs_through": position,
                  "rules_version": RULES_VERSION}},  # as cycle 1's: going back is a violation of its own
        {"type": "allocation.decided", "id": "2-0",
         "data": {"decision_id": "default-2-1", "cycle": 2, "ask_id": "nope", "app_id": "x", "partition": "default",
                  "queue": "root.open", "node_id": "n1", "resources": {"vcore": 1}, "priority": 0}},
        {"type": "cycle.completed", "id": "2-1",
         "data": {"cycle": 2, "time": at, "inputs_through": position, "decisions": 1, "state_digest": "x",
                  "rules_version": RULES_VERSION}},
    ]
    return [orjson.dumps({"specversion": "1.0", "source": "evsched", "time": at, **r}) for r in records]


def test_cli_follow_reports_new_violations_until_sigint(tmp_path: Path) -> None:
    directory = tmp_path / "live"
    # SIGINT's default handler, set explicitly: a child of a job started in the background
    # without job control (as `cmd &` in a script) inherits SIGINT ignored, and Python then
    # installs no KeyboardInterrupt handler — the follower would never end (CI run busy3 hung).
    script = (
        "import argparse, signal, sys\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from scheduler.cli.audit import add_audit\n"
        "p = argparse.ArgumentParser(); add_audit(p.add_subparsers())\n"
        "a = p.parse_args(sys.argv[1:]); sys.exit(a.handler(a))\n"
    )
    argv = [sys.executable, "-c", script, "audit", "--log", str(directory), "--follow", "--json"]
    lines: queue.Queue[str] = queue.Queue()
    with LogDriver(directory, CONFIG) as drv:
        drv.submit(node("n1"), app("x", "root.open"), ask("x", "x1"))
        drv.cycle()
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                              env=env) as proc:
            assert proc.stdout is not None and proc.stderr is not None
            stdout, stderr = proc.stdout, proc.stderr
            errors: queue.Queue[str] = queue.Queue()

            def read(stream: Any, into: queue.Queue[str]) -> None:
                for line in stream:
                    into.put(line)

            readers = [threading.Thread(target=read, args=(s, q), daemon=True)
                       for s, q in ((stdout, lines), (stderr, errors))]
            for reader in readers:
                reader.start()
            err = ""
            try:
                # Cycle 2 comes once the follower says it has read the log as it was (its first,
                # clean cycle) and follows it: observed, not assumed after a fixed time.
                while "following the log" not in err:
                    err += errors.get(timeout=HANG_S)
                drv.log.append_outputs_sync(_cycle_two({"inputs": drv.position}))
                violation = json.loads(lines.get(timeout=HANG_S))
                while violation["type"] == "audit.admin_off_channel":  # the driver's config (old-style log)
                    violation = json.loads(lines.get(timeout=HANG_S))
                assert violation["data"]["rule"] == "ask-not-pending" and violation["data"]["cycle"] == 2
            finally:
                proc.send_signal(signal.SIGINT)
                try:
                    code = proc.wait(timeout=HANG_S)
                except subprocess.TimeoutExpired:
                    proc.kill()  # else Popen's exit would wait for it for ever
                    raise
                for reader in readers:
                    reader.join(timeout=5)
                while not errors.empty():
                    err += errors.get()
    summary = json.loads(lines.get(timeout=HANG_S))
    assert code == 1 and summary["type"] == "audit.summary" and summary["data"]["cycles"] == 2, err


def test_audit_does_not_import_the_scheduler_core() -> None:
    code = (
        "import sys, scheduler.cli.audit\n"
        "bad = [m for m in sys.modules if m.startswith(('scheduler.core', 'projections'))]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.booleans(), st.integers(0, 5)), max_size=30))
@example([("a", False, 0), ("a", True, 1), ("b", True, 3)])  # junk heads "a" (appended at 5 s): y, then x
def test_audit_merges_channels_as_the_scheduler_does(spec: list[tuple[str, bool, int]]) -> None:
    # Unreadable records (no event time) keep their place at their append time in both
    # merges; an audit that dropped them first would interleave the other records differently.
    from events.log.port import LogRecord
    from replay.audit.checks import merged_inputs
    from scheduler.core.logged_cycle import decode_records, merge

    offsets = {"a": 0, "b": 0, "c": 0}
    records = []
    for n, (channel, readable, t) in enumerate(spec):
        line = {"type": "node.removed", "id": f"e{n}", "source": "s", "data": {"node_id": "x"},
                "time": f"1970-01-01T00:00:0{t}Z"}
        value = orjson.dumps(line) if readable else b"not json"
        records.append(LogRecord(channel, offsets[channel], value, (5 - t) * 1_000_000))
        offsets[channel] += 1
    order = ["a", "b", "c"]
    expected = [d.result.id for d in merge(decode_records(records), order) if isinstance(d.result, InputEvent)]
    assert [e.id for e in merged_inputs(records, order)] == expected


def reservation_log(directory: Path) -> None:
    """A required-node ask reserves n1 (YuniKorn 1.5 tryAllocate), others go elsewhere; the
    reservation ends when its ask is removed; a gpu ask is held back by a zero max."""
    config = CONFIG + "          - name: nogpu\n            resources: {max: {vcore: 8, nvidia.com/gpu: 0}}\n"
    gpu = ask("g", "g1")
    gpu["data"]["resources"]["nvidia.com/gpu"] = 1
    gpu_node = node("n3", 4000, 4000)
    gpu_node["data"]["capacity"]["nvidia.com/gpu"] = 2
    with LogDriver(directory, config) as drv:
        drv.submit(node("n1"), node("n2"), node("cordoned", schedulable=False), app("x", "root.open"),
                   ask("x", "fill", vcore=3000, required_node="n1"), ask("x", "ds", required_node="cordoned"))
        drv.cycle()
        drv.submit(app("y", "root.open"), ask("y", "pin", vcore=2000, required_node="n1"),
                   app("z", "root.open"), ask("z", "s1"), gpu_node, app("g", "root.nogpu"), gpu)
        drv.cycle()
        drv.submit({"type": "ask.removed", "data": {"app_id": "y", "ask_id": "pin"}}, ask("z", "s2"))
        drv.cycle()


def test_reservations_and_required_nodes_audit_clean(tmp_path: Path) -> None:
    reservation_log(tmp_path / "log")
    with FileLog(tmp_path / "log", readonly=True) as log:
        kinds = [orjson.loads(r.value)["type"] for r in log.iter_outputs()]
    assert "ask.reserved" in kinds and "ask.unreserved" in kinds
    assert audit(tmp_path / "log").violations == []


def test_allocation_on_a_node_reserved_for_another_ask(tmp_path: Path) -> None:
    reservation_log(tmp_path / "orig")

    def steal(batches: Batches) -> None:
        for d in decisions(batches[1]):
            if d["data"]["ask_id"] == "s1":
                d["data"]["node_id"] = "n1"  # n1 has room for it but is held for y/pin

    copy_log(tmp_path / "orig", tmp_path / "copy", steal)
    auditor = audit(tmp_path / "copy")
    assert rules(auditor) == ["node-reserved"]
    assert "reserved for y/pin" in auditor.violations[0].message


def test_a_reservation_that_outlives_its_ask(tmp_path: Path) -> None:
    reservation_log(tmp_path / "orig")

    def keep(batches: Batches) -> None:
        batches[2][:] = [o for o in batches[2] if o["type"] != "ask.unreserved"]

    copy_log(tmp_path / "orig", tmp_path / "copy", keep)
    assert rules(audit(tmp_path / "copy")) == ["reservation-orphaned"]


def test_allocation_beyond_a_zero_max(tmp_path: Path) -> None:
    reservation_log(tmp_path / "orig")

    def plant(batches: Batches) -> None:
        batch = batches[1]
        extra = dict(decisions(batch)[-1])
        n = sum(1 for d in decisions(batch)) + 1
        extra["id"] = "2-planted"
        extra["data"] = {**extra["data"], "decision_id": f"default-2-{n}", "app_id": "g", "ask_id": "g1",
                         "queue": "root.nogpu", "node_id": "n3",
                         "resources": {"memory": 1000, "nvidia.com/gpu": 1, "vcore": 1000}}
        batch.insert(len(batch) - 1, extra)
        batch[-1]["data"]["decisions"] += 1

    copy_log(tmp_path / "orig", tmp_path / "copy", plant)
    auditor = audit(tmp_path / "copy")
    assert rules(auditor) == ["queue-max"]
    assert "root.nogpu over its max: nvidia.com/gpu allocated 1 > 0" in auditor.violations[0].message

