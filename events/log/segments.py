"""One channel of the file log: a directory of append-only segment files and their index.

A segment is named by the offset of its first record (``00000000000000000000.seg``)
and holds frames (see ``framing``) back to back. Offsets are record indices, so a
segment's records are ``base, base+1, …``; segment ``n+1`` starts where ``n`` ends.

Opening walks every segment once to build the index (per segment, the file position
of each record), so a read is a bisect plus one ``pread``, never a rescan. Checks:

* the **last** segment is fully validated (structure and crc of every frame): it is
  where a crash can leave a torn write. A bad frame with nothing valid after it is a
  torn tail: it is reported (``repairs``, WARNING on ``evsched.log``) and truncated
  away (read-only opens just stop before it). A bad frame with valid frames after it
  is damage inside acknowledged data: ``LogError``, nothing is dropped.
* **earlier** segments get a structural walk (magic, lengths, key lengths), which the
  index needs anyway. A crc of every byte on every start (measured: 1M small records
  open in 0.37 s structurally, 0.64 s with crc) buys little when every read verifies
  the crc of what it returns; ``verify_all=True`` does it anyway. Problems: ``LogError``.

Appends are all-or-nothing as far as readers of this instance can tell: on an
``OSError`` (ENOSPC, EIO, …) the segment is truncated back to its size before the
append, segments created by it are removed, and ``LogError`` is raised. (A read-only
instance in *another* process may glimpse frames of an append that is then rolled
back.)
"""

from __future__ import annotations

import enum
import errno
import logging
import os
import re
from array import array
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from events.log.framing import (
    MAGIC,
    MIN_FRAME,
    ScanResult,
    check_frame,
    decode_frames,
    frame_size,
    scan,
    valid_frame_after,
)
from events.log.port import LogError, LogRecord

logger = logging.getLogger("evsched.log")

_SEGMENT_NAME = re.compile(r"^(\d{20})\.seg$")
_MAX_READ_FDS = 64
# Below glibc's mmap threshold (128 KiB): each chunk ``quick_structure`` reads reuses the
# heap memory the previous one freed, instead of faulting in fresh pages.
QUICK_CHUNK = 120 << 10


class FsyncPolicy(enum.Enum):
    """When appends reach stable storage.

    NEVER: never fsync (survives a process crash, not a power cut). BATCH: one fsync per
    ``append_*`` call, before it returns (the default). ALWAYS: fsync after every single
    record, so a power cut mid-batch keeps every record written before it.
    Under BATCH and ALWAYS a segment is also synced before the next one is created, and
    the directory is synced after a segment file is created or removed.
    """

    NEVER = "never"
    BATCH = "batch"
    ALWAYS = "always"


def segment_name(base: int) -> str:
    """File name of the segment whose first record has offset ``base``."""
    return f"{base:020d}.seg"


@dataclass(slots=True, eq=False)
class _Segment:
    base: int
    path: Path
    size: int = 0  # bytes of valid frames
    positions: array[int] = field(default_factory=lambda: array("q"))
    unindexed: int = -1  # ≥ 0: not indexed yet, holds this many records (its successor's name says)

    @property
    def count(self) -> int:
        return self.unindexed if self.unindexed >= 0 else len(self.positions)


@dataclass(slots=True, eq=False)
class _Pending:
    seg: _Segment
    fd: int
    size: int
    positions: array[int] = field(default_factory=lambda: array("q"))
    chunk: list[bytes] = field(default_factory=list)


def _sync(fd: int) -> None:
    (getattr(os, "fdatasync", None) or os.fsync)(fd)


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Channel:
    """The segments of one channel (``inputs`` or ``outputs``), their index and writer."""

    def __init__(
        self,
        name: str,
        directory: Path,
        *,
        readonly: bool,
        fsync: FsyncPolicy,
        segment_bytes: int,
        verify_all: bool,
        repairs: list[str],
    ) -> None:
        if segment_bytes < 1:
            raise ValueError("segment_bytes must be positive")
        self.name = name
        self._dir = directory
        self._readonly = readonly
        self._fsync = fsync
        self._segment_bytes = segment_bytes
        self._verify_all = verify_all
        self._repairs = repairs
        self._segments: list[_Segment] = []
        self._bases: list[int] = []
        self._read_fds: OrderedDict[Path, int] = OrderedDict()
        self._wfd: int | None = None
        self._broken: str | None = None
        self._closed = False
        self._load()

    # -- opening ---------------------------------------------------------------------

    def _load(self) -> None:
        if not self._dir.is_dir():
            if self._readonly:
                return
            self._dir.mkdir(parents=True)
            if self._fsync is not FsyncPolicy.NEVER:
                _sync_dir(self._dir.parent)
        bases = sorted(
            int(m.group(1)) for p in self._dir.iterdir() if (m := _SEGMENT_NAME.match(p.name))
        )
        for i, base in enumerate(bases):
            last = i == len(bases) - 1
            if self._readonly and not last and not self._verify_all:
                # A reader (replay) indexes a full segment when it first reads it, so asking
                # about the end of a long log does not scan all of it first.
                seg = _Segment(base, self._dir / segment_name(base), unindexed=bases[i + 1] - base)
            else:
                seg = self._scan_segment(base, last=last)
            if self._segments and seg.base != self.end:
                raise LogError(
                    f"{seg.path}: segment starts at offset {seg.base} but the previous one ends "
                    f"at offset {self.end}: a segment is missing or damaged"
                )
            self._add(seg)
        if not self._readonly:
            if not self._segments:
                self._wfd = self._create_segment(0)
                self._add(_Segment(0, self._dir / segment_name(0)))
            else:
                flags = os.O_RDWR | os.O_APPEND
                self._wfd = os.open(self._segments[-1].path, flags)

    def _add(self, seg: _Segment) -> None:
        self._segments.append(seg)
        self._bases.append(seg.base)

    def _scan_segment(self, base: int, *, last: bool) -> _Segment:
        seg = _Segment(base, self._dir / segment_name(base))
        if self._readonly and not self._verify_all:
            # A reader (replay, audit) checks every record's crc when it reads it
            # (``decode_frames``), so at open a segment whose structure holds is indexed from
            # its frame heads alone; of the last segment, the last frame's crc is checked too:
            # a torn write can leave a frame whose structure holds and whose bytes do not.
            # Anything else is read whole and judged below, as a writer judges it.
            quick = quick_structure(seg.path, check_last_crc=last)
            if quick is not None:
                seg.positions, seg.size = quick.positions, quick.end
                return seg
        # Read, not mmap: a file truncated under a mapping (a writer repairing or rolling
        # back while a read-only instance opens) would kill this process with SIGBUS.
        data = seg.path.read_bytes()
        size = len(data)
        view = memoryview(data)
        result = scan(data, 0, check_crc=last or self._verify_all)
        follow = None
        if result.problem is not None and last:
            follow = valid_frame_after(view, result.end + 1)
        seg.positions, seg.size = result.positions, result.end
        if result.problem is None:
            return seg
        where = (
            f"{self.name}: {seg.path}: {result.problem} at byte {result.end} "
            f"(record {self.name}@{seg.base + seg.count})"
        )
        if not last:
            raise LogError(
                f"{where}; later segments hold newer records, so this is not a torn tail — "
                "refusing to open (restore the segment or move it aside deliberately)"
            )
        if follow is not None:
            raise LogError(
                f"{where}, but valid records follow at byte {follow}: this is damage inside "
                "acknowledged data, not a torn tail — refusing to drop them"
            )
        lost = size - result.end
        rest = view[result.end :]
        if not result.positions and rest[0] != MAGIC and rest.tobytes().strip(b"\x00"):
            # Not one record, and bytes no append of ours starts with: a file of garbage.
            raise LogError(
                f"{where}: the segment holds no record, and its {lost} bytes neither start like a frame "
                "nor are zero-filled: this is not a torn write (a crash mid-append leaves a frame's first "
                "bytes, or zeros) — refusing to truncate it (restore the segment or move it aside deliberately)"
            )
        if self._readonly:
            note = f"{where}: torn tail of {lost} bytes ignored (read-only open, not repaired)"
        else:
            note = f"{where}: torn tail of {lost} bytes truncated to the last valid record"
            fd = os.open(seg.path, os.O_RDWR)
            try:
                os.ftruncate(fd, result.end)
                if self._fsync is not FsyncPolicy.NEVER:
                    _sync(fd)
            finally:
                os.close(fd)
        self._repairs.append(note)
        logger.warning("%s", note)
        return seg

    def _create_segment(self, base: int) -> int:
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND
        path = self._dir / segment_name(base)
        fd = os.open(path, flags, 0o644)
        if self._fsync is not FsyncPolicy.NEVER:
            try:
                _sync_dir(self._dir)
            except OSError:
                os.close(fd)
                path.unlink()
                raise
        return fd

    # -- state -----------------------------------------------------------------------

    @property
    def start(self) -> int:
        """Offset of the first record still stored."""
        return self._segments[0].base if self._segments else 0

    @property
    def end(self) -> int:
        """Offset one past the last record."""
        if not self._segments:
            return 0
        last = self._segments[-1]
        return last.base + last.count

    def check(self, *, write: bool = False) -> None:
        """Raise ``LogError`` if closed, or for ``write`` if read-only or broken."""
        if self._closed:
            raise LogError(f"{self.name}: the log is closed")
        if write and self._broken is not None:
            raise LogError(self._broken)  # reads stay safe: the index never saw the frames
        if write and self._readonly:
            raise LogError(f"{self.name}: the log was opened read-only")

    # -- appending -------------------------------------------------------------------

    def append(self, frames: Sequence[bytes]) -> None:
        """Append encoded frames; all of them, or (on ``LogError``) none."""
        self.check(write=True)
        if not frames:
            return
        assert self._wfd is not None
        active = self._segments[-1]
        plan = [_Pending(active, self._wfd, active.size)]
        per_record = self._fsync is FsyncPolicy.ALWAYS
        try:
            for frame in frames:
                cur = plan[-1]
                if cur.size > 0 and cur.size + len(frame) > self._segment_bytes:
                    self._flush(cur, sync=self._fsync is not FsyncPolicy.NEVER)
                    base = cur.seg.base + cur.seg.count + len(cur.positions)
                    seg = _Segment(base, self._dir / segment_name(base))
                    cur = _Pending(seg, -1, 0)
                    plan.append(cur)  # before creating, so a rollback sees it
                    cur.fd = self._create_segment(base)
                cur.positions.append(cur.size)
                cur.chunk.append(frame)
                cur.size += len(frame)
                if per_record:
                    self._flush(cur, sync=True)
            self._flush(plan[-1], sync=self._fsync is not FsyncPolicy.NEVER)
        except BaseException as exc:  # also KeyboardInterrupt: never leave frames unindexed
            self._rollback(active, plan)
            if isinstance(exc, OSError):
                raise LogError(self._describe(exc)) from exc
            raise
        for p in plan:
            p.seg.positions.extend(p.positions)
            p.seg.size = p.size
            if p.seg is not active:
                self._add(p.seg)
        if len(plan) > 1:
            for p in plan[:-1]:
                os.close(p.fd)
            self._wfd = plan[-1].fd

    @staticmethod
    def _flush(p: _Pending, *, sync: bool) -> None:
        if p.chunk:
            view = memoryview(b"".join(p.chunk))
            p.chunk.clear()
            while view:
                view = view[os.write(p.fd, view) :]
        if sync:
            _sync(p.fd)

    def _rollback(self, active: _Segment, plan: list[_Pending]) -> None:
        try:
            for p in plan[1:]:
                if p.fd >= 0:
                    os.close(p.fd)
                    os.unlink(p.seg.path)
            os.ftruncate(plan[0].fd, active.size)
            if self._fsync is not FsyncPolicy.NEVER:
                _sync(plan[0].fd)
                if len(plan) > 1:
                    _sync_dir(self._dir)
        except OSError as exc:
            self._broken = (
                f"{self.name}: a failed append could not be undone ({exc}); "
                f"the log in {self._dir} must be reopened to recover"
            )
            logger.error("%s", self._broken)

    def _describe(self, exc: OSError) -> str:
        what = {errno.ENOSPC: "disk full (ENOSPC)", errno.EDQUOT: "disk quota exceeded (EDQUOT)"}
        return (
            f"{self.name}: {what.get(exc.errno or 0, f'I/O error ({exc})')} while appending "
            f"to {self._dir}; the append was rolled back and none of it is visible"
        )

    # -- reading ---------------------------------------------------------------------

    def read(self, start: int, max_records: int | None) -> list[LogRecord]:
        """Records from offset ``start`` on, at most ``max_records`` (all when ``None``)."""
        self.check(write=False)
        if start < 0:
            raise LogError(f"{self.name}: negative offset {start}")
        if self._readonly and start >= self.end:
            self.refresh()
        end = self.end
        if start >= end or (max_records is not None and max_records <= 0):
            return []
        if start < self.start:
            raise LogError(f"{self.name}: offset {start} is before the log's start {self.start}")
        want = end - start if max_records is None else min(max_records, end - start)
        out: list[LogRecord] = []
        i = bisect_right(self._bases, start) - 1
        while want > 0:
            seg = self._segments[i]
            if seg.unindexed >= 0:
                self._index(seg)
            k = start - seg.base
            n = min(want, seg.count - k)
            if n > 0:
                p0 = seg.positions[k]
                p1 = seg.positions[k + n] if k + n < seg.count else seg.size
                data = os.pread(self._read_fd(seg), p1 - p0, p0)
                if len(data) != p1 - p0:
                    raise LogError(f"{seg.path}: file is shorter than its index (truncated?)")
                out.extend(decode_frames(data, n, self.name, start, str(seg.path)))
                start += n
                want -= n
            i += 1
        return out

    def _index(self, seg: _Segment) -> None:
        """Index a full segment opened lazily; it must hold what its successor's name says."""
        scanned = self._scan_segment(seg.base, last=False)  # raises on any bad frame
        if scanned.count != seg.unindexed:
            raise LogError(
                f"{seg.path}: holds {scanned.count} records, but the next segment starts at offset "
                f"{seg.base + seg.unindexed}: a segment is damaged or was replaced"
            )
        seg.positions, seg.size, seg.unindexed = scanned.positions, scanned.size, -1

    def _read_fd(self, seg: _Segment) -> int:
        fd = self._read_fds.get(seg.path)
        if fd is None:
            fd = os.open(seg.path, os.O_RDONLY)
            self._read_fds[seg.path] = fd
            while len(self._read_fds) > _MAX_READ_FDS:
                os.close(self._read_fds.popitem(last=False)[1])
        else:
            self._read_fds.move_to_end(seg.path)
        return fd

    def refresh(self) -> None:
        """Read-only instances: pick up records another process appended since opening."""
        self.check()
        if not self._readonly or not self._dir.is_dir():
            return
        if self._segments:
            last = self._segments[-1]
            size = os.stat(last.path).st_size
            if size > last.size:
                data = os.pread(self._read_fd(last), size - last.size, last.size)
                result = scan(data, last.size, check_crc=True)
                last.positions.extend(result.positions)
                last.size = result.end
                if result.problem is not None:
                    return  # the writer is mid-append; the rest shows up on a later call
        while not self._segments or self._segments[-1].count > 0:
            seg = _Segment(self.end, self._dir / segment_name(self.end))
            try:
                data = seg.path.read_bytes()
            except FileNotFoundError:
                return
            result = scan(data, 0, check_crc=True)
            seg.positions, seg.size = result.positions, result.end
            self._add(seg)
            if result.problem is not None:
                return  # as above

    # -- closing ---------------------------------------------------------------------

    def close(self) -> None:
        """Close every file descriptor; idempotent."""
        if self._closed:
            return
        self._closed = True
        while self._read_fds:
            os.close(self._read_fds.popitem()[1])
        if self._wfd is not None:
            os.close(self._wfd)
            self._wfd = None


def quick_structure(path: Path, *, check_last_crc: bool = False) -> ScanResult | None:
    """A segment file's frame positions when its structure holds to its end (and, with
    ``check_last_crc``, its last frame's crc), read in chunks of ``QUICK_CHUNK``; None when
    it does not hold (or the file shrank): scan it whole then.

    Reading a whole segment into one buffer faulted in a fresh page per 4 KiB, most of the
    time to open a long log read-only (benchmarks/RESULTS.md). A frame cut by a chunk's end
    is read again from its start, whole; one that fits and still fails is damage: None.
    """
    positions: array[int] = array("q")
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        pos, want, chunk, at = 0, QUICK_CHUNK, b"", 0
        while pos < size:
            chunk, at = os.pread(fd, want, pos), pos
            if len(chunk) < min(want, size - pos):
                return None  # the file shrank under us
            part = scan(chunk, pos, check_crc=False)
            positions.extend(part.positions)
            want = QUICK_CHUNK
            if part.problem is not None:
                rel = part.end - pos
                need = frame_size(chunk, rel)
                if part.end + MIN_FRAME > size or chunk[rel] != MAGIC:
                    return None  # a torn or damaged tail, or no frame head: judged whole
                if need is None:  # the chunk ends inside a frame head
                    want = max(QUICK_CHUNK, MIN_FRAME)
                elif rel + need <= len(chunk) or part.end + need > size:
                    return None  # the frame was all there, or runs past the file
                else:
                    want = max(need, QUICK_CHUNK)  # the next read holds it whole
            pos = part.end
        # The last chunk read (from ``at``) holds the last frame whole.
        if check_last_crc and positions:
            last = positions[-1] - at
            if check_frame(memoryview(chunk), last, len(chunk), True) is not None:
                return None
        return ScanResult(positions, pos, None)
    finally:
        os.close(fd)
