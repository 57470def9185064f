"""Record framing for the embedded file log: encode, decode and validate frames.

A segment file is a plain concatenation of frames. One frame, little-endian::

    offset  size  field
    0       1     magic/version byte, 0xE1 ("evsched log, format 1")
    1       4     length: u32, number of bytes after the crc field (12 + key + value)
    5       4     crc32 (zlib) of bytes [0:5] followed by bytes [9:end]
    9       8     append_time_us: i64
    17      4     key_len: i32, -1 when the record has no key
    21      k     key (k = max(key_len, 0))
    21+k    v     value (v = length - 12 - k)

The crc covers every header field except itself, and the payload, so a flipped bit
anywhere in a frame is caught. The magic byte is never zero, so a zero-filled block
(what a file system may leave after a crash) never parses as a frame.

Worked example: key ``b"k"``, value ``b"v"``, time 5 → length 14, frame 23 bytes::

    e1 0e000000 <crc32> 0500000000000000 01000000 6b 76
"""

from __future__ import annotations

import struct
import zlib
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from events.log.port import LogError, LogRecord

MAGIC: Final = 0xE1
_PREFIX = struct.Struct("<BI")  # magic, length: the crc'd part of the header
_HEAD = struct.Struct("<BII")  # magic, length, crc
_META = struct.Struct("<qi")  # append_time_us, key_len
HEAD_SIZE: Final = 9  # _HEAD.size
META_SIZE: Final = 12  # _META.size
MIN_FRAME: Final = HEAD_SIZE + META_SIZE  # 21: a frame with no key and an empty value
MAX_LENGTH: Final = 0xFFFF_FFFF
assert _HEAD.size == HEAD_SIZE and _META.size == META_SIZE


# Little-endian fields read byte by byte: this module is compiled (docs/native.md), where
# indexing ``bytes`` is a C operation and a ``Struct`` call a Python one (opening a long
# log walks every frame's header, reading it decodes every frame).
def _u32(data: bytes, at: int) -> int:
    return data[at] | data[at + 1] << 8 | data[at + 2] << 16 | data[at + 3] << 24


def _i32(data: bytes, at: int) -> int:
    value = _u32(data, at)
    return value - (1 << 32) if value >= 1 << 31 else value


def _i64(data: bytes, at: int) -> int:
    value = _u32(data, at) | _u32(data, at + 4) << 32
    return value - (1 << 64) if value >= 1 << 63 else value


def frame_size(data: bytes, pos: int) -> int | None:
    """The size of the frame at ``data[pos:]`` as its head says, or None when ``data`` ends
    inside the head (``MIN_FRAME`` bytes). Only the head is read: the frame may be damaged."""
    if len(data) - pos < MIN_FRAME:
        return None
    return HEAD_SIZE + _u32(data, pos + 1)


def encode_frame(append_time_us: int, key: bytes | None, value: bytes) -> bytes:
    """One record as a frame (see the module docstring for the layout)."""
    klen = -1 if key is None else len(key)
    body = _META.pack(append_time_us, klen) + (key or b"") + value
    length = len(body)
    if length > MAX_LENGTH:
        raise LogError(f"record too large for the file log: {length} bytes (max {MAX_LENGTH})")
    crc = zlib.crc32(body, zlib.crc32(_PREFIX.pack(MAGIC, length)))
    return _HEAD.pack(MAGIC, length, crc) + body


@dataclass(slots=True)
class ScanResult:
    """What scanning a run of frames found: their positions, where valid data ends, why."""

    positions: array[int]
    end: int  # file position one past the last valid frame
    problem: str | None  # why scanning stopped before the end of the data, if it did


def check_frame(buf: memoryview, pos: int, limit: int, check_crc: bool) -> str | None:
    """Why the frame at ``buf[pos:]`` is not valid (``None`` when it is).

    ``limit`` is where the data ends; ``check_crc=False`` checks only the structure
    (magic, length, key length), which is what walking an index needs.
    """
    avail = limit - pos
    if avail < MIN_FRAME or buf[pos] != MAGIC:
        if _all_zero(buf[pos:limit]):
            return f"zero-filled block of {avail} bytes"
        if avail < MIN_FRAME:
            return f"truncated frame header ({avail} of {MIN_FRAME} bytes)"
        return f"bad magic byte 0x{buf[pos]:02x}"
    _, length, crc = _HEAD.unpack_from(buf, pos)
    if length < META_SIZE:
        return f"bad frame length {length}"
    if HEAD_SIZE + length > avail:
        return f"truncated frame (needs {HEAD_SIZE + length} bytes, {avail} present)"
    klen = _META.unpack_from(buf, pos + HEAD_SIZE)[1]
    if klen < -1 or klen > length - META_SIZE:
        return f"bad key length {klen}"
    if check_crc:
        stop = pos + HEAD_SIZE + length
        actual = zlib.crc32(buf[pos + HEAD_SIZE : stop], zlib.crc32(buf[pos : pos + 5]))
        if actual != crc:
            return f"crc mismatch (stored 0x{crc:08x}, computed 0x{actual:08x})"
    return None


def _all_zero(chunk: memoryview) -> bool:
    return chunk.tobytes().count(0) == len(chunk)


def scan(data: bytes, base: int, check_crc: bool) -> ScanResult:
    """Walk the frames in ``data`` (which starts at file position ``base``).

    Stops at the first invalid frame; ``problem`` says what was wrong there. Positions
    in the result are file positions (``base`` added).
    """
    positions: array[int] = array("q")
    pos, limit = 0, len(data)
    view = memoryview(data)
    crc32 = zlib.crc32
    while pos < limit:
        # Fast path for the common case; check_frame says exactly what is wrong otherwise.
        if limit - pos >= MIN_FRAME and data[pos] == MAGIC:
            length = _u32(data, pos + 1)
            stop = pos + HEAD_SIZE + length
            if length >= META_SIZE and stop <= limit:
                klen = _i32(data, pos + HEAD_SIZE + 8)
                ok = -1 <= klen <= length - META_SIZE
                if ok and check_crc:
                    ok = crc32(view[pos + HEAD_SIZE : stop], crc32(view[pos : pos + 5])) == _u32(data, pos + 5)
                if ok:
                    positions.append(base + pos)
                    pos = stop
                    continue
        return ScanResult(positions, base + pos, check_frame(view, pos, limit, check_crc))
    return ScanResult(positions, base + pos, None)


CRC_BUDGET_PER_BYTE = 8  # checksum work allowed per byte of tail, before giving up (see below)


def valid_frame_after(buf: memoryview, start: int) -> int | None:
    """Position of the first CRC-valid frame at or after ``start``, if there is one.

    Used to tell a torn tail (nothing valid follows) from corruption in the middle of
    acknowledged data (valid frames follow), which must not be silently dropped. Random
    damage offers few candidates; a tail crafted so that every few bytes look like the
    head of a frame reaching the end would make this quadratic, so the checksum work is
    bounded and, past the bound, the tail is refused (never dropped) with ``LogError``.
    """
    magic = bytes([MAGIC])
    limit = len(buf)
    tail = buf[start:].tobytes()
    budget = CRC_BUDGET_PER_BYTE * len(tail) + (1 << 20)
    found = tail.find(magic)
    while found != -1 and start + found + MIN_FRAME <= limit:
        pos = start + found
        size = frame_size(tail, found)
        assert size is not None  # MIN_FRAME bytes are left (the loop's condition)
        if size <= limit - pos:  # only a frame that fits gets its crc computed
            budget -= size - HEAD_SIZE
            if budget < 0:
                raise LogError(
                    f"cannot tell a torn tail from damage inside acknowledged data after byte {start}: "
                    f"{len(tail)} bytes full of frame-like heads (crafted?); refusing to drop them"
                )
        if check_frame(buf, pos, limit, check_crc=True) is None:
            return pos
        found = tail.find(magic, found + 1)
    return None


def decode_frames(
    buf: bytes, count: int, channel: str, first_offset: int, where: str
) -> list[LogRecord]:
    """Decode ``count`` consecutive frames from ``buf``, verifying every crc.

    ``where`` names the segment in error messages. A frame that fails here was valid
    when the log was opened, so this is damage after the fact: it raises ``LogError``.
    """
    out: list[LogRecord] = []
    size = len(buf)
    pos = 0
    crc32 = zlib.crc32
    new_record = tuple.__new__  # LogRecord(...) runs a Python-level __new__; the tuple is the same
    for i in range(count):
        time_us, klen = 0, -2
        # The length and key length are checked too: a frame rewritten with a matching crc
        # (not chance damage, but possible) must not make the slicing below read past it.
        ok = pos + MIN_FRAME <= size and buf[pos] == MAGIC
        length = _u32(buf, pos + 1) if ok else 0
        stop = pos + HEAD_SIZE + length
        if ok and length >= META_SIZE and stop <= size:
            time_us, klen = _i64(buf, pos + HEAD_SIZE), _i32(buf, pos + HEAD_SIZE + 8)
            ok = -1 <= klen <= length - META_SIZE
        else:
            ok = False
        kstart = pos + MIN_FRAME
        vstart = kstart + max(klen, 0)
        if ok:
            # The crc runs over the header's first 5 bytes, then the rest of the frame: its
            # metadata and key, then the value (sliced once: it is the record's value).
            value = buf[vstart:stop]
            crc = crc32(value, crc32(buf[pos + HEAD_SIZE : vstart], crc32(buf[pos : pos + 5])))
            ok = crc == _u32(buf, pos + 5)
        if not ok:
            offset = first_offset + i
            raise LogError(
                f"{where}: record {channel}@{offset} is corrupt (damaged since the log was "
                "opened); refusing to return it"
            )
        key = None if klen < 0 else buf[kstart:vstart]
        out.append(new_record(LogRecord, (channel, first_offset + i, value, time_us, key)))
        pos = stop
    return out


def encode_batch(append_time_us: int, records: Sequence[tuple[bytes | None, bytes]]) -> list[bytes]:
    """Frames for a batch of ``(key, value)`` records sharing one append time."""
    return [encode_frame(append_time_us, key, value) for key, value in records]
