"""How a synchronous long-running command stops: SIGTERM ends it as SIGINT (Ctrl-C) does.

``audit --follow`` and ``log tail --follow`` poll in a plain loop and end on
``KeyboardInterrupt``. Under ``nohup``, a service manager or a test's parent, the stop
signal is SIGTERM, not SIGINT; ``sigterm_interrupts`` turns it into the same interrupt for
the length of a ``with`` block, so the command prints its summary and exits normally.
(The asyncio commands, ``run`` and ``serve``, use ``service_wiring.stop_on_signals``.)
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Within the block, SIGTERM raises ``KeyboardInterrupt`` in the main thread, as SIGINT does."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
