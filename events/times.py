"""Event time: RFC 3339 text to and from microseconds since the epoch, and its bounds.

Decoding reads every input's ``time`` through ``parse_time``, so it lives apart from the
codec where the compiled decoder (``events.fast_decode``) can call it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Final

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
# Event times must stay formattable after the arithmetic done on them (simulate adds 1 ms
# per line, timers minutes): years 0001 to 9998, a year short of datetime's end.
MIN_TIME_US: Final = (datetime(1, 1, 1, tzinfo=UTC) - _EPOCH) // timedelta(microseconds=1)
MAX_TIME_US: Final = (datetime(9999, 1, 1, tzinfo=UTC) - _EPOCH) // timedelta(microseconds=1)
# The append time of a record its log gave no time (a Kafka timestamp of −1): a record
# without its own ``time`` is then rejected, never stamped with a reader's clock.
NO_APPEND_TIME_US: Final = -(2**63)


class TimeFormatError(ValueError):
    """An RFC 3339 timestamp that cannot be read."""


def parse_time(text: str) -> int:
    """RFC 3339 text → microseconds since the epoch. Requires an explicit offset.

    >>> parse_time("1970-01-01T00:00:01.5Z")
    1500000
    """
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise TimeFormatError(f"time {text!r} is not RFC 3339") from exc
    if moment.tzinfo is None:
        raise TimeFormatError(f"time {text!r} has no UTC offset")
    delta = moment - _EPOCH  # exact integer arithmetic; cheaper than ``// timedelta(microseconds=1)``
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if not MIN_TIME_US <= micros < MAX_TIME_US:
        raise TimeFormatError(f"time {text!r} is outside {format_time(MIN_TIME_US)} … {format_time(MAX_TIME_US)}")
    return micros


def event_time_us(time: str | None, append_time_us: int) -> int:
    """An input's event time: its ``time`` text, else the time its log appended it at;
    ``TimeFormatError`` saying what to give when neither is usable.

    >>> event_time_us(None, 7), event_time_us("1970-01-01T00:00:01Z", 7)
    (7, 1000000)
    """
    if time is not None:
        return parse_time(time)
    if append_time_us == NO_APPEND_TIME_US:
        raise TimeFormatError("no time, and the log gave the record no timestamp (Kafka timestamp -1): give a time")
    if not MIN_TIME_US <= append_time_us < MAX_TIME_US:  # a producer-set Kafka timestamp, say
        raise TimeFormatError(f"append time {append_time_us} µs is out of range (give a time)")
    return append_time_us


def format_time(micros: int) -> str:
    """Microseconds since the epoch → canonical RFC 3339 UTC text.

    >>> format_time(1500000)
    '1970-01-01T00:00:01.500000Z'
    >>> format_time(0)
    '1970-01-01T00:00:00Z'
    """
    moment = _EPOCH + timedelta(microseconds=micros)
    base = moment.isoformat(timespec="seconds")[:19]  # not strftime: its %Y drops the zeros of year 0001
    frac = micros % 1_000_000
    return f"{base}.{frac:06d}Z" if frac else f"{base}Z"
