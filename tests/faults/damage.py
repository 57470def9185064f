"""Log surgery for fault tests: damage the last record of an embedded-log segment as a crash or a disk would.

Kinds of damage (``DAMAGE``), at the segment's tail:

* ``truncated``  — the file ends at a random byte inside the frame (a torn write);
* ``torn-batch`` — the file ends at a random byte inside one of the last 5 frames (a torn batch);
* ``flipped``    — one random byte of the frame, header or payload, has all its bits flipped;
* ``zeroed``     — the frame's bytes are zeros (a block the file system allocated but never wrote);
* ``zero-block`` — 4 KiB of zeros after the frame (the file grew, its data never reached the disk).

``damage`` returns the file position where valid data must end after the repair.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from events.log.framing import scan

DAMAGE = ("truncated", "torn-batch", "flipped", "zeroed", "zero-block")
TORN_BATCH = 5
ZERO_BLOCK = 4096


def frame_positions(segment: Path) -> tuple[list[int], int]:
    """File positions of the segment's frames, and where its valid data ends."""
    data = segment.read_bytes()
    result = scan(data, 0, check_crc=True)
    assert result.problem is None, f"{segment} is already damaged: {result.problem}"
    return list(result.positions), result.end


def last_segment(log_dir: Path, channel: str) -> Path:
    return sorted((log_dir / channel).glob("*.seg"))[-1]


def damage(segment: Path, kind: str, rng: random.Random) -> int:
    """Damage the tail of ``segment`` (see the module doc); returns the end of what stays valid."""
    positions, end = frame_positions(segment)
    last = positions[-1]
    if kind == "zero-block":
        with open(segment, "ab") as f:
            f.write(bytes(ZERO_BLOCK))
        return end
    if kind in ("truncated", "torn-batch"):
        count = 1 if kind == "truncated" else min(TORN_BATCH, len(positions))
        k = rng.randrange(len(positions) - count, len(positions))
        start, stop = positions[k], positions[k + 1] if k + 1 < len(positions) else end
        os.truncate(segment, rng.randrange(start + 1, stop))  # inside frame k, never on a boundary
        return start
    if kind == "flipped":
        _flip(segment, rng.randrange(last, end))
    elif kind == "zeroed":
        with open(segment, "r+b") as f:
            f.seek(last)
            f.write(bytes(end - last))
    else:
        raise ValueError(f"unknown damage {kind!r}")
    return last


def flip_byte(segment: Path, record: int) -> None:
    """Flip one payload byte of record ``record`` (0-based) of ``segment``: damage mid-log."""
    positions, _ = frame_positions(segment)
    _flip(segment, positions[record] + 25)


def _flip(path: Path, at: int) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ 0xFF]))
