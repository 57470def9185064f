"""The operator's surface for real: ``evsched run --http`` and ``evsched serve`` over HTTP, and the page in Chromium.

The service runs as a subprocess on the embedded log with a workload that leaves asks
pending; the tests wait on what the server says (its URL line, ``/readyz``), never on time.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from events.log.file import FileLog
from replay.history import RECENT_DECISIONS
from scheduler.simulation.workload import WorkloadSpec, config_yaml, events, numbered
from tests.browser import chromium_page
from tests.cli import submit_as_cluster

ROOT = Path(__file__).resolve().parents[2]
SPEC = WorkloadSpec(nodes=20, apps=8, asks=400, departments=2, leaves=4, seed=3)
URL_LINE = re.compile(rb"serving HTTP on (http://\S+)")


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _json(url: str) -> Any:
    status, body = _get(url)
    assert status == 200, (url, status, body[:500])
    return orjson.loads(body)


def _workload_file(tmp: Path) -> Path:
    def evs() -> Iterator[dict[str, Any]]:
        yield {"type": "config.updated", "data": {"yaml": config_yaml(SPEC)}}
        yield from events(SPEC)

    path = tmp / "inputs.jsonl"
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in numbered(evs())))
    return path


def _evsched(*args: str) -> list[str]:
    return [sys.executable, "-m", "scheduler", *args]


def _wait_for_url(proc: subprocess.Popen[bytes], log_path: Path) -> str:
    while True:
        found = URL_LINE.search(log_path.read_bytes())
        if found:
            return found.group(1).decode()
        if proc.poll() is not None:
            pytest.fail(f"the process exited {proc.returncode} before serving: {log_path.read_text()[-2000:]}")
        time.sleep(0.05)


def _wait_ready(base: str, proc: subprocess.Popen[bytes], log_path: Path) -> dict[str, Any]:
    while True:
        status, body = _get(f"{base}/readyz")
        if status == 200:
            ready: dict[str, Any] = orjson.loads(body)
            return ready
        assert status == 503, body
        if proc.poll() is not None:
            pytest.fail(f"the service exited {proc.returncode}: {log_path.read_text()[-2000:]}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, subprocess.Popen[bytes]]]:
    """A running ``evsched run --http 127.0.0.1:0`` that has consumed the whole workload."""
    tmp = tmp_path_factory.mktemp("http-live")
    log_dir = tmp / "log"
    submit_as_cluster(["--log", str(log_dir)], _workload_file(tmp))
    log_path = tmp / "service.log"
    with open(log_path, "wb") as err:
        proc = subprocess.Popen(_evsched("run", "--log", str(log_dir), "--http", "127.0.0.1:0", "--ready-max-lag",
                                         "0"), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
    try:
        base = _wait_for_url(proc, log_path)
        _wait_ready(base, proc, log_path)
        yield base, log_dir, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)


def test_probes_and_metrics_of_a_running_service(live: tuple[str, Path, subprocess.Popen[bytes]]) -> None:
    base, log_dir, _ = live
    assert _json(f"{base}/healthz") == {"status": "ok"}
    ready = _json(f"{base}/readyz")
    assert ready["ready"] and ready["recovered"] and ready["consuming"] and ready["lag"] == 0
    status, text = _get(f"{base}/metrics")
    assert status == 200
    fams = {f.name: f for f in text_string_to_metric_families(text.decode())}
    for name in ("evsched_cycle_duration_seconds", "evsched_outputs", "evsched_queue_pending_resource",
                 "evsched_queue_allocated_resource", "evsched_queue_running_apps", "evsched_queue_priority",
                 "evsched_consumer_lag", "evsched_last_cycle_timestamp_seconds", "evsched_recovery_duration_seconds",
                 "evsched_cycles", "evsched_inputs_rejected", "evsched_snapshot_writes"):
        assert name in fams, name
    decided = sum(s.value for s in fams["evsched_outputs"].samples
                  if s.name == "evsched_outputs_total" and s.labels["type"] == "allocation.decided")
    with FileLog(log_dir, readonly=True) as log:
        in_log = sum(1 for r in log.iter_outputs() if orjson.loads(r.value)["type"] == "allocation.decided")
    assert decided == in_log > 0
    recent = _json(f"{base}/ws/v1/decisions?limit=1000")
    assert len(recent) == min(in_log, RECENT_DECISIONS)


def test_state_api_matches_the_log(live: tuple[str, Path, subprocess.Popen[bytes]]) -> None:
    base, log_dir, _ = live
    cycles = _json(f"{base}/ws/v1/cycles")
    assert cycles["live"] is True
    state = subprocess.run(_evsched("replay", "state", "--log", str(log_dir), "--cycle", str(cycles["latest"])),
                           cwd=ROOT, check=True, capture_output=True).stdout
    form = orjson.loads(state)
    root = _json(f"{base}/ws/v1/partition/default/queues")
    assert root["allocatedResource"] == form["queues"]["root"]["allocated"]
    apps = _json(f"{base}/ws/v1/partition/default/applications")
    assert {a["applicationID"]: a["allocatedResource"] for a in apps} == {
        k: v["allocated"] for k, v in form["apps"].items()}
    nodes = _json(f"{base}/ws/v1/partition/default/nodes")
    assert {n["nodeID"]: n["available"] for n in nodes} == {k: v["available"] for k, v in form["nodes"].items()}
    status, body = _get(f"{base}/ws/v1/partition/nope/queues")
    assert status == 404 and b"unknown partition" in body
    status, body = _get(f"{base}/ws/v1/partition/default/queues?cycle=abc")
    assert status == 400


def test_explain_endpoints(live: tuple[str, Path, subprocess.Popen[bytes]]) -> None:
    base, _, _ = live
    decision = _json(f"{base}/ws/v1/decisions?limit=1")[0]
    why = _json(f"{base}/ws/v1/decisions/{decision['decisionId']}/explain")
    assert why["explanation"]["chosen"]["node_id"] == decision["nodeId"]
    assert decision["decisionId"] in why["text"]
    pending = next(a for a in _json(f"{base}/ws/v1/partition/default/applications") if a["requests"])
    ask = pending["requests"][0]["allocationKey"]
    why_pending = _json(f"{base}/ws/v1/asks/{pending['applicationID']}/{ask}/explain")
    assert why_pending["explanation"]["ask_id"] == ask and why_pending["text"].strip()
    status, body = _get(f"{base}/ws/v1/asks/{pending['applicationID']}/no-such-ask/explain")
    assert status == 404, body


def test_serve_travels_back_in_time(tmp_path: Path, live: tuple[str, Path, subprocess.Popen[bytes]]) -> None:
    _, log_dir, _ = live
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as err:
        proc = subprocess.Popen(_evsched("serve", "--log", str(log_dir), "--http", "127.0.0.1:0"), cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        base = _wait_for_url(proc, log_path)
        cycles = _json(f"{base}/ws/v1/cycles")
        assert cycles["live"] is False and cycles["latest"] >= 1
        first = _json(f"{base}/ws/v1/partition/default/queues?cycle=0")
        last = _json(f"{base}/ws/v1/partition/default/queues")
        assert first["allocatedResource"] == {} and last["allocatedResource"] != {}
        status, _ = _get(f"{base}/ws/v1/partition/default/queues?cycle={cycles['latest'] + 5}")
        assert status == 404
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0


def test_the_page_shows_the_tree_and_answers_why_pending(
    live: tuple[str, Path, subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    base, _, _ = live
    pending = next(a for a in _json(f"{base}/ws/v1/partition/default/applications") if a["requests"])
    target = f"{pending['applicationID']}/{pending['requests'][0]['allocationKey']}"
    out_dir = Path(os.environ.get("EVSCHED_TEST_OUTPUT", tmp_path))
    with chromium_page() as page:
        page.goto(f"{base}/")
        page.wait_for_selector('#queues tr[data-queue="root.dept0"]')
        assert page.locator('#queues tr[data-queue="root.dept0.team0"]').count() == 0  # collapsed at first
        page.locator('#queues tr[data-queue="root.dept0"] .toggle').click()
        page.wait_for_selector('#queues tr[data-queue="root.dept0.team0"]')
        pending_cell = page.locator('#queues tr[data-queue="root"] td').nth(7).inner_text()
        assert "GiB" in pending_cell and "cores" in pending_cell  # human units, not bytes and millicores
        page.fill("#why-input", target)
        page.click("#why-button")
        page.wait_for_function("!document.querySelector('#why-answer').textContent.startsWith('explaining')")
        answer = page.locator("#why-answer").inner_text()
        assert pending["requests"][0]["allocationKey"] in answer and "cannot explain" not in answer
        page.screenshot(path=str(out_dir / "evsched-page.png"), full_page=True)
    assert (out_dir / "evsched-page.png").stat().st_size > 0
