"""FileLog: the embedded default EventLog — segment files in one directory, one writer.

Layout::

    <dir>/LOCK                              flock'ed by the one writer; holds its pid
    <dir>/inputs/00000000000000000000.seg   input channel ``inputs`` (resource managers)
    <dir>/admin/00000000000000000000.seg    input channel ``admin`` (config and priority
                                            classes from ``config apply`` and the like)
    <dir>/outputs/00000000000000000000.seg  the outputs stream

The input channels merge in the order ``inputs``, ``admin`` (``input_channels``). A log
written before the admin channel has no ``admin`` directory: read-only it reads as an
empty channel; a writer creates it.

Segments and recovery are described in ``segments``, the frame format in ``framing``.
The async port methods do their (short, local) file I/O directly; tools that must not
use asyncio read with ``iter_inputs`` / ``iter_outputs`` and close with ``close_sync``.

``readonly=True`` opens without the lock (so tools can read a log a live service is
writing), never writes or truncates, stops before a torn tail, and picks up records
appended by the writer when it reaches its end.
"""

from __future__ import annotations

import errno
import fcntl
import itertools
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from events.log.clock import wall_clock_us
from events.log.framing import encode_batch
from events.log.port import LogError, LogInUse, LogRecord
from events.log.segments import Channel, FsyncPolicy

__all__ = ["FileLog", "FsyncPolicy"]

INPUTS = "inputs"
ADMIN = "admin"
OUTPUTS = "outputs"
MiB = 1 << 20
_ITER_CHUNK = 1024


def is_log(directory: str | os.PathLike[str]) -> bool:
    """Whether ``directory`` holds an embedded log (a writer has opened it: it has channels)."""
    return any((Path(directory) / name).is_dir() for name in (INPUTS, OUTPUTS))


class FileLog:
    """An ``EventLog`` on local disk (see the module docstring).

    ``repairs`` lists, in words, every torn tail found on open (and truncated, unless
    read-only); each is also logged at WARNING on the ``evsched.log`` logger.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        fsync: FsyncPolicy = FsyncPolicy.BATCH,
        segment_bytes: int = 64 * MiB,
        now_us: Callable[[], int] = wall_clock_us,
        readonly: bool = False,
        verify_all: bool = False,
    ) -> None:
        self.directory = Path(directory)
        self.readonly = readonly
        self.repairs: list[str] = []
        self._now_us = now_us
        self._lock_fd: int | None = None
        self._channels: list[Channel] = []
        if readonly:
            if not self.directory.is_dir():
                raise LogError(f"no log at {self.directory}: the directory does not exist")
            if not is_log(self.directory):
                raise LogError(f"no log at {self.directory}: the directory holds no {INPUTS}/ or {OUTPUTS}/")
        else:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise LogError(f"cannot create log directory {self.directory}: {exc}") from exc
            self._lock()
        try:
            for name in (INPUTS, ADMIN, OUTPUTS):
                self._channels.append(
                    Channel(
                        name,
                        self.directory / name,
                        readonly=readonly,
                        fsync=fsync,
                        segment_bytes=segment_bytes,
                        verify_all=verify_all,
                        repairs=self.repairs,
                    )
                )
        except BaseException as exc:
            self.close_sync()
            if isinstance(exc, OSError):
                raise LogError(f"cannot open log in {self.directory}: {exc}") from exc
            raise
        self._inputs, self._admin, self._outputs = self._channels

    def _lock(self) -> None:
        path = self.directory / "LOCK"
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise LogError(f"cannot open {path}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise LogError(f"cannot lock {path}: {exc}") from exc
            same = " — this very process: close the other FileLog first"
            raise LogInUse(
                f"log directory {self.directory} is in use by another process (pid {holder})"
                + (same if holder == str(os.getpid()) else "")
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._lock_fd = fd

    # -- the EventLog port -----------------------------------------------------------

    async def append_inputs(self, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        self.append_inputs_sync(records)

    async def append_admin(self, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        self.append_admin_sync(records)

    async def read_inputs(self, positions: Mapping[str, int], max_records: int) -> list[LogRecord]:
        # The admin channel first: it is small, and a backlog of inputs must not hold it up.
        admin = self._admin.read(positions.get(ADMIN, 0), max_records)
        return admin + self._inputs.read(positions.get(INPUTS, 0), max_records - len(admin))

    async def input_channels(self) -> list[str]:
        self._inputs.check()
        return [INPUTS, ADMIN]

    async def admin_channels(self) -> list[str]:
        return [ADMIN]

    async def input_end(self) -> dict[str, int]:
        self._inputs.refresh()
        self._admin.refresh()
        return {INPUTS: self._inputs.end, ADMIN: self._admin.end}

    async def append_outputs(self, values: Sequence[bytes]) -> None:
        self.append_outputs_sync(values)

    async def read_outputs(self, start: int = 0, max_records: int | None = None) -> list[LogRecord]:
        return self._outputs.read(start, max_records)

    async def output_end(self) -> int:
        self._outputs.refresh()
        return self._outputs.end

    async def close(self) -> None:
        self.close_sync()

    # -- synchronous access for tools ------------------------------------------------

    def append_inputs_sync(self, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        """``append_inputs`` without an event loop."""
        if records:
            self._inputs.append(encode_batch(self._now_us(), records))

    def append_admin_sync(self, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        """``append_admin`` without an event loop."""
        if records:
            self._admin.append(encode_batch(self._now_us(), records))

    def append_outputs_sync(self, values: Sequence[bytes]) -> None:
        """``append_outputs`` without an event loop."""
        if values:
            self._outputs.append(encode_batch(self._now_us(), [(None, v) for v in values]))

    def iter_inputs(self, start_positions: Mapping[str, int] | None = None) -> Iterator[LogRecord]:
        """Input records from ``start_positions`` (default: the beginning) to the end: the
        admin channel's, then the inputs' (each channel in offset order)."""
        start = start_positions or {}
        admin = self._iter(self._admin, start.get(ADMIN, 0))
        return itertools.chain(admin, self._iter(self._inputs, start.get(INPUTS, 0)))

    def iter_outputs(self, start: int = 0) -> Iterator[LogRecord]:
        """Output records from offset ``start`` to the end."""
        return self._iter(self._outputs, start)

    @staticmethod
    def _iter(channel: Channel, start: int) -> Iterator[LogRecord]:
        batch = channel.read(start, _ITER_CHUNK)  # errors surface here, not on first next()
        return _chunks(channel, batch, start)

    def close_sync(self) -> None:
        """Close files and release the lock without an event loop; idempotent."""
        for channel in self._channels:
            channel.close()
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> FileLog:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close_sync()

    async def __aenter__(self) -> FileLog:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close_sync()


def _chunks(channel: Channel, batch: list[LogRecord], start: int) -> Iterator[LogRecord]:
    while batch:
        yield from batch
        start += len(batch)
        batch = channel.read(start, _ITER_CHUNK)
