"""Reading a log for replay: the ``LogSource`` protocol, the embedded log opened read-only, input ranges.

Every replay tool reads through a ``LogSource``: anything with synchronous
``iter_inputs(start_positions)`` and ``iter_outputs(start)`` — ``FileLog`` (opened with
``readonly=True`` so a live service may keep writing), ``MemoryLog``, or a future Kafka
reader. ``InputCursor`` hands out the input records of one cycle at a time from a single
forward pass, so a replay reads every input once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from os import PathLike
from typing import Protocol

from events.log.file import FileLog
from events.log.port import LogError, LogRecord

DEFAULT_LOG_DIR = "./evsched-data"


class LogSource(Protocol):
    """What replay needs from a log: forward iteration over both sides, no event loop."""

    def iter_inputs(self, start_positions: Mapping[str, int] | None = None) -> Iterator[LogRecord]:
        """Input records from ``start_positions`` (missing channel: offset 0) to the end.

        Records of one channel come in offset order; channels may interleave.
        """
        ...

    def iter_outputs(self, start: int = 0) -> Iterator[LogRecord]:
        """Output records from offset ``start`` to the end, in order."""
        ...


class LogUnavailable(Exception):
    """The log cannot be opened or read (missing directory, damaged segments)."""


@contextmanager
def open_file_log(directory: str | PathLike[str]) -> Iterator[LogSource]:
    """The embedded log in ``directory``, read-only (no lock taken, nothing written)."""
    try:
        log = FileLog(directory, readonly=True)
    except LogError as exc:
        raise LogUnavailable(str(exc)) from None
    try:
        yield log
    finally:
        log.close_sync()


class InputGap(Exception):
    """The inputs a cycle names are not all in the log (or not where they should be)."""


class InputCursor:
    """One forward pass over the inputs, handing out ``[from, through)`` ranges per channel.

    ``take`` must be called with ranges that follow each other: every channel's range
    starts where the previous one of that channel ended (``check_from`` says whether
    they do, so callers can report a gap before reading). Records of channels a range
    does not name stay buffered for later ranges.
    """

    def __init__(self, source: LogSource, start: Mapping[str, int] | None = None) -> None:
        self.positions: dict[str, int] = dict(start or {})
        self._records = source.iter_inputs(dict(self.positions))
        self._buffers: dict[str, deque[LogRecord]] = {}
        self._ended = False
        self.consumed = 0

    def check_from(self, inputs_from: Mapping[str, int]) -> str | None:
        """Why a range starting at ``inputs_from`` does not follow on, or None when it does."""
        wrong = [
            f"{ch}: {inputs_from.get(ch, 0)} (expected {self.positions.get(ch, 0)})"
            for ch in sorted(set(inputs_from) | set(self.positions))
            if inputs_from.get(ch, 0) != self.positions.get(ch, 0)
        ]
        return None if not wrong else "inputs_from does not continue the previous cycle: " + ", ".join(wrong)

    def _pull(self) -> bool:
        if self._ended:
            return False
        rec = next(self._records, None)
        if rec is None:
            self._ended = True
            return False
        self._buffers.setdefault(rec.channel, deque()).append(rec)
        return True

    def _take_channel(self, channel: str, lo: int, hi: int) -> list[LogRecord]:
        buf = self._buffers.setdefault(channel, deque())
        while buf and buf[0].offset < lo:
            buf.popleft()
        if hi <= lo:
            return []
        while (not buf or buf[-1].offset < hi - 1) and self._pull():
            pass
        out: list[LogRecord] = []
        while buf and buf[0].offset < hi:
            out.append(buf.popleft())
        if len(out) != hi - lo or (out and (out[0].offset != lo or out[-1].offset != hi - 1)):
            raise InputGap(
                f"channel {channel}: the cycle consumes offsets {lo}..{hi - 1}, the log has {len(out)} of them"
            )
        return out

    def take(self, inputs_from: Mapping[str, int], inputs_through: Mapping[str, int]) -> list[LogRecord]:
        """The records with ``from[ch] <= offset < through[ch]`` for every channel named."""
        out: list[LogRecord] = []
        for channel in sorted(set(inputs_from) | set(inputs_through)):
            lo = inputs_from.get(channel, self.positions.get(channel, 0))
            hi = inputs_through.get(channel, lo)
            if hi < lo:
                raise InputGap(f"channel {channel}: inputs_through {hi} is before inputs_from {lo}")
            out.extend(self._take_channel(channel, lo, hi))
            self.positions[channel] = hi
        self.consumed += len(out)
        return out

    def remaining(self) -> int:
        """How many input records lie after the current positions (reads to the end)."""
        count = 0
        for channel, buf in self._buffers.items():
            count += sum(1 for rec in buf if rec.offset >= self.positions.get(channel, 0))
        for rec in self._records:
            if rec.offset >= self.positions.get(rec.channel, 0):
                count += 1
        self._ended = True
        return count
