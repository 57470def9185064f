"""The service never blocks its event loop with a cycle, and never appends after another
writer: before each append the output log must end where this instance last wrote.

Real services over an in-memory log. A cycle that held the event loop stopped Kafka's
heartbeats: the group expelled the owner mid-cycle, another instance ran the same cycle,
and both appended a ``cycle N``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import orjson
import pytest

from events.log.memory import MemoryLog
from events.log.port import LogError
from scheduler.service import loop
from scheduler.service.loop import Service
from tests.contracts.log_contract import run


def node(i: int) -> tuple[bytes, bytes]:
    event = {"id": f"n{i}", "source": "t", "type": "node.added", "data": {"node_id": f"n{i}", "capacity": {"vcore": 1}}}
    return b"n", orjson.dumps(event)


def cycles(values: list[bytes]) -> list[int]:
    return [orjson.loads(v)["data"]["cycle"] for v in values if b'"cycle.completed"' in v]


def test_a_second_writer_is_detected_before_the_append_and_nothing_is_written() -> None:
    async def body() -> None:
        log = MemoryLog()
        await log.append_inputs([node(1)])
        first, second = Service(log), Service(log)
        await first.start()
        await second.start()
        assert await second.run_cycle_once() == 1  # the other instance wrote cycle 1
        with pytest.raises(LogError, match="another instance appended"):
            await first.run_cycle_once()
        assert cycles([r.value for r in await log.read_outputs()]) == [1]

    run(body())


def test_a_cycle_runs_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """While the cycle's CPU work runs, other callbacks (Kafka heartbeats) still run: the
    cycle here asks the event loop to tick and waits for it, which only a free loop can do."""
    ticked = threading.Event()
    real = loop.run_logged_cycle  # type: ignore[attr-defined]
    event_loop: list[asyncio.AbstractEventLoop] = []

    def slow_cycle(*args: Any, **kwargs: Any) -> Any:
        event_loop[0].call_soon_threadsafe(ticked.set)
        assert ticked.wait(5), "the event loop was blocked while the cycle ran"
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, "run_logged_cycle", slow_cycle)

    async def body() -> None:
        log = MemoryLog()
        await log.append_inputs([node(1)])
        service = Service(log)
        await service.start()
        event_loop.append(asyncio.get_running_loop())
        assert await service.run_cycle_once() == 1

    run(body())


def test_readers_on_the_event_loop_wait_for_the_cycle_in_the_worker_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The HTTP surface reads the engine on the event loop: with the cycle in a worker
    thread it must wait for it, or it could read a half-applied state."""
    from scheduler.http.sources import all_between_cycles

    release = threading.Event()
    real = loop.run_logged_cycle  # type: ignore[attr-defined]

    def held_cycle(*args: Any, **kwargs: Any) -> Any:
        assert release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, "run_logged_cycle", held_cycle)

    async def body() -> None:
        log = MemoryLog()
        await log.append_inputs([node(1)])
        service = Service(log)
        await service.start()
        cycle = asyncio.create_task(service.run_cycle_once())
        while service.between_cycles:  # the cycle has reached its worker thread
            await asyncio.sleep(0)
        reader = asyncio.create_task(all_between_cycles([service]))
        await asyncio.sleep(0)
        assert not reader.done()
        release.set()
        await reader
        assert service.engine.cycle_number == 1 and await cycle == 1

    run(body())
