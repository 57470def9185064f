"""A restore never holds the event loop: while recovery folds recorded cycles or re-runs a
torn one, other coroutines (Kafka's heartbeats) keep running.

Real recovery over an in-memory log. The CPU work is wrapped so that, from inside, it waits
until a ticker coroutine on the event loop has advanced: only a free loop can tick, so on the
loop the wait would never end (the bound only turns a hang into a failure).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from events.log.memory import MemoryLog
from scheduler.service import recovery
from scheduler.service.loop import Service
from tests.contracts.log_contract import run


def node(i: int) -> tuple[bytes, bytes]:
    event = {"id": f"n{i}", "source": "t", "type": "node.added", "data": {"node_id": f"n{i}", "capacity": {"vcore": 4}}}
    return b"n", orjson.dumps(event)


def app(i: int) -> tuple[bytes, bytes]:
    app = {"id": f"a{i}", "source": "t", "type": "app.added",
           "data": {"app_id": f"a{i}", "queue": "root.default", "user": "u"}}
    return b"a", orjson.dumps(app)


class Ticker:
    """A coroutine on the event loop counting its turns; ``wait_for_tick`` (from a worker
    thread) returns once it has taken one more turn."""

    def __init__(self) -> None:
        self.ticks = 0
        self.stop = False
        self._cond = threading.Condition()

    async def run(self) -> None:
        while not self.stop:
            with self._cond:
                self.ticks += 1
                self._cond.notify_all()
            await asyncio.sleep(0)

    def wait_for_tick(self) -> int:
        with self._cond:
            seen = self.ticks
            assert self._cond.wait_for(lambda: self.ticks > seen, timeout=10), "the event loop was held"
            return self.ticks - seen


def waiting(real: Callable[..., Any], ticker: Ticker, calls: list[int]) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        calls.append(ticker.wait_for_tick())
        return real(*args, **kwargs)

    return wrapped


async def logged(cycles: int) -> MemoryLog:
    log = MemoryLog(now_us=lambda: 1_000_000)
    service = Service(log)
    await service.start()
    for i in range(cycles):
        await log.append_inputs([node(i), app(i)])
        await service.run_cycle_once()
    return log


def test_folding_recorded_cycles_leaves_the_event_loop_free(monkeypatch: pytest.MonkeyPatch) -> None:
    async def body() -> None:
        log = await logged(3)
        ticker_calls: list[int] = []
        ticker = Ticker()
        monkeypatch.setattr(recovery, "fold_cycle", waiting(recovery.fold_cycle, ticker, ticker_calls))
        ticking = asyncio.create_task(ticker.run())
        rec = await recovery.recover(log, source="evsched")
        ticker.stop = True
        await ticking
        assert rec.cycles == 3 and rec.digest_mismatches == []
        assert len(ticker_calls) == 3 and all(t >= 1 for t in ticker_calls)  # the loop ticked during each fold

    run(body())


def test_re_running_a_torn_cycle_leaves_the_event_loop_free(monkeypatch: pytest.MonkeyPatch) -> None:
    async def body() -> None:
        whole = await logged(2)
        outputs = await whole.read_outputs()
        torn = MemoryLog(now_us=lambda: 1_000_000)
        await torn.append_inputs([(r.key, r.value) for r in await whole.read_inputs({}, 100)])
        await torn.append_outputs([r.value for r in outputs[:-1]])  # cycle 2 lost its cycle.completed
        ticker_calls: list[int] = []
        ticker = Ticker()
        monkeypatch.setattr(recovery, "run_logged_cycle", waiting(recovery.run_logged_cycle, ticker, ticker_calls))  # type: ignore[attr-defined]
        ticking = asyncio.create_task(ticker.run())
        rec = await recovery.recover(torn, source="evsched")
        ticker.stop = True
        await ticking
        assert rec.cycles == 2 and rec.repaired_outputs == 1
        assert len(ticker_calls) == 1 and ticker_calls[0] >= 1
        assert [r.value for r in await torn.read_outputs()] == [r.value for r in outputs]

    run(body())
