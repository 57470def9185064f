"""``scheduler.service.stall.watched``: a log call that hangs is reported once, and so is its end."""

from __future__ import annotations

import asyncio
import logging
import re

import pytest

from scheduler.service.stall import watched

pytestmark = pytest.mark.faults
LOG = logging.getLogger("evsched.test.stall")


async def _answer(after_s: float, value: int = 7) -> int:
    await asyncio.sleep(after_s)
    return value


def test_a_prompt_answer_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger=LOG.name):
        assert asyncio.run(watched("reading", _answer(0.0), LOG, warn_after_s=1.0)) == 7
    assert caplog.records == []


def test_a_stall_is_reported_when_it_starts_and_when_it_ends(caplog: pytest.LogCaptureFixture) -> None:
    # The call answers only once the stall was reported (observed, not a fixed sleep), so the
    # order is certain on any machine and the reported duration is whatever it took.
    async def scenario() -> int:
        released = asyncio.Event()

        async def answer_once_reported() -> int:
            await released.wait()
            return 7

        task = asyncio.create_task(watched("writing", answer_once_reported(), LOG, warn_after_s=0.05))
        while not caplog.records:
            await asyncio.sleep(0.01)
        released.set()
        return await task

    with caplog.at_level(logging.WARNING, logger=LOG.name):
        assert asyncio.run(scenario()) == 7
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith("writing: no answer from the log for 0 s; waiting")
    assert re.fullmatch(r"writing: the log answered again after \d+\.\d s; resuming", lines[1]), lines[1]


def test_an_error_after_a_stall_passes_through_and_is_said(caplog: pytest.LogCaptureFixture) -> None:
    async def broken() -> int:
        await asyncio.sleep(0.2)
        raise OSError("broker gone")

    with caplog.at_level(logging.WARNING, logger=LOG.name), pytest.raises(OSError, match="broker gone"):
        asyncio.run(watched("committing", broken(), LOG, warn_after_s=0.05))
    assert "the log failed after" in caplog.records[-1].getMessage()


def test_cancelling_the_watcher_cancels_the_call() -> None:
    started = asyncio.Event()
    cancelled = []

    async def hang() -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def scenario() -> None:
        for warn_after_s in (10.0, 0.01):  # cancelled before the warning, and after it
            started.clear()
            task = asyncio.create_task(watched("reading", hang(), LOG, warn_after_s=warn_after_s))
            await started.wait()
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(scenario())
    assert cancelled == [True, True]
