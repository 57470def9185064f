"""Feeding a running service on the embedded log: ``evsched submit`` and ``config apply`` from other
processes while ``evsched run`` holds the log (events.log.file_submit), and the decision they lead to."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import orjson

from events.log.file_submit import SOCKET_NAME
from tests.cli import ONE_TEAM_CONFIG, ROOT, evsched, evsched_argv, evsched_env
from tests.procs import stop_group

CONFIG = ONE_TEAM_CONFIG
HANG_S = 120.0  # a service that never decides is a hang, not slowness: the wait below ends on progress


def _write(path: Path, events: list[dict[str, object]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    return path


def _decided(log: str) -> list[str]:
    out = evsched("log", "cat", "--outputs", "--type", "allocation.decided", "--log", log, text=True).stdout
    return [json.loads(line)["data"]["ask_id"] for line in out.splitlines()]


def test_submit_feeds_a_running_service_through_its_socket(tmp_path: Path) -> None:
    log = str(tmp_path / "log")
    config = tmp_path / "queues.yaml"
    config.write_text(CONFIG)
    stderr = (tmp_path / "run.err").open("wb")
    proc = subprocess.Popen(evsched_argv("run", "--log", log, "--config", str(config)), cwd=ROOT,
                            env=evsched_env(), stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
    try:
        socket_file = tmp_path / "log" / SOCKET_NAME
        deadline = time.monotonic() + HANG_S
        while not socket_file.exists():
            assert proc.poll() is None, (tmp_path / "run.err").read_text()
            assert time.monotonic() < deadline, "the service never listened for submissions"
            time.sleep(0.05)
        assert socket_file.stat().st_mode & 0o777 == 0o600
        cluster = _write(tmp_path / "cluster.jsonl", [
            {"type": "node.added", "data": {"node_id": "n1", "capacity": {"vcore": "8", "memory": "16Gi"}}},
            {"type": "app.added", "data": {"app_id": "a", "queue": "root.team", "user": "u"}},
            {"type": "ask.added", "data": {"app_id": "a", "ask_id": "k1", "resources": {"vcore": "500m"}}},
        ])
        fed = evsched("submit", "--log", log, str(cluster), text=True)
        assert "appended 3 events" in fed.stderr
        while "k1" not in _decided(log):  # the running service reads what the socket appended and decides
            assert proc.poll() is None, (tmp_path / "run.err").read_text()
            assert time.monotonic() < deadline, "the submitted ask was never decided"
            time.sleep(0.2)
        # The operator's channel goes the same way: a config change, then an ask in the new queue.
        (tmp_path / "more.yaml").write_text(CONFIG + "          - name: later\n")
        evsched("config", "apply", str(tmp_path / "more.yaml"), "--log", log)
        later = _write(tmp_path / "later.jsonl", [
            {"type": "app.added", "data": {"app_id": "b", "queue": "root.later", "user": "u"}},
            {"type": "ask.added", "data": {"app_id": "b", "ask_id": "k2", "resources": {"memory": "1Gi"}}},
        ])
        evsched("submit", "--log", log, str(later))
        while "k2" not in _decided(log):
            assert proc.poll() is None, (tmp_path / "run.err").read_text()
            assert time.monotonic() < deadline, "the ask submitted after config apply was never decided"
            time.sleep(0.2)
    finally:
        stop_group(proc)
        stderr.close()
    assert proc.returncode == 0
    run_err = (tmp_path / "run.err").read_text()
    assert "no log at" in run_err and "creating a new, empty one" in run_err
    assert "accepting submissions on" in run_err
    assert not (tmp_path / "log" / SOCKET_NAME).exists()  # removed on exit
    inputs = evsched("log", "cat", "--inputs", "--type", "ask.added", "--log", log, text=True).stdout
    assert [json.loads(line)["data"]["resources"] for line in inputs.splitlines()] == [
        {"vcore": "500m"}, {"memory": "1Gi"}]  # the log keeps what was submitted; decoding normalises
    assert evsched("replay", "verify", "--log", log, check=False).returncode == 0


def test_submit_without_a_listening_holder_says_who_holds_the_log(tmp_path: Path) -> None:
    from events.log.file import FileLog

    log = tmp_path / "log"
    events = _write(tmp_path / "e.jsonl", [{"type": "node.added", "data": {"node_id": "n1", "capacity": {}}}])
    with FileLog(log):  # this test process holds the lock and listens on no socket
        proc = subprocess.run(evsched_argv("submit", "--log", str(log), str(events)), cwd=ROOT, env=evsched_env(),
                              capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    assert "is in use by another process" in proc.stderr and "which accepts no submissions" in proc.stderr
