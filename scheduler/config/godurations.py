"""Queue properties read as YuniKorn's Go code reads them: Go durations, unsigned counts, the preemption policy.

As YuniKorn's ``queue.go``: an invalid value never fails the config, it falls back to the
default (``default`` policy; 30 s for ``preemption.delay`` and yunikorn-1.9's
``application.unschedasks.backoff.delay``; 0, off, for ``application.unschedasks.backoff``);
a delay must be positive. ``config check`` reports such values (``scheduler.config.properties``).
"""

from __future__ import annotations

import math
import re

from scheduler.config.model import UINT64_MAX

DEFAULT_PREEMPTION_DELAY_US = 30_000_000
PREEMPTION_POLICIES = ("default", "fence", "disabled")

_UNITS_US = {"ns": 0.001, "us": 1.0, "µs": 1.0, "μs": 1.0, "ms": 1_000.0, "s": 1_000_000.0,
             "m": 60_000_000.0, "h": 3_600_000_000.0}
_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")


def go_duration_us(text: str) -> int | None:
    """Go ``time.ParseDuration`` in microseconds, or None when Go rejects the text. Log time
    counts microseconds, so a positive duration rounds up to the next one (``1ns`` → 1).

    >>> go_duration_us("1m30s"), go_duration_us("1.5s"), go_duration_us("0"), go_duration_us("10")
    (90000000, 1500000, 0, None)
    >>> go_duration_us("1ns"), go_duration_us("-1ns")
    (1, -1)
    """
    rest = text
    sign = 1
    if rest[:1] in ("+", "-"):
        sign = -1 if rest[0] == "-" else 1
        rest = rest[1:]
    if rest == "0":
        return 0
    if not rest:
        return None
    total = 0.0
    pos = 0
    while pos < len(rest):
        match = _PART.match(rest, pos)
        if match is None or match.group(1) in ("", "."):
            return None
        total += float(match.group(1)) * _UNITS_US[match.group(2)]
        pos = match.end()
    return sign * math.ceil(total)


def positive_duration_us(value: str | None, default: int) -> int:
    """A delay property: a positive Go duration in microseconds, else (unset, invalid, 0 or
    negative) ``default``.

    >>> [positive_duration_us(v, 7) for v in ("2s", "0", "-1s", "soon", None)]
    [2000000, 7, 7, 7, 7]
    """
    parsed = go_duration_us(value) if value is not None else None
    return parsed if parsed is not None and parsed > 0 else default


def preemption_delay_us(value: str | None) -> int:
    """A leaf's ``preemption.delay``: a positive Go duration, else the 30 s default."""
    return positive_duration_us(value, DEFAULT_PREEMPTION_DELAY_US)


DEFAULT_BACKOFF_DELAY_US = 30_000_000  # YuniKorn configs.DefaultAskBackOffDelay


def backoff_delay_us(value: str | None) -> int:
    """A queue's ``application.unschedasks.backoff.delay`` (``queue.go:convertDelay``): a positive
    Go duration, else the 30 s default."""
    return positive_duration_us(value, DEFAULT_BACKOFF_DELAY_US)


def uint64(value: str) -> int | None:
    """Go ``strconv.ParseUint(value, 10, 64)``: ASCII digits only, at most 2⁶⁴ − 1; else None.

    >>> [uint64(v) for v in ("3", "-1", "+1", "1e3", "²", str(2**64))]
    [3, None, None, None, None, None]
    """
    if not (value.isascii() and value.isdigit()) or len(value) > 20:
        return None
    number = int(value)
    return number if number <= UINT64_MAX else None


def unschedulable_backoff(value: str | None) -> int:
    """A queue's ``application.unschedasks.backoff`` (``queue.go:unschedulableAskBackoff``): the
    count, 0 (off) when unset or unparsable.

    >>> [unschedulable_backoff(v) for v in ("3", "-1", "1e3", None)]
    [3, 0, 0, 0]
    """
    parsed = uint64(value) if value is not None else None
    return parsed if parsed is not None else 0


def preemption_policy(value: str | None) -> str:
    """``preemption.policy`` (any case): default, fence or disabled; empty or unknown → default."""
    lowered = (value or "").lower()
    return lowered if lowered in PREEMPTION_POLICIES else "default"
