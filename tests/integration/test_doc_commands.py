"""Every ``evsched`` command shown in docs/*.md runs on ``make demo``'s log and succeeds, and the ``curl`` examples
of docs/http.md answer as shown: the docs cannot drift from the code unnoticed.

A command is a line of an indented block that starts ``evsched`` (or ``$ evsched``, ``$ .venv/bin/evsched``)
followed by a subcommand. Its placeholders are filled in (``DIR`` → a copy of the demo log, ``queues.yaml`` →
the demo's config, ``APP/ASK`` → an ask the demo left pending, ``[…]`` optional parts dropped, ``…`` completed),
and it runs in a copy of the demo log of its own. A long-running command (``run`` without ``--once``, ``serve``,
``log tail --follow``) runs until it shows it works, then gets SIGTERM and must exit 0. Commands that need a
broker (``--kafka``, ``mqtt``) are covered by the Kafka and MQTT integration tests and left out here. Where the
doc shows a ``$`` command's output, its first line must be the command's. Also: the README's "A first hour"
(tests/integration/test_first_hour.py).
"""

from __future__ import annotations

import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from events.log.file import FileLog
from tests.cli import ROOT, evsched_env

DOCS = sorted((ROOT / "docs").glob("*.md"))
COMMAND = re.compile(r"^ {4,}(?:\$ )?(?:\.venv/bin/)?evsched (.*)$")
HANG_S = 300.0  # a long-running command that never shows it works is a hang, not slowness
BROKERS = ("--kafka", "--mqtt")


@dataclass(frozen=True)
class DocCommand:
    """One command line of a doc: where, its words, and the first line of output the doc shows (if any)."""

    where: str
    words: list[str]
    shown: str | None

    def needs_broker(self) -> bool:
        return any(w in BROKERS for w in self.words) or self.words[:1] == ["mqtt"]


def _subcommands() -> set[str]:
    from scheduler.cli.main import build_parser

    parser = build_parser()
    names: set[str] = set()
    for action in parser._actions:  # argparse keeps the subcommands only here
        names.update(str(name) for name in action.choices or ())
    return names


def doc_commands() -> Iterator[DocCommand]:
    """Every evsched command in docs/*.md, in order."""
    subcommands = _subcommands() | {"--version"}
    for doc in DOCS:
        lines = doc.read_text().splitlines()
        for number, line in enumerate(lines):
            found = COMMAND.match(line)
            if not found:
                continue
            text = re.sub(r"\s\[[^\[\]]*\]", "", found.group(1))  # optional parts
            words = shlex.split(text, comments=True)
            if not words or words[0] not in subcommands:
                continue  # output that starts with "evsched" (a version line), not a command
            following = lines[number + 1] if number + 1 < len(lines) else ""
            shown = following.strip() if line.lstrip().startswith("$") and following.startswith("    ") \
                and not following.lstrip().startswith("$") else None
            yield DocCommand(f"{doc.name}:{number + 1}", words, shown)


def curl_examples() -> Iterator[tuple[str, str, str | None]]:
    """docs/http.md's ``$ curl`` lines: (where, the shell pipeline, the first line of output shown)."""
    lines = (ROOT / "docs" / "http.md").read_text().splitlines()
    for number, line in enumerate(lines):
        if line.strip().startswith("$ curl "):
            following = lines[number + 1].strip() if number + 1 < len(lines) else ""
            yield f"http.md:{number + 1}", line.strip()[2:], following or None


@dataclass(frozen=True)
class Demo:
    """``make demo``'s output and the files the doc commands' placeholders stand for."""

    home: Path  # the demo's working directory: demo-data/log is the log
    log: Path
    config: Path
    other_config: Path
    inputs: Path
    pending_ask: str


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    home = tmp_path_factory.mktemp("docs")
    made = subprocess.run([sys.executable, "-m", "scheduler.cli.demo", "--dir", "demo-data"], cwd=home,
                          env=evsched_env({"PYTHONPATH": str(ROOT)}), capture_output=True, text=True, timeout=HANG_S)
    assert made.returncode == 0, made.stderr[-3000:]
    log = home / "demo-data" / "log"
    first = orjson.loads((home / "demo-data" / "workload.jsonl").read_bytes().splitlines()[0])
    assert first["type"] == "config.updated"
    config = home / "queues.yaml"
    config.write_text(first["data"]["yaml"])
    other = home / "new-queues.yaml"
    other.write_text(first["data"]["yaml"].replace("priority.offset: '100'", "priority.offset: '5'"))
    with FileLog(log, readonly=True) as opened:
        asked = [orjson.loads(r.value)["data"] for r in opened.iter_inputs()]
        decided = {(o["data"]["app_id"], o["data"]["ask_id"]) for o in map(orjson.loads, (r.value for r in
                   opened.iter_outputs())) if o["type"] == "allocation.decided"}
    pending = next(f"{a['app_id']}/{a['ask_id']}" for a in asked if "ask_id" in a and "resources" in a
                   and (a["app_id"], a["ask_id"]) not in decided)
    inputs = home / "inputs.jsonl"
    inputs.write_bytes(orjson.dumps({"type": "node.added", "data": {"node_id": "docs-node", "capacity": {
        "vcore": "16", "memory": "64Gi"}}}) + b"\n")
    return Demo(home, log, config, other, inputs, pending)


def fill(command: DocCommand, demo: Demo, log: Path) -> list[str]:
    """The command's words with its placeholders filled in for ``demo``, on the log copy ``log``."""
    stands_for = {
        "DIR": str(log), "D": str(log), "./evsched-data": str(log), "demo-data/log": str(log),
        "/srv/evsched-data": str(log),
        "queues.yaml": str(demo.config), "/config/queues.yaml": str(demo.config),
        "new-queues.yaml": str(demo.other_config),
        "inputs.jsonl": str(demo.inputs), "events.jsonl": str(demo.inputs), "more.jsonl": str(demo.inputs),
        "FILE.jsonl": str(demo.inputs),
        "APP/ASK": demo.pending_ask, "127.0.0.1:9090": "127.0.0.1:0",
    }
    words: list[str] = []
    for word in command.words:
        if word == "…":  # "the rest": where the command reads and writes
            rest = {"submit": ["--log", "DIR", "inputs.jsonl"], "run": ["--log", "DIR", "--once"]}
            assert command.words[0] in rest, f"{command.where}: no completion for '…' in {command.words}"
            words += [stands_for.get(w, w) for w in rest[command.words[0]]]
        else:
            words.append(stands_for.get(word, word))
    return words


def _long_running(words: list[str]) -> str | None:
    """What a long-running command prints once it works (None: the command ends by itself)."""
    if words[0] == "run" and "--once" not in words:
        return "accepting submissions on"
    if words[0] == "serve":
        return "evsched serve: http://"
    if words[:2] == ["log", "tail"] and "--follow" in words:
        return "{"
    return None


def _run_until(argv: list[str], cwd: Path, signal_text: str, then: object = None) -> tuple[int, str, str]:
    """Start ``argv``, wait until its output shows ``signal_text``, call ``then(output)``, SIGTERM it."""
    proc = subprocess.Popen(argv, cwd=cwd, env=evsched_env({"PYTHONPATH": str(ROOT)}), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + HANG_S
    try:
        while signal_text not in seen:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, f"{argv} exited {proc.returncode} before showing it works:\n{seen}"
            assert time.monotonic() < deadline, f"{argv} never showed {signal_text!r}:\n{seen}"
            seen += line
        if callable(then):
            then(seen)
    finally:
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=HANG_S)
    return proc.returncode, seen + rest, ""


def _curl(pipeline: str, base: str) -> str:
    done = subprocess.run(["sh", "-c", pipeline.replace("localhost:9090", base)], capture_output=True, text=True,
                          timeout=HANG_S)
    assert done.returncode == 0, f"{pipeline}: {done.stderr}"
    return done.stdout


COMMANDS = list(doc_commands())


def test_the_docs_show_commands_to_run() -> None:
    assert len(COMMANDS) >= 30
    assert {c.where.split(":")[0] for c in COMMANDS} >= {"operations.md", "troubleshooting.md", "http.md"}
    assert sum(c.needs_broker() for c in COMMANDS) < len(COMMANDS) // 3


@pytest.mark.parametrize("command", [c for c in COMMANDS if not c.needs_broker()], ids=lambda c: c.where)
def test_a_doc_command_runs_on_the_demo_log(command: DocCommand, demo: Demo, tmp_path: Path) -> None:
    log = tmp_path / "log"
    shutil.copytree(demo.log, log, ignore=shutil.ignore_patterns("LOCK", "submit.sock"))
    words = fill(command, demo, log)
    argv = [sys.executable, "-m", "scheduler", *words]
    awaited = _long_running(words)
    if awaited is not None:
        check_curl = None
        if words[0] == "serve":
            def check_curl(output: str) -> None:
                base = re.search(r"evsched serve: http://([^/\s]+)/", output)
                assert base, output
                for where, pipeline, shown in curl_examples():
                    got = _curl(pipeline, base.group(1))
                    if shown is not None and not shown.startswith("{\"ready\""):  # /readyz: the service's, not serve's
                        assert got.splitlines()[0].strip() == shown, f"{where}: {pipeline}\n{got[:2000]}"
        code, output, _ = _run_until(argv, demo.home, awaited, check_curl)
        assert code == 0, f"{command.where}: {shlex.join(words)} exited {code}:\n{output[-3000:]}"
        return
    done = subprocess.run(argv, cwd=demo.home, env=evsched_env({"PYTHONPATH": str(ROOT)}), capture_output=True,
                          text=True, timeout=HANG_S)
    assert done.returncode == 0, f"{command.where}: {shlex.join(words)} exited {done.returncode}:\n" \
                                 f"{done.stderr[-3000:]}"
    if command.shown is not None and words != ["--version"]:
        assert done.stdout.splitlines()[0].strip() == command.shown, f"{command.where}:\n{done.stdout[:2000]}"
