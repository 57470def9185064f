"""MemoryLog: the in-memory EventLog adapter (input channels ``inputs`` and ``admin``), for tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType

from events.log.clock import wall_clock_us
from events.log.port import LogError, LogRecord

INPUTS = "inputs"
ADMIN = "admin"
OUTPUTS = "outputs"


class MemoryLog:
    """An ``EventLog`` held in two lists; nothing survives ``close``.

    Behaves like ``FileLog`` in every way the contract suite checks: input channels
    ``inputs`` and ``admin``, dense offsets from 0, one append time per ``append_*`` call taken from
    the injected ``now_us`` clock, ``LogError`` after ``close``.
    """

    def __init__(self, now_us: Callable[[], int] = wall_clock_us) -> None:
        self._now_us = now_us
        self._inputs: list[LogRecord] = []
        self._admin: list[LogRecord] = []
        self._outputs: list[LogRecord] = []
        self._closed = False

    def _check(self) -> None:
        if self._closed:
            raise LogError("the memory log is closed")

    @staticmethod
    def _slice(records: list[LogRecord], start: int, max_records: int | None) -> list[LogRecord]:
        if start < 0:
            raise LogError(f"negative offset {start}")
        if max_records is None:
            return records[start:]
        return records[start : start + max(max_records, 0)]

    # -- the EventLog port -----------------------------------------------------------

    def _append(self, channel: str, into: list[LogRecord], records: Sequence[tuple[bytes | None, bytes]]) -> None:
        self._check()
        if not records:
            return
        now, base = self._now_us(), len(into)
        into.extend(
            LogRecord(channel, base + i, bytes(value), now, None if key is None else bytes(key))
            for i, (key, value) in enumerate(records)
        )

    async def append_inputs(self, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        self._append(INPUTS, self._inputs, records)

    async def append_admin(self, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        self._append(ADMIN, self._admin, records)

    async def read_inputs(self, positions: Mapping[str, int], max_records: int) -> list[LogRecord]:
        self._check()
        admin = self._slice(self._admin, positions.get(ADMIN, 0), max_records)
        return admin + self._slice(self._inputs, positions.get(INPUTS, 0), max_records - len(admin))

    async def input_channels(self) -> list[str]:
        self._check()
        return [INPUTS, ADMIN]

    async def admin_channels(self) -> list[str]:
        return [ADMIN]

    async def input_end(self) -> dict[str, int]:
        self._check()
        return {INPUTS: len(self._inputs), ADMIN: len(self._admin)}

    async def append_outputs(self, values: Sequence[bytes]) -> None:
        self._check()
        if not values:
            return
        now, base = self._now_us(), len(self._outputs)
        self._outputs.extend(
            LogRecord(OUTPUTS, base + i, bytes(value), now) for i, value in enumerate(values)
        )

    async def read_outputs(self, start: int = 0, max_records: int | None = None) -> list[LogRecord]:
        self._check()
        return self._slice(self._outputs, start, max_records)

    async def output_end(self) -> int:
        self._check()
        return len(self._outputs)

    async def close(self) -> None:
        self.close_sync()

    # -- synchronous access for tools ------------------------------------------------

    def iter_inputs(self, start_positions: Mapping[str, int] | None = None) -> Iterator[LogRecord]:
        """Input records from ``start_positions`` (default: the beginning) to the end."""
        self._check()
        start = start_positions or {}
        return iter(self._slice(self._admin, start.get(ADMIN, 0), None)
                    + self._slice(self._inputs, start.get(INPUTS, 0), None))

    def iter_outputs(self, start: int = 0) -> Iterator[LogRecord]:
        """Output records from offset ``start`` to the end."""
        self._check()
        return iter(self._slice(self._outputs, start, None))

    def close_sync(self) -> None:
        """Close without an event loop; idempotent."""
        self._closed = True

    async def __aenter__(self) -> MemoryLog:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close_sync()
