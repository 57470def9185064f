"""Queue properties read as YuniKorn's Go code reads them: Go durations, unsigned counts, the preemption policy.

As YuniKorn's ``queue.go``: an invalid value never fails the config, it falls back to the
default (``default`` policy; 30 s for ``preemption.delay`` and yunikorn-1.9's
``application.unschedasks.backoff.delay``; 0, off, for ``application.unschedasks.backoff``);
a delay must be positive. ``config check`` reports such values (``scheduler.config.properties``).
"""

from __future__ import annotations

from scheduler.config.model import UINT64_MAX

DEFAULT_PREEMPTION_DELAY_US = 30_000_000
PREEMPTION_POLICIES = ("default", "fence", "disabled")

_UNIT_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
            "m": 60_000_000_000, "h": 3_600_000_000_000}
_TWO_63 = 1 << 63
_DIGITS = "0123456789"  # ASCII only, as Go compares bytes ('²'.isdigit() holds)


def go_duration_ns(text: str) -> int | None:
    """Go ``time.ParseDuration``, step for step: nanoseconds, or None where Go returns an error.

    Integers exactly, a fraction as Go computes it (``float64(f) * (float64(unit) / scale)``,
    truncated), digits past 63 bits of a fraction ignored, more than 2⁶³ − 1 ns an error.

    >>> go_duration_ns("8.05ms"), go_duration_ns("0.5ns"), go_duration_ns("2562048h"), go_duration_ns("1.s")
    (8050000, 0, None, 1000000000)
    """
    rest = text
    negative = False
    if rest[:1] in ("+", "-"):
        negative = rest[0] == "-"
        rest = rest[1:]
    if rest == "0":
        return 0
    if not rest:
        return None
    total = 0
    while rest:
        if rest[0] != "." and rest[0] not in _DIGITS:
            return None
        i = 0
        whole = 0
        while i < len(rest) and rest[i] in _DIGITS:  # Go leadingInt
            if whole > _TWO_63 // 10:
                return None
            whole = whole * 10 + ord(rest[i]) - 48
            if whole > _TWO_63:
                return None
            i += 1
        before = i > 0
        fraction, scale, after = 0, 1.0, False
        if i < len(rest) and rest[i] == ".":
            i += 1
            start = i
            overflow = False
            while i < len(rest) and rest[i] in _DIGITS:  # Go leadingFraction
                if not overflow:
                    if fraction > (_TWO_63 - 1) // 10:
                        overflow = True
                    else:
                        longer = fraction * 10 + ord(rest[i]) - 48
                        if longer > _TWO_63:
                            overflow = True
                        else:
                            fraction, scale = longer, scale * 10
                i += 1
            after = i > start
        if not before and not after:
            return None
        start = i
        while i < len(rest) and rest[i] != "." and rest[i] not in _DIGITS:
            i += 1
        unit = _UNIT_NS.get(rest[start:i])
        if unit is None or whole > _TWO_63 // unit:
            return None
        value = whole * unit
        if fraction > 0:
            value += int(float(fraction) * (float(unit) / scale))
            if value > _TWO_63:
                return None
        total += value
        if total > _TWO_63:
            return None
        rest = rest[i:]
    if negative:
        return -total
    return total if total < _TWO_63 else None


def go_duration_us(text: str) -> int | None:
    """Go ``time.ParseDuration`` in microseconds, or None when Go rejects the text. Log time
    counts microseconds, so a duration of a fraction of one rounds away from 0 (``1ns`` → 1).

    >>> go_duration_us("1m30s"), go_duration_us("1.5s"), go_duration_us("0"), go_duration_us("10")
    (90000000, 1500000, 0, None)
    >>> go_duration_us("1ns"), go_duration_us("-1ns"), go_duration_us("0.5ns")
    (1, -1, 0)
    """
    ns = go_duration_ns(text)
    if ns is None:
        return None
    return -(-ns // 1000) if ns >= 0 else ns // 1000


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
