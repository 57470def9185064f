"""What the operator's commands refuse or warn of before touching a log: ``submit`` all or nothing with every
bad line listed, its warnings about apps and queues the log does not know, a missing log named in one line
(``serve``, ``replay``, ``log cat``), ``run`` saying it creates a new log, and property values ``config check``
and ``config apply`` refuse (scheduler.config.properties)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.cli import ONE_TEAM_CONFIG, evsched

CONFIG = ONE_TEAM_CONFIG


def _write(path: Path, lines: list[Any]) -> Path:
    path.write_bytes(b"".join((line if isinstance(line, bytes) else orjson.dumps(line)) + b"\n" for line in lines))
    return path


def _said(stderr: str) -> list[str]:
    """stderr's lines but a stale build's notice that it runs the pure-Python core (docs/native.md)."""
    return [line for line in stderr.splitlines() if "running the pure-Python core" not in line]


def _inputs(log: str) -> list[str]:
    return evsched("log", "cat", "--inputs", "--log", log, text=True).stdout.splitlines()


def test_submit_appends_nothing_when_any_line_is_bad_and_lists_every_bad_line(tmp_path: Path) -> None:
    log = str(tmp_path / "log")
    evsched("submit", "--log", log, str(_write(tmp_path / "ok.jsonl", [
        {"type": "node.added", "data": {"node_id": "n0", "capacity": {}}}])))
    bad = _write(tmp_path / "bad.jsonl", [
        {"type": "node.added", "data": {"node_id": "n1", "capacity": {"memory": "8Gi"}}},
        b"{not json",
        {"type": "ask.added", "data": {"app_id": "a", "ask_id": "k", "resources": {"memory": "8Gx"}}},
        {"type": "node.added", "data": {"node_id": "n2", "capacity": {}}},
    ])
    proc = evsched("submit", "--log", log, "--config", str(_config(tmp_path)), str(bad), check=False, text=True)
    assert proc.returncode == 1
    assert "line 2: not valid JSON" in proc.stderr
    assert "line 3: invalid: resources: " in proc.stderr and "invalid quantity '8Gx' for 'memory'" in proc.stderr
    assert "nothing appended: 2 of 4 events are invalid" in proc.stderr
    assert len(_inputs(log)) == 1  # neither the good lines nor --config's config went in


def _config(tmp_path: Path, text: str = CONFIG) -> Path:
    path = tmp_path / "queues.yaml"
    path.write_text(text)
    return path


def test_submit_warns_of_apps_and_queues_the_log_does_not_know(tmp_path: Path) -> None:
    log = str(tmp_path / "log")
    first = _write(tmp_path / "first.jsonl", [
        {"type": "app.added", "data": {"app_id": "known", "queue": "root.team", "user": "u"}}])
    clean = evsched("submit", "--log", log, "--config", str(_config(tmp_path)), str(first), text=True)
    assert "warning" not in clean.stderr
    later = _write(tmp_path / "later.jsonl", [
        {"type": "ask.added", "data": {"app_id": "known", "ask_id": "k1", "resources": {"vcore": 1}}},
        {"type": "ask.added", "data": {"app_id": "typo", "ask_id": "k2", "resources": {"vcore": 1}}},
        {"type": "app.added", "data": {"app_id": "b", "queue": "root.teem", "user": "u"}},
        {"type": "app.added", "data": {"app_id": "c", "queue": "root", "user": "u"}},
        {"type": "ask.added", "data": {"app_id": "b", "ask_id": "k3", "resources": {"vcore": 1}}},
        {"type": "app.removed", "data": {"app_id": "known"}},
        {"type": "allocation.released", "data": {"app_id": "known", "ask_id": "k1"}},
    ])
    proc = evsched("submit", "--log", log, str(later), text=True)
    warnings = [line for line in proc.stderr.splitlines() if "warning:" in line]
    assert warnings == [
        "evsched submit: warning: line 2: app 'typo' (partition default) is neither in the log nor added earlier in "
        "this file: the service will reject this unknown-app",
        "evsched submit: warning: line 3: queue 'root.teem' is not in the config the log holds: the service will "
        "reject the app unknown-queue",
        "evsched submit: warning: line 4: queue 'root' is a parent queue: the service will reject the app not-a-leaf",
        "evsched submit: warning: line 7: app 'known' (partition default) is neither in the log nor added earlier in "
        "this file: the service will reject this unknown-app",
    ]
    assert "appended 7 events" in proc.stderr  # warnings, not refusals: the events go in
    assert len(_inputs(log)) == 9
    # The service rejects them as warned, and explain --ask points at those rejections.
    evsched("run", "--log", log, "--once")
    unknown = evsched("replay", "explain", "--ask", "b/k3", "--log", log, check=False, text=True)
    assert unknown.returncode == 1
    said = _said(unknown.stderr)
    assert said[0] == "evsched replay explain: unknown ask b/k3: application b does not exist; rejected:", said
    assert said[1].startswith("  cycle 1: app.added ") and "was rejected unknown-queue: queue 'root.teem'" in said[1]
    assert said[2].startswith("  cycle 1: ask.added ") and "was rejected unknown-app: " in said[2]
    assert len(said) == 3


def test_a_missing_log_is_one_line_and_exit_1(tmp_path: Path) -> None:
    missing = str(tmp_path / "nosuch")
    empty = tmp_path / "empty"
    empty.mkdir()
    for args in (["serve", "--http", "127.0.0.1:0"], ["replay", "verify"], ["replay", "explain", "--ask", "a/b"],
                 ["log", "cat"], ["audit"]):
        for where, why in ((missing, "the directory does not exist"),
                           (str(empty), "the directory holds no inputs/ or outputs/")):
            proc = evsched(*args, "--log", where, check=False, text=True)
            assert proc.returncode == 1, (args, proc.stderr)
            assert len(_said(proc.stderr)) == 1, (args, proc.stderr)
            assert f"no log at {where}: {why}" in proc.stderr, (args, proc.stderr)


def test_run_says_when_it_creates_a_new_log(tmp_path: Path) -> None:
    typo = tmp_path / "typo"
    proc = evsched("run", "--log", str(typo), "--once", text=True)
    assert f"no log at {typo}: creating a new, empty one" in proc.stderr
    again = evsched("run", "--log", str(typo), "--once", text=True)
    assert "creating a new" not in again.stderr


@pytest.mark.parametrize(("properties", "reason"), [
    ("{priority.offset: five}", "queue root.a: priority.offset: 'five' is not a whole number"),
    ("{priority.offset: '2147483648'}", "priority.offset: '2147483648' is not a whole number from -2147483648"),
    ("{priority.policy: strict}", "queue root.a: priority.policy: 'strict' is not default or fence"),
    ("{application.sort.policy: FIFO}", "application.sort.policy: 'FIFO' is not fifo | fair | stateaware"),
    ("{application.sort.priority: off}", "application.sort.priority: 'off' is not enabled or disabled"),
    ("{preemption.policy: never}", "preemption.policy: 'never' is not default | fence | disabled"),
    ("{preemption.delay: 10}", "preemption.delay: '10' is not a positive Go duration"),
    ("{preemption.delay: '-1s'}", "preemption.delay: '-1s' is not a positive Go duration"),
])
def test_config_check_and_apply_refuse_a_property_value_yunikorn_would_replace(
    tmp_path: Path, properties: str, reason: str
) -> None:
    config = _config(tmp_path, "partitions: [{name: default, queues: [{name: root, queues: "
                               f"[{{name: a, properties: {properties}}}]}}]}}]\n")
    checked = evsched("config", "check", str(config), check=False, text=True)
    assert checked.returncode == 1 and reason in checked.stderr, checked.stderr
    applied = evsched("config", "apply", str(config), "--log", str(tmp_path / "log"), check=False, text=True)
    assert applied.returncode == 1 and reason in applied.stderr
    assert not (tmp_path / "log").exists()  # refused before the log was opened


def test_config_check_names_the_template_and_warns_of_unknown_keys(tmp_path: Path) -> None:
    config = _config(tmp_path, """\
partitions:
  - name: default
    queues:
      - name: root
        properties: {priority.offset: "3", colour: blue}
        queues:
          - name: parent
            parent: true
            childtemplate: {properties: {application.sort.policy: fastest}}
          - name: ok
            properties: {priority.policy: Fence, preemption.delay: 1m30s, application.sort.priority: Disabled}
""")
    checked = evsched("config", "check", str(config), check=False, text=True)
    assert checked.returncode == 1
    assert _said(checked.stderr) == [
        "  - queue root.parent (child template): application.sort.policy: 'fastest' is not fifo | fair | stateaware "
        "(lower case)",
        "  - warning: queue root: property 'colour' is not one evsched reads (known: application.sort.policy, "
        "application.sort.priority, application.unschedasks.backoff, application.unschedasks.backoff.delay, "
        "evsched.resource.types.max, preemption.delay, preemption.policy, priority.offset, priority.policy, "
        "quota.preemption.delay)",
    ]
    fixed = _config(tmp_path, config.read_text().replace("fastest", "fair"))
    ok = evsched("config", "check", str(fixed), text=True)
    assert ok.stdout.splitlines()[0].startswith("warning: queue root: property 'colour'")
    assert ok.stdout.splitlines()[1].startswith("config OK: 1 partitions, 3 queues")
