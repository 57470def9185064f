"""The log's synchronous read side: the ``LogSource`` port, its capabilities, input ranges and a cursor.

The ``EventLog`` port (``events.log.port``) is what the live service writes and reads through,
as coroutines. Replay, audit, explain and the HTTP surface over a log read forward and
synchronously, without an event loop: through a ``LogSource`` — anything with
``iter_inputs(start_positions)`` and ``iter_outputs(start)``: ``FileSource`` (the embedded log,
opened read-only so a live service may keep writing), ``MemoryLog``, or
``replay.kafka_source.KafkaSource`` (a Kafka log behind a loop thread). Sources may declare
more (``OrderedChannels``, ``OutputsAt``, ``BoundedSource``), and the helpers here use it when
they do. ``read_range`` (sync) and ``read_range_async`` (over the async port, for recovery)
read the inputs of one range alike (the contract suite checks both on every adapter);
``InputCursor`` hands out the inputs of one cycle at a time from a single forward pass.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Coroutine, Iterable, Iterator, Mapping
from contextlib import contextmanager
from itertools import islice
from os import PathLike
from typing import Any, Protocol, TypeVar, runtime_checkable

from events.log.file import ADMIN, INPUTS, FileLog
from events.log.port import EventLog, LogError, LogRecord

PULL_CHUNK = 1024  # input records buffered per read from the source
READ_BATCH = 10_000  # input records per read_inputs call of an async range read
_T = TypeVar("_T")


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


@runtime_checkable
class OrderedChannels(Protocol):
    """A source that knows the service's merge order of its input channels (what ``input_channels()`` said)."""

    input_channel_order: list[str]


@runtime_checkable
class OutputsAt(Protocol):
    """A source that reads one output record without a walk (bisecting the output log)."""

    def output_at(self, offset: int) -> LogRecord | None:
        """The output record at ``offset`` (on a log with gaps: the first one after), None past the end."""
        ...


@runtime_checkable
class BoundedSource(Protocol):
    """A source that can say where its inputs and outputs end, synchronously (unlike the ``EventLog``
    port's ``input_end``/``output_end``, so a ``MemoryLog`` passed as a source is not mistaken for one)."""

    def inputs_end(self) -> dict[str, int]:
        """One past the last input record of each channel."""
        ...

    def outputs_end(self) -> int:
        """One past the last output record."""
        ...


class LogUnavailable(Exception):
    """The log cannot be opened or read (missing directory, damaged segments)."""


def _finished(coro: Coroutine[Any, Any, _T]) -> _T:
    """The result of a coroutine that never suspends, run without an event loop.

    ``FileLog``'s port methods do their (local, short) file I/O synchronously inside
    ``async def``, so one ``send`` runs them to completion.
    """
    try:
        coro.send(None)
    except StopIteration as done:
        value: _T = done.value
        return value
    coro.close()
    raise RuntimeError("a FileLog coroutine suspended: it needs an event loop")


class FileSource:
    """The embedded log, read-only, as a ``LogSource`` with every optional capability."""

    def __init__(self, log: FileLog) -> None:
        self.log = log
        self.input_channel_order = [INPUTS, ADMIN]

    def iter_inputs(self, start_positions: Mapping[str, int] | None = None) -> Iterator[LogRecord]:
        """Input records from ``start_positions`` to the end."""
        return self.log.iter_inputs(start_positions)

    def iter_outputs(self, start: int = 0) -> Iterator[LogRecord]:
        """Output records from ``start`` to the end (records a live writer appends included)."""
        return self.log.iter_outputs(start)

    def output_at(self, offset: int) -> LogRecord | None:
        """The output record at ``offset``, or None past the end."""
        batch = _finished(self.log.read_outputs(offset, 1))
        return batch[0] if batch else None

    def inputs_end(self) -> dict[str, int]:
        """One past the last input record of each channel."""
        return _finished(self.log.input_end())

    def outputs_end(self) -> int:
        """One past the last output record."""
        return _finished(self.log.output_end())

    def close(self) -> None:
        """Release the segment files."""
        self.log.close_sync()


@contextmanager
def open_file_log(directory: str | PathLike[str]) -> Iterator[FileSource]:
    """The embedded log in ``directory``, read-only (no lock taken, nothing written)."""
    try:
        log = FileLog(directory, readonly=True)
    except LogError as exc:
        raise LogUnavailable(str(exc)) from None
    try:
        yield FileSource(log)
    finally:
        log.close_sync()


def channel_order(source: LogSource, names: Iterable[str]) -> list[str]:
    """The channels ``names`` in the order the service merges them (docs/contract.md §4).

    That is the source's ``input_channel_order`` (what the log's ``input_channels()``
    returned to the service: Kafka's topic order as configured, then partition), then any
    channel it does not list, by name. A source without an order merges by name.

    Example: a source with order ``["zz/0", "aa/0"]`` and names ``{"aa/0", "zz/0", "mm/0"}``
    gives ``["zz/0", "aa/0", "mm/0"]``.
    """
    wanted = set(names)
    known = list(source.input_channel_order or []) if isinstance(source, OrderedChannels) else []
    ordered = [ch for ch in known if ch in wanted]
    return ordered + sorted(wanted - set(ordered))


def output_at(source: LogSource, offset: int) -> LogRecord | None:
    """The output record at ``offset`` (None past the end), by the cheapest way the source has."""
    if isinstance(source, OutputsAt):
        return source.output_at(offset)
    return next(iter(source.iter_outputs(offset)), None)


def outputs_end(source: LogSource) -> int | None:
    """One past the last output record, or None when the source cannot say without reading it all."""
    return source.outputs_end() if isinstance(source, BoundedSource) else None


def input_total(source: LogSource) -> int | None:
    """How many input records the log holds over all channels (None when the source cannot say)."""
    return sum(source.inputs_end().values()) if isinstance(source, BoundedSource) else None


def read_range(source: LogSource, start: Mapping[str, int], end: Mapping[str, int]) -> Iterator[LogRecord]:
    """Input records with ``start[ch] <= offset < end[ch]`` for the channels ``end`` names."""
    remaining = {ch for ch, stop in end.items() if start.get(ch, 0) < stop}
    if not remaining:
        return
    # Channels the range does not name start at their end, so they are not read at all.
    ends = source.inputs_end() if isinstance(source, BoundedSource) else {}
    begin = {**ends, **{ch: start.get(ch, 0) for ch in end}}
    for rec in source.iter_inputs(begin):
        if rec.channel not in remaining:
            continue
        if rec.offset >= end[rec.channel]:
            remaining.discard(rec.channel)
            if not remaining:
                return
            continue
        yield rec
        if rec.offset + 1 >= end[rec.channel]:
            remaining.discard(rec.channel)
            if not remaining:
                return


async def read_range_async(log: EventLog, start: Mapping[str, int], end: Mapping[str, int]) -> list[LogRecord]:
    """``read_range`` over the async port (recovery): the same records, or ``LogError`` when the
    log lacks some the output log says were consumed."""
    positions = dict(start)
    out: list[LogRecord] = []
    while any(positions.get(ch, 0) < stop for ch, stop in end.items()):
        batch = await log.read_inputs(positions, READ_BATCH)
        progressed = False
        for rec in batch:
            if rec.offset < end.get(rec.channel, 0) and rec.offset >= positions.get(rec.channel, 0):
                out.append(rec)
                positions[rec.channel] = rec.offset + 1
                progressed = True
        if not progressed:
            missing = {ch: (positions.get(ch, 0), stop) for ch, stop in end.items() if positions.get(ch, 0) < stop}
            raise LogError(f"input log is missing records the output log says were consumed: {missing}")
    return out


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
        """Buffer the next chunk of records; False once the inputs are exhausted."""
        if self._ended:
            return False
        chunk = list(islice(self._records, PULL_CHUNK))
        if not chunk:
            self._ended = True
            return False
        buffers = self._buffers
        for rec in chunk:
            buf = buffers.get(rec.channel)
            if buf is None:
                buf = buffers[rec.channel] = deque()
            buf.append(rec)
        return True

    def _take_channel(self, channel: str, lo: int, hi: int) -> list[LogRecord]:
        buf = self._buffers.setdefault(channel, deque())
        while buf and buf[0].offset < lo:
            buf.popleft()
        if hi <= lo:
            return []
        while (not buf or buf[-1].offset < hi - 1) and self._pull():
            pass
        # Offsets of one channel increase, so the wanted records are the buffer's head.
        count = min(len(buf), hi - buf[0].offset) if buf else 0
        if count == len(buf):
            out = list(buf)
            buf.clear()
        else:
            out = [buf.popleft() for _ in range(count)]
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
