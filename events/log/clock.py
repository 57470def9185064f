"""The wall clock that log adapters stamp append times with unless given another one.

The functional core never calls this: it is only the default ``now_us`` argument of the
adapters' constructors (the imperative shell), so tests and replays can inject a clock.
"""

from __future__ import annotations

import time


def wall_clock_us() -> int:
    """Microseconds since the Unix epoch, from the system clock."""
    return time.time_ns() // 1000
