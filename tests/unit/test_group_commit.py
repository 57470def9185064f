"""Overlapped commits: cycles decided while a transaction is in flight commit together, in order.

Real services over an in-memory log given transactions (``append_cycle``) whose commits wait for
the test's go-ahead, so which cycles share a transaction does not depend on the machine's speed.
The outputs are the bytes a serial run (each cycle committed before the next is read) writes; a
failed commit stops the loop at its next cycle with nothing later written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import orjson
import pytest

from events.log.memory import MemoryLog
from events.log.port import LogError
from scheduler.service import loop
from scheduler.service.loop import Service
from tests.contracts.log_contract import run

NOW_US = 1_700_000_000_000_000  # the services' clock: outputs that carry a time compare byte for byte


def node(i: int) -> tuple[bytes, bytes]:
    event = {"id": f"n{i}", "source": "t", "type": "node.added", "data": {"node_id": f"n{i}", "capacity": {"vcore": 1}}}
    return b"n", orjson.dumps(event)


def cycles(values: Sequence[bytes]) -> list[int]:
    return [orjson.loads(v)["data"]["cycle"] for v in values if b'"cycle.completed"' in v]


class GatedTransactions(MemoryLog):
    """A memory log whose ``append_cycle`` is one transaction, committed once ``gate`` is open;
    ``fail`` makes the next commit fail instead."""

    transactional = True

    def __init__(self) -> None:
        super().__init__(now_us=lambda: NOW_US)
        self.gate = asyncio.Event()
        self.fail = False
        self.transactions: list[list[int]] = []  # the cycles each committed transaction held

    async def append_cycle(self, values: Sequence[bytes], positions: Mapping[str, int]) -> int | None:
        await self.gate.wait()
        if self.fail:
            raise LogError("the broker refused the commit")
        await self.append_outputs(values)
        self.transactions.append(cycles(values))
        return await self.output_end()


async def service_over(log: MemoryLog, inputs: int) -> Service:
    await log.append_inputs([node(i) for i in range(inputs)])
    service = Service(log, now_us=lambda: NOW_US, batch_records=1)  # one input per cycle
    await service.start()
    return service


def test_cycles_decided_during_a_commit_share_the_next_transaction() -> None:
    async def body() -> list[bytes]:
        log = GatedTransactions()
        service = await service_over(log, 4)
        for _ in range(3):  # cycle 1 waits at the gate; 2 and 3 are decided meanwhile
            assert await service.run_cycle_once(overlap=True) == 1
        assert log.transactions == []
        log.gate.set()
        await service.written()
        assert log.transactions == [[1], [2, 3]]
        assert await service.run_cycle_once(overlap=True) == 1
        await service.written()
        assert log.transactions == [[1], [2, 3], [4]]
        return [r.value for r in await log.read_outputs()]

    async def serial() -> list[bytes]:
        log = MemoryLog(now_us=lambda: NOW_US)
        service = await service_over(log, 4)
        for _ in range(4):
            await service.run_cycle_once()
        return [r.value for r in await log.read_outputs()]

    grouped = run(body())
    assert cycles(grouped) == [1, 2, 3, 4]
    assert grouped == run(serial())


def test_the_loop_waits_once_the_queue_is_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop, "MAX_QUEUED_CYCLES", 2)

    async def body() -> None:
        log = GatedTransactions()
        service = await service_over(log, 4)
        for _ in range(3):  # 1 in flight, 2 and 3 queued: full
            await service.run_cycle_once(overlap=True)
        fourth = asyncio.create_task(service.run_cycle_once(overlap=True))
        for _ in range(20):  # every ready callback runs; the fourth still waits for the commit
            await asyncio.sleep(0)
        assert not fourth.done()
        log.gate.set()
        assert await fourth == 1
        await service.written()
        assert log.transactions == [[1], [2, 3], [4]]

    run(body())


def test_a_failed_commit_stops_the_loop_and_nothing_later_is_written() -> None:
    async def body() -> None:
        log = GatedTransactions()
        service = await service_over(log, 4)
        for _ in range(3):
            await service.run_cycle_once(overlap=True)
        log.fail = True
        log.gate.set()
        with pytest.raises(LogError, match="cycle 1: outputs not written"):
            await service.run_cycle_once(overlap=True)
        assert await log.read_outputs() == [] and log.transactions == []

    run(body())
