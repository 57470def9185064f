"""Rejected inputs in the service's log: one INFO line each with its reason, rate-limited.

A cycle listener (``scheduler.service.loop.CycleListener``), always on in ``evsched run``:
an operator sees why inputs were refused without reading the output log, and a flood of
bad inputs costs at most ``per_s`` lines a second (the rest are counted in the next line).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from events.models import InputRejected, OutputEvent
from scheduler.core.engine import Engine

LOG = logging.getLogger("evsched.inputs")
REJECTION_LOG_PER_S = 10.0


@dataclass
class RejectionLogger:
    """Logs rejected inputs at INFO with their reason, rate-limited by a token bucket.

    >>> clock = iter([0.0, 0.0, 0.0, 2.0]).__next__
    >>> r = RejectionLogger(per_s=1.0, burst=2, clock=clock)
    >>> [r.allow() for _ in range(4)]
    [True, True, False, True]
    """

    per_s: float = REJECTION_LOG_PER_S
    burst: int = 20
    clock: Callable[[], float] = time.monotonic
    suppressed: int = 0
    _tokens: float = -1.0
    _last: float = 0.0

    def allow(self) -> bool:
        """True when one more line may be written now."""
        now = self.clock()
        if self._tokens < 0:
            self._tokens, self._last = float(self.burst), now
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.per_s)
        self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        self.suppressed += 1
        return False

    def cycle_done(self, engine: Engine, outputs: list[OutputEvent]) -> None:
        """Log the cycle's rejected inputs."""
        for out in outputs:
            if isinstance(out.data, InputRejected):
                self.log(out.data)

    def log(self, rejected: InputRejected) -> None:
        """One INFO line for a rejected input (or a count of the suppressed ones)."""
        if not self.allow():
            return
        if self.suppressed:
            LOG.info("%d more rejected inputs not logged (rate limit)", self.suppressed)
            self.suppressed = 0
        LOG.info("input rejected: id=%s type=%s reason=%s: %s", rejected.input_id, rejected.input_type,
                 rejected.reason, rejected.message[:300])
