"""MemoryLog against the EventLog contract, plus what only the memory adapter promises."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from events.log.memory import MemoryLog
from events.log.port import EventLog, LogError
from tests.contracts.log_contract import LogContract, inputs


class TestMemoryLog(LogContract):
    persistent = False

    @asynccontextmanager
    async def make_log(
        self, tmp_path: Path, now_us: Callable[[], int] | None = None
    ) -> AsyncIterator[EventLog]:
        log = MemoryLog() if now_us is None else MemoryLog(now_us)
        try:
            yield log
        finally:
            await log.close()


def test_sync_iteration_and_closed_log() -> None:
    log = MemoryLog(now_us=lambda: 7)
    asyncio.run(log.append_inputs(inputs(5)))
    asyncio.run(log.append_outputs([b"a", b"b"]))
    assert [r.offset for r in log.iter_inputs({"inputs": 2})] == [2, 3, 4]
    assert [r.value for r in log.iter_outputs(1)] == [b"b"]
    assert all(r.append_time_us == 7 for r in log.iter_inputs())
    with pytest.raises(LogError):
        asyncio.run(log.read_outputs(-1))
    log.close_sync()
    log.close_sync()
    with pytest.raises(LogError, match="closed"):
        asyncio.run(log.append_inputs(inputs(1)))
    with pytest.raises(LogError, match="closed"):
        log.iter_outputs()
