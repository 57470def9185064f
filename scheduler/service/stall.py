"""Stall reporting: say when the log stops answering, and when it answers again.

A paused or unreachable broker (or a hung disk) makes a log call wait, not fail, until
its own timeout. The service wraps its log calls in ``watched`` so such a wait shows up
as one WARNING line after ``warn_after_s`` and one line when the call returns — the
operator sees the outage and its end, and that nothing was dropped in between. Errors
and cancellation pass through unchanged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import TypeVar

STALL_WARN_S = 5.0
_T = TypeVar("_T")


async def watched(what: str, call: Awaitable[_T], log: logging.Logger, warn_after_s: float = STALL_WARN_S) -> _T:
    """Await ``call``; if it takes longer than ``warn_after_s``, log the stall and its end."""
    task = asyncio.ensure_future(call)
    began = time.monotonic()
    try:
        await asyncio.wait({task}, timeout=warn_after_s)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if task.done():
        return task.result()
    log.warning("%s: no answer from the log for %.0f s; waiting for it (nothing is skipped or lost meanwhile)",
                what, warn_after_s)
    try:
        result = await task
    except Exception as exc:
        log.error("%s: the log failed after %.1f s without answering: %s", what, time.monotonic() - began, exc)
        raise
    log.warning("%s: the log answered again after %.1f s; resuming", what, time.monotonic() - began)
    return result
