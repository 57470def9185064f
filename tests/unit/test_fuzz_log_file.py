"""Fuzzing the embedded log's reader: damaged segment bytes never crash it, never lose data silently.

A log directory with random or corrupted segments must open (reporting and repairing a torn
tail) or refuse with ``LogError``; nothing else. Whatever it returns must be exactly what
was appended at those offsets (the crc makes a damaged record unreadable, never different).
After a repair the log takes appends again and reopens with them.

``EVSCHED_FUZZ_EXAMPLES=N`` runs N examples per property; ``tests/fuzz/fuzz_log.py`` is the
atheris harness over the frame scanner.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.log import segments as segments_module
from events.log.file import FileLog, FsyncPolicy
from events.log.framing import MAGIC, check_frame, decode_frames, encode_frame, scan, valid_frame_after
from events.log.port import LogError, LogRecord

EXAMPLES = int(os.environ.get("EVSCHED_FUZZ_EXAMPLES", "0")) or None
FUZZ = settings(
    max_examples=EXAMPLES or 60, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
TIME = 7
Record = tuple[bytes | None, bytes]


@pytest.fixture(autouse=True)
def _quiet_repairs() -> Iterator[None]:
    # Every repair logs a WARNING; hundreds of examples would flood the captured log.
    logger = logging.getLogger("evsched.log")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


records_st = st.lists(
    st.tuples(st.none() | st.binary(max_size=6), st.binary(max_size=60)), max_size=30
)
segment_bytes_st = st.sampled_from([1, 64, 200, 1 << 20])


def build(directory: Path, records: list[Record], segment_bytes: int) -> None:
    with FileLog(directory, fsync=FsyncPolicy.NEVER, segment_bytes=segment_bytes, now_us=lambda: TIME) as log:
        for i in range(0, len(records), 4):
            log.append_inputs_sync(records[i : i + 4])
        log.append_outputs_sync([b"out"])


def segments(directory: Path) -> list[Path]:
    return sorted((directory / "inputs").glob("*.seg"))


def read_all(log: FileLog) -> list[LogRecord]:
    start = log._inputs.start  # the first stored offset: the whole channel
    return list(log.iter_inputs({"inputs": start}))


def check_opens_or_refuses(directory: Path, records: list[Record]) -> list[LogRecord] | None:
    """Open read-only, then read-write; returns what the writer read, None if refused.

    Asserts the invariants: only LogError, every record equals the original at its
    offset, the writer agrees with the reader, and a repaired log appends and reopens.
    """
    try:
        with FileLog(directory, readonly=True) as reader:
            seen = read_all(reader)
    except LogError:
        seen = None
    try:
        with FileLog(directory, fsync=FsyncPolicy.NEVER, now_us=lambda: TIME) as writer:
            got = read_all(writer)
            writer.append_inputs_sync([(b"k", b"after-repair")])
            end = writer._inputs.end
    except LogError:
        assert seen is None, "the reader opened what the writer refused"
        return None
    assert seen is not None and [r.value for r in seen] == [r.value for r in got]
    for r in got:
        assert 0 <= r.offset < len(records)
        assert (r.key, r.value, r.append_time_us) == (*records[r.offset], TIME), r.offset
    with FileLog(directory, readonly=True) as again:
        reread = read_all(again)
    assert [r.value for r in reread] == [r.value for r in got] + [b"after-repair"]
    assert reread[-1].offset == end - 1
    return got


@pytest.fixture
def workdir() -> Iterator[Path]:
    # Not tmp_path: hypothesis runs many examples in one test invocation.
    path = Path(tempfile.mkdtemp(prefix="evsched-fuzz-log-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def fresh(workdir: Path) -> Path:
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir()
    return workdir / "log"


# ---------------------------------------------------------------- damage to a valid log

DAMAGE = st.sampled_from(["flip", "zero", "truncate", "garbage", "random", "empty", "delete", "stray"])


@FUZZ
@given(records_st, segment_bytes_st, st.lists(st.tuples(DAMAGE, st.integers(0, 10**6), st.binary(max_size=80)),
                                              min_size=1, max_size=3))  # fmt: skip
def test_damaged_segments_open_repaired_or_are_refused(
    workdir: Path, records: list[Record], segment_bytes: int, damage: list[tuple[str, int, bytes]]
) -> None:
    directory = fresh(workdir)
    build(directory, records, segment_bytes)
    for kind, where, junk in damage:
        segs = segments(directory)
        if kind == "stray" or not segs:
            base = [0, 1, 3, 10**19, 10**20 - 1][where % 5]
            stray = directory / "inputs" / f"{base:020d}.seg"
            if not stray.is_dir():
                stray.write_bytes(junk)
            continue
        seg = segs[where % len(segs)]
        data = bytearray(seg.read_bytes())
        pos = where % (len(data) + 1)
        if kind == "flip" and data:
            data[pos % len(data)] ^= 1 << (where % 8)
        elif kind == "zero":
            data[pos : pos + len(junk) + 1] = bytes(len(data[pos : pos + len(junk) + 1]))
        elif kind == "truncate":
            del data[pos:]
        elif kind == "garbage":
            data += junk
        elif kind == "random":
            data = bytearray(junk)
        elif kind == "empty":
            data = bytearray()
        if kind == "delete":
            seg.unlink()
        else:
            seg.write_bytes(bytes(data))
    check_opens_or_refuses(directory, records)


@FUZZ
@given(records_st, st.integers(0, 10**6), st.sampled_from(["truncate", "garbage", "zero-tail", "flip"]))
def test_damage_at_the_tail_loses_nothing_before_it(
    workdir: Path, records: list[Record], where: int, kind: str
) -> None:
    # One segment; the damage starts at byte ``cut`` and runs to the end of the file (a
    # torn write): every record that ends before ``cut`` must still be there.
    directory = fresh(workdir)
    build(directory, records, 1 << 20)
    (seg,) = segments(directory)
    data = bytearray(seg.read_bytes())
    cut = where % (len(data) + 1)
    if kind == "truncate":
        del data[cut:]
    elif kind == "garbage":
        data[cut:] = os.urandom(len(data) - cut + 5)
    elif kind == "zero-tail":
        data[cut:] = bytes(len(data) - cut)
    elif data and cut < len(data):
        last = len(data) - 1  # a flipped bit in the last byte: damages only the last record
        data[last] ^= 0x10
        cut = last
    seg.write_bytes(bytes(data))
    frames = [len(encode_frame(TIME, k, v)) for k, v in records]
    intact = sum(1 for i in range(len(frames)) if sum(frames[: i + 1]) <= cut)
    got = check_opens_or_refuses(directory, records)
    if cut == 0 and kind == "garbage" and data[0] != MAGIC and any(data):
        assert got is None, "a segment that is wholly garbage is refused, not truncated"
        return
    assert got is not None, "a torn tail must be repaired, not refused"
    assert len(got) >= intact


@FUZZ
@given(st.binary(max_size=2048))
def test_a_segment_of_random_bytes_never_crashes(workdir: Path, junk: bytes) -> None:
    directory = fresh(workdir)
    (directory / "inputs").mkdir(parents=True)
    (directory / "inputs" / f"{0:020d}.seg").write_bytes(junk)
    check_opens_or_refuses(directory, [])


@FUZZ
@given(records_st, st.lists(st.tuples(st.none() | st.binary(max_size=4), st.binary(max_size=30)), max_size=4),
       st.binary(max_size=64), st.booleans())  # fmt: skip
def test_a_reader_following_a_damaged_tail_never_crashes(
    workdir: Path, records: list[Record], more: list[Record], junk: bytes, new_segment: bool
) -> None:
    # A read-only reader (replay, audit) picks up what the writer appends; here the "writer"
    # appends valid frames and then junk, in the last segment or a new one.
    directory = fresh(workdir)
    build(directory, records, 1 << 20)
    with FileLog(directory, readonly=True) as reader:
        assert [r.value for r in read_all(reader)] == [v for _, v in records]
        tail = b"".join(encode_frame(TIME, k, v) for k, v in more) + junk
        if new_segment:
            (directory / "inputs" / f"{len(records):020d}.seg").write_bytes(tail)
        else:
            with open(segments(directory)[-1], "ab") as segment:
                segment.write(tail)
        try:
            got = read_all(reader)
        except LogError:
            return
    expected = [*records, *more]
    assert [r.value for r in got] == [v for _, v in expected[: len(got)]]
    assert len(got) >= len(records)


def test_hostile_directory_entries(workdir: Path) -> None:
    directory = fresh(workdir)
    build(directory, [(None, b"a"), (b"k", b"b")], 1 << 20)
    inputs = directory / "inputs"
    (inputs / "notes.txt").write_text("ignored")
    (inputs / "12.seg").write_bytes(b"not a segment name: ignored")
    (inputs / f"{10**19:020d}.seg").mkdir()  # a directory where a segment should be
    with pytest.raises(LogError):
        FileLog(directory)
    (inputs / f"{10**19:020d}.seg").rmdir()
    got = check_opens_or_refuses(directory, [(None, b"a"), (b"k", b"b")])
    assert got is not None and [r.value for r in got] == [b"a", b"b"]


# ---------------------------------------------------------------- the frame functions directly


@FUZZ
@given(st.binary(max_size=4096), st.booleans())
def test_the_frame_scanner_never_raises(buf: bytes, check_crc: bool) -> None:
    view = memoryview(buf)
    result = scan(buf, 0, check_crc)
    assert 0 <= result.end <= len(buf)
    assert (result.problem is None) == (result.end == len(buf))
    for i, pos in enumerate(result.positions):
        assert check_frame(view, pos, len(buf), check_crc) is None
        assert pos == 0 or i > 0
    if result.problem is not None:
        found = valid_frame_after(view, result.end + 1)
        assert found is None or check_frame(view, found, len(buf), True) is None


@FUZZ
@given(st.binary(max_size=512), st.integers(1, 4))
def test_decoding_damaged_frames_raises_only_log_error(buf: bytes, count: int) -> None:
    try:
        out = decode_frames(buf, count, "inputs", 0, "fuzz")
    except LogError:
        return
    assert len(out) == count


_RECORDS = st.lists(
    st.tuples(st.integers(-(2**63), 2**63 - 1), st.none() | st.binary(max_size=40), st.binary(max_size=300)),
    max_size=20,
)


def struct_walk(buf: bytes) -> list[tuple[int, int, int]]:
    """Reference: (position, append time, key length) of each frame, read with ``struct``."""
    out, pos = [], 0
    while pos < len(buf):
        _, length, _ = struct.unpack_from("<BII", buf, pos)
        time_us, klen = struct.unpack_from("<qi", buf, pos + 9)
        out.append((pos, time_us, klen))
        pos += 9 + length
    return out


@FUZZ
@given(_RECORDS, st.integers(0, 10**12))
def test_frames_read_back_field_for_field(records: list[tuple[int, bytes | None, bytes]], base: int) -> None:
    # The reader decodes the little-endian fields byte by byte (compiled, that is C; a
    # ``Struct`` call is a Python one): every time (negative, 2**63 - 1) and key (none,
    # empty) comes back as written, at the positions a ``struct`` walk finds.
    buf = b"".join(encode_frame(t, k, v) for t, k, v in records)
    walked = struct_walk(buf)
    for check_crc in (False, True):
        result = scan(buf, base, check_crc)
        assert result.problem is None and result.end == base + len(buf)
        assert list(result.positions) == [base + pos for pos, _, _ in walked]
    out = decode_frames(buf, len(records), "inputs", 5, "fuzz")
    assert [(r.offset, r.append_time_us, r.key, r.value) for r in out] == [
        (5 + i, t, k, v) for i, (t, k, v) in enumerate(records)
    ]
    assert [klen for _, _, klen in walked] == [-1 if k is None else len(k) for _, k, _ in records]


@FUZZ
@given(
    st.lists(st.tuples(st.none() | st.binary(max_size=8), st.binary(max_size=600)), max_size=12),
    st.integers(1, 700),
    st.none() | st.tuples(st.integers(0, 10**6), st.integers(0, 255)),
    st.integers(0, 40),
)
def test_chunked_open_scan_equals_the_whole_file_scan(
    tmp_path_factory: pytest.TempPathFactory,
    records: list[tuple[bytes | None, bytes]],
    chunk: int,
    damage: tuple[int, int] | None,
    cut: int,
) -> None:
    # A read-only open indexes a segment in chunks (segments.quick_structure): frames cut by a
    # chunk's end, frames larger than a chunk, damage and a torn tail must give what scanning
    # the whole file gives, or None (then the whole file is scanned).
    buf = bytearray(b"".join(encode_frame(TIME, k, v) for k, v in records))
    if damage is not None and buf:
        buf[damage[0] % len(buf)] ^= damage[1] or 1
    data = bytes(buf[: max(0, len(buf) - cut)])
    path = tmp_path_factory.mktemp("quick") / "00000000000000000000.seg"
    path.write_bytes(data)
    whole = scan(data, 0, check_crc=False)
    original = segments_module.QUICK_CHUNK
    segments_module.QUICK_CHUNK = chunk
    try:
        quick = segments_module.quick_structure(path)
        checked = segments_module.quick_structure(path, check_last_crc=True)
    finally:
        segments_module.QUICK_CHUNK = original
    # With the last frame's crc checked too: as without, unless that frame fails its crc.
    last_ok = not whole.positions or check_frame(memoryview(data), whole.positions[-1], len(data), True) is None
    assert (checked is not None) == (quick is not None and last_ok)
    if whole.problem is None:
        assert quick is not None
    if quick is not None:
        assert whole.problem is None
        assert list(quick.positions) == list(whole.positions) and quick.end == whole.end == len(data)


@pytest.mark.parametrize("cut_into", [10, 500], ids=["frame-head", "frame-body"])
def test_chunked_open_scan_of_a_file_shrinking_under_it_gives_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cut_into: int
) -> None:
    # Found in review: a file truncated inside a frame after the first read (``truncate -s``,
    # a restore by ``cp`` that died) made the chunked scan re-read the same short frame for
    # ever. Any short read is a changed file: None, and the whole-file path judges it.
    path = tmp_path / "00000000000000000000.seg"
    frames = [encode_frame(TIME, None, bytes(1000)) for _ in range(300)]
    path.write_bytes(b"".join(frames))
    starts = scan(path.read_bytes(), 0, check_crc=False).positions
    cut = next(p for p in starts if p > segments_module.QUICK_CHUNK) + cut_into
    real_pread, calls = os.pread, []

    def pread(fd: int, n: int, offset: int) -> bytes:
        calls.append(offset)
        assert len(calls) < 100, "the scan keeps re-reading: it does not give up"
        if len(calls) == 2:
            os.truncate(path, cut)
        return real_pread(fd, n, offset)

    monkeypatch.setattr(os, "pread", pread)
    assert segments_module.quick_structure(path) is None


def forged_frame(length: int, body: bytes) -> bytes:
    """A frame whose crc is right but whose lengths lie: not chance damage, a rewrite."""
    crc = zlib.crc32(body, zlib.crc32(struct.pack("<BI", MAGIC, length)))
    return struct.pack("<BII", MAGIC, length, crc) + body


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param(forged_frame(4, b"abcd"), id="length-below-header"),
        pytest.param(forged_frame(12, struct.pack("<qi", 0, 5)), id="key-longer-than-frame"),
        pytest.param(forged_frame(12, struct.pack("<qi", 0, -7)), id="negative-key-length"),
    ],
)
def test_a_forged_frame_with_a_valid_crc_is_refused(frame: bytes) -> None:
    # Found by test_decoding_damaged_frames…: decode_frames trusted the lengths once the crc
    # matched, and raised struct.error (or returned a key read from the next frame).
    with pytest.raises(LogError, match="corrupt"):
        decode_frames(frame + encode_frame(1, b"next", b"v"), 2, "inputs", 0, "fuzz")


def test_a_tail_crafted_full_of_frame_heads_is_refused_in_bounded_work() -> None:
    # Every 16 bytes a frame head whose length reaches the end of the tail: each candidate
    # would need a crc over the rest, quadratic in the tail (hours for 1 MiB) if unbounded.
    size = 1 << 20
    tail = bytearray(size)
    for pos in range(0, size - 32, 16):
        struct.pack_into("<BII", tail, pos, MAGIC, size - pos - 9, 0)
    with pytest.raises(LogError, match="refusing to drop"):
        valid_frame_after(memoryview(bytes(tail)), 0)


def test_a_valid_frame_after_damage_is_still_found() -> None:
    frame = encode_frame(7, b"k", b"value")
    damaged = b"\xe1" + b"\x00" * 40 + frame  # a torn head, then a valid frame
    assert valid_frame_after(memoryview(damaged), 0) == 41
