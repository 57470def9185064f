"""The HTTP surface under hostile requests (issue 36): strict numbers, no echo, bounded time
travel, a connection cap and a header deadline. A real aiohttp server on loopback, over a
real embedded log; waits are on what the server does, never on time."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest

from events.log.file import FileLog
from replay.reader import open_file_log
from scheduler.http import sources
from scheduler.http.server import HttpServer
from scheduler.http.sources import LogState
from scheduler.simulation.workload import WorkloadSpec
from tests.logdrive import driven_file_log

SPEC = WorkloadSpec(nodes=6, apps=6, asks=150, leaves=4, seed=11)


@pytest.fixture(scope="module")
def driven(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return driven_file_log(tmp_path_factory.mktemp("http") / "log", SPEC, 30)  # 6 cycles


async def _request(url: str, path: str) -> tuple[int, dict[str, Any]]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), orjson.loads(body)


def _serve(driven: Path, test: Callable[[HttpServer, LogState], Awaitable[None]], **options: Any) -> None:
    async def body() -> None:
        state = LogState(partial(open_file_log, driven))
        server = HttpServer(state, "127.0.0.1:0", **options)
        await server.start()
        try:
            await test(server, state)
        finally:
            await server.stop()

    asyncio.run(body())


# percent-encoded as a browser sends them: Arabic-Indic ١ (U+0661) and ١٠
@pytest.mark.parametrize("query", ["cycle=%D9%A1", "cycle=1_0", "cycle=%2B1", "cycle=%201", "limit=%D9%A1%D9%A0",
                                   "limit=1_0"])
def test_numbers_in_queries_are_ascii_digits_only(driven: Path, query: str) -> None:
    async def test(server: HttpServer, state: LogState) -> None:
        path = "/ws/v1/decisions" if query.startswith("limit") else "/ws/v1/partition/default/nodes"
        status, body = await _request(server.url, f"{path}?{query}")
        assert status == 400 and "ASCII digits" in body["message"]
        assert state.history.derivations == 0

    _serve(driven, test)


def test_a_huge_query_is_not_echoed_and_a_cycle_past_the_log_costs_no_derivation(driven: Path) -> None:
    async def test(server: HttpServer, state: LogState) -> None:
        status, body = await _request(server.url, "/ws/v1/partition/default/nodes?cycle=" + "7" * 5000)
        assert status == 400 and len(body["message"]) < 200 and "5000 characters" in body["message"]
        status, body = await _request(server.url, "/ws/v1/partition/default/nodes?cycle=99999999999")
        assert status == 404 and "holds 6 complete cycles" in body["message"]
        assert state.history.derivations == 0

    _serve(driven, test)


def test_time_travel_is_cached_by_cycle_and_shared_by_concurrent_requests(driven: Path) -> None:
    async def test(server: HttpServer, state: LogState) -> None:
        answers = await asyncio.gather(
            *[_request(server.url, "/ws/v1/partition/default/nodes?cycle=3") for _ in range(8)]
        )
        assert {status for status, _ in answers} == {200}
        assert len({orjson.dumps(body) for _, body in answers}) == 1
        assert state.history.derivations == 1
        for cycle in (1, 2, 4, 3):
            assert (await _request(server.url, f"/ws/v1/partition/default/nodes?cycle={cycle}"))[0] == 200
        assert len(state.history.engines) <= sources.ENGINE_CACHE

    _serve(driven, test)


def test_time_travel_queues_a_bounded_number_of_requests(driven: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    real = sources.engine_at

    def held(source: Any, cycle: int | None, start: Any = None) -> Any:
        release.wait()
        return real(source, cycle, start)

    monkeypatch.setattr(sources, "engine_at", held)

    async def test(server: HttpServer, state: LogState) -> None:
        url = server.url
        first = asyncio.ensure_future(_request(url, "/ws/v1/partition/default/nodes?cycle=1"))
        queued = [asyncio.ensure_future(_request(url, f"/ws/v1/partition/default/nodes?cycle={2 + i % 4}"))
                  for i in range(sources.MAX_WAITING - 1)]
        while state.history._waiting < sources.MAX_WAITING:  # the first holds the lock, the rest wait
            await asyncio.sleep(0.01)
        status, body = await _request(url, "/ws/v1/partition/default/nodes?cycle=6")
        assert status == 503 and "already waiting" in body["message"]
        release.set()
        assert (await first)[0] == 200
        assert {(await q)[0] for q in queued} == {200}

    _serve(driven, test)


async def _closed_by_server(reader: asyncio.StreamReader) -> bool:
    """True once the server has closed the connection (an end of stream, or a reset: it had unread bytes)."""
    try:
        return await reader.read() == b""
    except ConnectionResetError:
        return True


async def _half_sent(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # and never the rest
    await writer.drain()
    return reader, writer


def test_connections_past_the_cap_are_closed_and_the_server_still_answers(driven: Path) -> None:
    async def test(server: HttpServer, state: LogState) -> None:
        held = [await _half_sent(server.url) for _ in range(4)]
        while len(server.guard.open) < 4:
            await asyncio.sleep(0.01)
        reader, writer = await _half_sent(server.url)
        assert await _closed_by_server(reader)  # closed by the server at once
        writer.close()
        assert server.guard.refused == 1
        for _, holder in held:
            holder.close()
        while server.guard.open:
            await asyncio.sleep(0.01)
        assert (await _request(server.url, "/healthz"))[0] == 200

    _serve(driven, test, max_connections=4, header_timeout_s=3600)


def test_a_connection_that_never_finishes_its_headers_is_closed(driven: Path) -> None:
    async def test(server: HttpServer, state: LogState) -> None:
        reader, writer = await _half_sent(server.url)
        assert await _closed_by_server(reader)  # the deadline passed: closed
        writer.close()
        assert server.guard.timed_out == 1
        assert (await _request(server.url, "/healthz"))[0] == 200

    _serve(driven, test, header_timeout_s=0.2)


def test_time_travel_starts_from_the_newest_snapshot_at_or_before_the_cycle(tmp_path: Path) -> None:
    from replay.snapshot_start import pick_snapshot
    from scheduler.service.loop import Service
    from scheduler.storage.snapshot_files import SnapshotStore

    log_dir, snaps = tmp_path / "log", tmp_path / "snaps"

    async def cycles() -> None:
        with FileLog(log_dir) as log:
            for i in range(3):  # three cycles, a snapshot after each
                log.append_inputs_sync([(None, orjson.dumps({
                    "id": f"n{i}", "source": "t", "type": "node.added",
                    "data": {"node_id": f"n{i}", "capacity": {"vcore": 1000}}}))])
                service = Service(log, snapshots=SnapshotStore(snaps, keep=0), snapshot_every=1)
                await service.start()
                await service.run(once=True)

    asyncio.run(cycles())
    starts: list[int] = []

    def start_for(source: Any, cycle: int) -> Any:
        pick = pick_snapshot(source, SnapshotStore(snaps), cycle)
        starts.append(pick.cycle)
        return pick.start

    from_snapshot = asyncio.run(sources._EngineCache(partial(open_file_log, log_dir), start_for).get(2))
    from_scratch = asyncio.run(sources._EngineCache(partial(open_file_log, log_dir)).get(2))
    assert starts == [2] and from_snapshot.cycle_number == 2
    assert from_snapshot.digest() == from_scratch.digest()
