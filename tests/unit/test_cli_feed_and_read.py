"""Feeding the log and reading it back: ``submit --config``, simulate files, ``config apply``, ``run --config``'s
refusal on a log whose inputs precede any config, ``log cat|tail``, and SIGTERM ending the following commands."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import orjson

from events.log.file import FileLog
from events.rules_version import RULES_VERSION
from tests.cli import ROOT, evsched, evsched_argv, evsched_env

CONFIG = """\
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: team
            resources: {max: {vcore: "4", memory: 8Gi}}
"""
LINES = [
    {"type": "node.added", "data": {"node_id": "n1", "capacity": {"vcore": 8000, "memory": 16 << 30}}},
    {"type": "app.added", "data": {"app_id": "a", "queue": "root.team", "user": "u"}},
    {"type": "ask.added", "data": {"app_id": "a", "ask_id": "k1", "resources": {"vcore": 1000}}},
    {"type": "schedule"},
    {"type": "ask.added", "data": {"app_id": "a", "ask_id": "k2", "resources": {"vcore": 1000}}},
    {"type": "schedule"},
]


def _files(tmp_path: Path) -> tuple[Path, Path]:
    config, inputs = tmp_path / "queues.yaml", tmp_path / "in.jsonl"
    config.write_text(CONFIG)
    inputs.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in LINES))
    return config, inputs


def _jsonl(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


def test_submit_with_config_puts_it_first_and_skips_schedule_lines(tmp_path: Path) -> None:
    config, inputs = _files(tmp_path)
    log = str(tmp_path / "log")
    proc = evsched("submit", "--config", str(config), "--log", log, str(inputs), text=True)
    assert proc.stderr.count("skipped 2 'schedule' lines (first: line 4)") == 1
    assert "the service decides when cycles run" in proc.stderr and "appended 5 events" in proc.stderr
    types = [r["type"] for r in _jsonl(evsched("log", "cat", "--inputs", "--log", log, text=True).stdout)]
    assert types == ["config.updated", "node.added", "app.added", "ask.added", "ask.added"]
    evsched("run", "--log", log, "--once")
    decided = _jsonl(evsched("log", "cat", "--outputs", "--type", "allocation.decided", "--log", log, text=True).stdout)
    assert [d["data"]["ask_id"] for d in decided] == ["k1", "k2"]  # type: ignore[index]


def test_run_config_refuses_inputs_before_any_config_then_config_apply(tmp_path: Path) -> None:
    config, inputs = _files(tmp_path)
    log = str(tmp_path / "log")
    evsched("submit", "--log", log, str(inputs))
    refused = evsched("run", "--config", str(config), "--log", log, "--once", check=False, text=True)
    assert refused.returncode == 1
    assert "already holds 4 inputs submitted before any queue configuration" in refused.stderr
    assert f"`evsched submit --config {config} --log {log} FILE.jsonl`" in refused.stderr
    assert f"`evsched config apply {config} --log {log}`" in refused.stderr
    assert evsched("log", "cat", "--outputs", "--log", log, text=True).stdout == ""  # nothing was run
    applied = evsched("config", "apply", str(config), "--log", log, text=True)
    assert "appended 1 events" in applied.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("partitions: [{name: default, queues: [{name: root, queues: [{name: x, resources: "
                   "{guaranteed: {memory: 2Gi}, max: {memory: 1Gi}}}]}]}]\n")
    invalid = evsched("config", "apply", str(bad), "--log", log, check=False, text=True)
    assert invalid.returncode == 1 and "guaranteed resources {memory: 2 GiB} are larger than max" in invalid.stderr
    evsched("run", "--config", str(config), "--log", log, "--once")  # the same config waits in the log: no refusal
    configs = _jsonl(evsched("log", "cat", "--inputs", "--type", "config.updated", "--log", log, text=True).stdout)
    assert len(configs) == 1  # config apply's (on the admin channel), not appended again by run


def test_log_cat_and_tail_filters_and_meta(tmp_path: Path) -> None:
    config, inputs = _files(tmp_path)
    log = str(tmp_path / "log")
    evsched("submit", "--config", str(config), "--log", log, str(inputs))
    evsched("run", "--log", log, "--once")
    everything = _jsonl(evsched("log", "cat", "--log", log, text=True).stdout)
    assert everything[0]["type"] == "config.updated" and everything[-1]["type"] == "cycle.completed"
    meta = _jsonl(evsched("log", "cat", "--meta", "--type", "ask.added,node.added", "--log", log, text=True).stdout)
    assert [(m["side"], m["offset"], m["record"]["type"]) for m in meta] == [  # type: ignore[index]
        ("inputs", 0, "node.added"), ("inputs", 2, "ask.added"), ("inputs", 3, "ask.added")]  # the config: admin
    tail = _jsonl(evsched("log", "tail", "-n", "2", "--outputs", "--log", log, text=True).stdout)
    assert [t["type"] for t in tail][-1] == "cycle.completed" and len(tail) == 2
    missing = evsched("log", "cat", "--log", str(tmp_path / "nope"), check=False, text=True)
    assert missing.returncode == 1 and "evsched log:" in missing.stderr and "Traceback" not in missing.stderr


def _follow_then_term(argv: list[str]) -> tuple[int, str, str]:
    """Start a following command, wait for its first line of output, SIGTERM it; (exit code, stdout, stderr)."""
    with subprocess.Popen(evsched_argv(*argv), cwd=ROOT, env=evsched_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()  # paced by progress: it has read the log and is following
        proc.send_signal(signal.SIGTERM)
        rest, err = proc.communicate(timeout=60)
    return proc.returncode, first + rest, err


def test_sigterm_ends_log_tail_follow_and_audit_follow(tmp_path: Path) -> None:
    config, inputs = _files(tmp_path)
    log = str(tmp_path / "log")
    evsched("submit", "--config", str(config), "--log", log, str(inputs))
    evsched("run", "--log", log, "--once")
    code, out, err = _follow_then_term(["log", "tail", "--follow", "-n", "1", "--outputs", "--log", log])
    assert code == 0 and json.loads(out.splitlines()[0])["type"] == "cycle.completed", err
    assert "Traceback" not in err
    # An audit that finds a violation prints it at once; then SIGTERM ends the follow with the summary.
    at = "2026-01-01T00:00:00Z"
    through = {"admin": 1, "inputs": 4}  # submit --config's config is on the admin channel
    bogus = [
        {"type": "cycle.started", "id": "2-start", "data": {"cycle": 2, "time": at, "inputs_from": through,
                                                             "inputs_through": through,
                                                             "rules_version": RULES_VERSION}},  # as cycle 1's
        {"type": "allocation.decided", "id": "2-0",
         "data": {"decision_id": "default-2-1", "cycle": 2, "ask_id": "nope", "app_id": "a", "partition": "default",
                  "queue": "root.team", "node_id": "n1", "resources": {"vcore": 1}, "priority": 0}},
        {"type": "cycle.completed", "id": "2-1",
         "data": {"cycle": 2, "time": at, "inputs_through": through, "decisions": 1, "state_digest": "x",
                  "rules_version": RULES_VERSION}},
    ]
    with FileLog(log) as file_log:
        file_log.append_outputs_sync([orjson.dumps({"specversion": "1.0", "source": "evsched", "time": at, **r})
                                      for r in bogus])
    code, out, err = _follow_then_term(["audit", "--follow", "--json", "--log", log])
    lines = _jsonl(out)
    assert lines[0]["data"]["rule"] == "ask-not-pending", out  # type: ignore[index]
    assert code == 1 and lines[-1]["type"] == "audit.summary" and "Traceback" not in err, err


def test_an_unreadable_record_is_still_one_json_line() -> None:
    from events.log.port import LogRecord
    from scheduler.cli.logcat import render

    rec = LogRecord("inputs", 7, b"\xffnot json", 5)
    assert orjson.loads(render("inputs", rec, None, False) or b"") == {"unreadable": "\ufffdnot json"}
    wrapped = orjson.loads(render("inputs", rec, None, True) or b"")
    assert (wrapped["offset"], wrapped["record"]) == (7, {"unreadable": "\ufffdnot json"})
    assert render("inputs", rec, frozenset({"ask.added"}), False) is None


def test_sigterm_stops_run_after_the_cycle_in_hand(tmp_path: Path) -> None:
    import time

    config, inputs = _files(tmp_path)
    log = tmp_path / "log"
    evsched("submit", "--config", str(config), "--log", str(log), str(inputs))
    with subprocess.Popen(evsched_argv("run", "--log", str(log)), cwd=ROOT, env=evsched_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # paced by progress: until its first cycle is in the log
            with FileLog(log, readonly=True) as reader:
                if any(b"cycle.completed" in r.value for r in reader.iter_outputs()):
                    break
            assert proc.poll() is None, proc.communicate()[1]
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "stopped after cycle 1" in err and "Traceback" not in err, err
