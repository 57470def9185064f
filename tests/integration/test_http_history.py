"""The operator's day over HTTP for real: a restarted service remembers, pending work with its place and
remedies (API and CLI agree), and the page updating itself (and not while paused) in Chromium.

Processes run on the embedded log; tests wait on what the processes say (URL line, ``/readyz``,
the page's status and poll counter), never on time.
"""

from __future__ import annotations

import os
import signal
import subprocess
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
from tests.cli import evsched, submit_as_cluster
from tests.integration.test_http import ROOT, _evsched, _get, _json, _wait_for_url, _wait_ready

SPEC = WorkloadSpec(nodes=12, apps=8, asks=300, departments=2, leaves=4, seed=5)


def _write(path: Path, evs: Iterator[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in evs))
    return path


def _workload(tmp: Path) -> Path:
    def evs() -> Iterator[dict[str, Any]]:
        yield {"type": "config.updated", "data": {"yaml": config_yaml(SPEC)}}
        yield from events(SPEC)

    return _write(tmp / "inputs.jsonl", numbered(evs()))


def _late_nodes(tmp: Path, name: str, count: int) -> Path:
    """Nodes joining later (an hour after the workload): the pending asks get room, new decisions follow."""
    nodes = ({"type": "node.added", "data": {"node_id": f"{name}-{i}", "capacity": {"vcore": 16_000,
                                                                                     "memory": 64 * 2**30}}}
             for i in range(count))
    return _write(tmp / f"{name}.jsonl", numbered(nodes, source=name, start_us=3_600_000_000))


def _log_facts(log_dir: Path) -> tuple[list[str], float, int]:
    """The log's decision ids (oldest first), when it took its last cycle.completed (unix s), its cycles."""
    ids, last, cycles = [], 0.0, 0
    with FileLog(log_dir, readonly=True) as log:
        for rec in log.iter_outputs():
            obj = orjson.loads(rec.value)
            if obj["type"] == "allocation.decided":
                ids.append(obj["data"]["decision_id"])
            elif obj["type"] == "cycle.completed":
                last, cycles = rec.append_time_us / 1e6, cycles + 1
    return ids, last, cycles


def _start(args: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    with open(log_path, "wb") as err:
        return subprocess.Popen(_evsched(*args), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def test_a_restarted_service_shows_the_decisions_and_times_from_before(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    submit_as_cluster(["--log", str(log_dir)], _workload(tmp_path))
    evsched("run", "--log", str(log_dir), "--once", "--batch", "60")  # the first life: several cycles, then exit
    ids, last_unix, cycles = _log_facts(log_dir)
    assert ids and cycles >= 2
    log_path = tmp_path / "service.log"
    proc = _start(["run", "--log", str(log_dir), "--http", "127.0.0.1:0"], log_path)
    try:
        base = _wait_for_url(proc, log_path)
        _wait_ready(base, proc, log_path)
        assert _json(f"{base}/ws/v1/cycles")["latest"] == cycles  # no new cycle: nothing came since
        recent = _json(f"{base}/ws/v1/decisions?limit=1000")
        assert [d["decisionId"] for d in recent] == list(reversed(ids))[:RECENT_DECISIONS]
        status, text = _get(f"{base}/metrics")
        assert status == 200
        fams = {f.name: f for f in text_string_to_metric_families(text.decode())}
        stamp = fams["evsched_last_cycle_timestamp_seconds"].samples[0].value
        assert stamp == pytest.approx(last_unix, abs=1e-6) and stamp > 0
        series = _json(f"{base}/ws/v1/partition/default/series")["cycles"]
        assert [s["cycle"] for s in series] == list(range(1, cycles + 1))
        assert sum(s["decisions"] for s in series) == len(ids)
        state = orjson.loads(evsched("replay", "state", "--log", str(log_dir), "--cycle", str(cycles)).stdout)
        assert series[-1]["allocated"] == state["queues"]["root"]["allocated"]
        assert series[-1]["pending"] == state["queues"]["root"]["pending"]
        assert all(s["seconds"] is not None and s["seconds"] >= 0 for s in series)
        status, body = _get(f"{base}/ws/v1/partition/default/series?last=abc")
        assert status == 400, body
        status, body = _get(f"{base}/ws/v1/partition/nope/series")
        assert status == 404, body
        with chromium_page() as page:  # the page after the restart: the latest decisions and the charts are there
            page.goto(f"{base}/")
            page.wait_for_function(f"document.querySelector('#status').textContent.startsWith('cycle {cycles} of')")
            rows = page.locator("#decisions tbody tr")
            assert rows.count() == 15 and rows.first.locator("td").first.inner_text() == ids[-1]
            assert page.locator("#chart-decisions rect").count() == cycles
            out_dir = Path(os.environ.get("EVSCHED_TEST_OUTPUT", tmp_path))
            page.screenshot(path=str(out_dir / "evsched-page-after-restart.png"), full_page=False)
    finally:
        _stop(proc)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    """``evsched serve`` over a log that ``run --once`` has scheduled (asks left pending)."""
    tmp = tmp_path_factory.mktemp("http-served")
    log_dir = tmp / "log"
    submit_as_cluster(["--log", str(log_dir)], _workload(tmp))
    evsched("run", "--log", str(log_dir), "--once", "--batch", "60")
    log_path = tmp / "serve.log"
    proc = _start(["serve", "--log", str(log_dir), "--http", "127.0.0.1:0"], log_path)
    try:
        yield _wait_for_url(proc, log_path), log_dir, tmp
    finally:
        _stop(proc)


def test_pending_api_and_cli_agree_on_positions_reasons_and_remedies(served: tuple[str, Path, Path]) -> None:
    base, log_dir, _ = served
    latest = _json(f"{base}/ws/v1/cycles")["latest"]
    url = f"{base}/ws/v1/partition/default/queue/root/pending"
    whole = _json(f"{url}?limit=500&cycle={latest}")
    assert whole["total"] > 10 and whole["afterCycle"] == latest
    assert [i["positionInQueue"] for i in whole["items"]] == list(range(1, len(whole["items"]) + 1))
    assert all(i["reasons"] for i in whole["items"])  # after a full cycle, everything pending is held by something
    assert any(i["wouldRun"] for i in whole["items"])
    cli = orjson.loads(evsched("pending", "--log", str(log_dir), "--limit", "500", "--json").stdout)
    assert cli == whole
    page = _json(f"{url}?offset=3&limit=4")
    assert page["items"] == whole["items"][3:7]
    leaf = whole["items"][0]["queueName"]
    mine = _json(f"{base}/ws/v1/partition/default/queue/{leaf}/pending?limit=500")
    assert [i["allocationKey"] for i in mine["items"]] == [
        i["allocationKey"] for i in whole["items"] if i["queueName"] == leaf]
    assert [i["positionInQueue"] for i in mine["items"]] == list(range(1, mine["total"] + 1))
    one = whole["items"][5]
    only = _json(f"{url}?ask={one['applicationID']}/{one['allocationKey']}")
    assert only["items"] == [one]
    text = evsched("pending", "--log", str(log_dir), "--ask", f"{one['applicationID']}/{one['allocationKey']}",
                   text=True).stdout
    assert f"{one['positionInQueue']}. {one['applicationID']}/{one['allocationKey']}" in text
    assert one["reasons"][0]["message"] in text
    earlier = _json(f"{url}?cycle=1&limit=1")
    assert earlier["afterCycle"] == 1
    for bad in ("limit=501", "limit=abc", "offset=-1", "limit=%EF%BC%91", "ask=nosslash"):
        status, body = _get(f"{url}?{bad}")
        assert status == 400, (bad, body)
    status, body = _get(f"{base}/ws/v1/partition/default/queue/root.nope/pending")
    assert status == 404 and b"no queue" in body
    for args, says in ((["--queue", "root.nope"], "has no queue 'root.nope'"),
                       (["--cycle", str(latest + 1)], f"cycle {latest + 1} is not in the log"),
                       (["--ask", "nosslash"], "--ask takes APP/ASK"),
                       (["--ask", "app-0000/no-such-ask"], "is not pending under root"),
                       (["--limit", "501"], "a whole number 0..500")):
        done = evsched("pending", "--log", str(log_dir), *args, check=False, text=True)
        assert done.returncode != 0 and says in done.stderr, (args, done.returncode, done.stderr[-500:])


def test_apps_and_nodes_search_and_paging(served: tuple[str, Path, Path]) -> None:
    base = served[0]
    every = _json(f"{base}/ws/v1/partition/default/applications")
    status, body = _get(f"{base}/ws/v1/partition/default/applications?offset=2&limit=3")
    assert status == 200 and [a["applicationID"] for a in orjson.loads(body)] == [
        a["applicationID"] for a in every[2:5]]
    found = _json(f"{base}/ws/v1/partition/default/applications?search=APP-0003")
    assert [a["applicationID"] for a in found] == ["app-0003"]
    nodes = _json(f"{base}/ws/v1/partition/default/nodes?search=node-0001")
    assert sorted(n["nodeID"] for n in nodes) == ["node-00010", "node-00011"]
    status, _ = _get(f"{base}/ws/v1/partition/default/nodes?limit=1001")
    assert status == 400


def test_the_page_shows_fill_heat_and_history_updates_itself_and_pauses(
        served: tuple[str, Path, Path], tmp_path: Path) -> None:
    base, log_dir, tmp = served
    out_dir = Path(os.environ.get("EVSCHED_TEST_OUTPUT", tmp_path))
    latest = _json(f"{base}/ws/v1/cycles")["latest"]
    nodes = _json(f"{base}/ws/v1/partition/default/nodes")
    with chromium_page() as page:
        page.goto(f"{base}/?poll=300")
        page.wait_for_function(f"document.querySelector('#status').textContent.startsWith('cycle {latest} of')")
        # queue fill against guarantee and max, at a glance
        root_meters = page.locator('#queues tr[data-queue="root"] .meter')
        assert root_meters.count() >= 2
        label = page.locator('#queues tr[data-queue="root"] .meter-label').first.inner_text()
        assert "% of" in label
        assert page.locator("#heatmap .cell").count() == len(nodes)
        assert page.locator("#chart-pending polyline").count() >= 1
        assert page.locator("#chart-decisions rect").count() == latest
        # pending work in try order with reasons and remedies, paged
        page.wait_for_selector("#pending tbody tr")
        first = page.locator("#pending tbody tr").first
        assert first.locator(".pos-queue").inner_text() == "1"
        assert first.locator("td.why li").count() >= 1
        pending_total = _json(f"{base}/ws/v1/partition/default/queue/root/pending?limit=0")["total"]
        assert page.locator("#pending-pager").inner_text().startswith(f"1–10 of {pending_total}")
        page.locator("#pending-pager .next").click()
        page.wait_for_function("document.querySelector('#pending tbody tr .pos-queue').textContent === '11'")
        # search and paging of apps and nodes
        assert page.locator("#apps tbody tr").count() == 8  # all of them: fewer than a page
        page.fill("#apps-search", "app-0002")
        page.wait_for_function("document.querySelectorAll('#apps tbody tr').length === 1")
        page.locator('#heatmap .cell[data-node="node-00003"]').click()
        page.wait_for_function("document.querySelectorAll('#nodes tbody tr').length === 1")
        assert page.locator("#nodes tbody tr").first.get_attribute("data-node") == "node-00003"
        # the why box: an ask's place in line and what would let it run, then the explanation
        third = _json(f"{base}/ws/v1/partition/default/queue/root/pending?offset=2&limit=1")["items"][0]
        page.fill("#why-input", f"{third['applicationID']}/{third['allocationKey']}")
        page.click("#why-button")
        page.wait_for_function("!document.querySelector('#why-answer').textContent.startsWith('explaining')")
        answer = page.locator("#why-answer").inner_text()
        assert answer.startswith(f"Position: 3 of {pending_total} pending in the partition"), answer[:300]
        assert all(fix["message"] in answer for fix in third["wouldRun"]) and third["allocationKey"] in answer
        page.screenshot(path=str(out_dir / "evsched-page-glance.png"), full_page=True)
        # paused: polls come and go, the page stays at its cycle while the log moves on
        page.click("#pause")
        assert page.locator("#pause").get_attribute("aria-pressed") == "true"
        evsched("submit", "--log", str(log_dir), str(_late_nodes(tmp, "late", 4)))
        evsched("run", "--log", str(log_dir), "--once")
        moved = _json(f"{base}/ws/v1/cycles")["latest"]
        assert moved > latest
        polls = page.evaluate("window.evschedPolls")
        page.wait_for_function(f"window.evschedPolls >= {polls + 3}")
        assert page.locator("#status").inner_text().startswith(f"cycle {latest} of {latest}")
        # resumed: the next poll sees the new cycle and the page follows by itself
        page.click("#pause")
        page.wait_for_function(f"document.querySelector('#status').textContent.startsWith('cycle {moved} of {moved}')")
        assert page.locator("#chart-decisions rect").count() == moved
        page.screenshot(path=str(out_dir / "evsched-page-updated.png"), full_page=False)
    assert (out_dir / "evsched-page-glance.png").stat().st_size > 0
