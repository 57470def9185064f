"""FileLog against the EventLog contract, plus its recovery, locking and disk-full behaviour."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import subprocess
import sys
import zlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import ClassVar

import pytest

from events.log.clock import wall_clock_us as wall_us
from events.log.file import FileLog, FsyncPolicy
from events.log.port import EventLog, LogError
from tests.contracts.log_contract import LogContract

ROOT = Path(__file__).resolve().parents[2]
VALUE = 10  # every value below is 10 bytes and unkeyed, so every frame is 21 + 10 bytes
FRAME = 31


class FileLogFactory(LogContract):
    segment_bytes: ClassVar[int] = 64 << 20

    @asynccontextmanager
    async def make_log(
        self, tmp_path: Path, now_us: Callable[[], int] | None = None
    ) -> AsyncIterator[EventLog]:
        log = FileLog(tmp_path / "log", segment_bytes=self.segment_bytes, now_us=now_us or wall_us)
        try:
            yield log
        finally:
            await log.close()


class TestFileLog(FileLogFactory):
    pass


class TestFileLogTinySegments(FileLogFactory):
    """The whole contract again, with a new segment every few records."""

    segment_bytes = 150


# -- helpers -------------------------------------------------------------------------


def values(n: int, start: int = 0) -> list[bytes]:
    return [f"value-{i:04d}".encode() for i in range(start, start + n)]


def fill(
    path: Path, n: int, *, fsync: FsyncPolicy = FsyncPolicy.BATCH, segment_bytes: int = 64 << 20
) -> None:
    """A log at ``path`` with ``n`` unkeyed 10-byte inputs (one append) and 2 outputs."""
    with FileLog(path, fsync=fsync, segment_bytes=segment_bytes) as log:
        log.append_inputs_sync([(None, v) for v in values(n)])
        log.append_outputs_sync([b"out-0", b"out-1"])


def segments(path: Path, channel: str = "inputs") -> list[Path]:
    return sorted((path / channel).glob("*.seg"))


def all_inputs(log: FileLog) -> list[bytes]:
    return [r.value for r in log.iter_inputs()]


def patch_bytes(path: Path, pos: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(data)


# -- format ----------------------------------------------------------------------------


def test_layout_and_frame_format(tmp_path: Path) -> None:
    with FileLog(tmp_path, now_us=lambda: 5) as log:
        log.append_inputs_sync([(b"k", b"v")])
        log.append_outputs_sync([b"o"])
    assert (tmp_path / "LOCK").exists()
    seg = tmp_path / "inputs" / "00000000000000000000.seg"
    raw = seg.read_bytes()
    body = (5).to_bytes(8, "little") + (1).to_bytes(4, "little") + b"kv"
    crc = zlib.crc32(body, zlib.crc32(b"\xe1" + (14).to_bytes(4, "little")))
    assert raw == b"\xe1" + (14).to_bytes(4, "little") + crc.to_bytes(4, "little") + body
    out = (tmp_path / "outputs" / "00000000000000000000.seg").read_bytes()
    assert out[17:21] == b"\xff\xff\xff\xff" and out.endswith(b"o")  # key_len -1: no key


def test_sync_iteration_spans_chunks(tmp_path: Path) -> None:
    fill(tmp_path, 2500)
    with FileLog(tmp_path) as log:
        assert all_inputs(log) == values(2500)
        assert [r.offset for r in log.iter_inputs({"inputs": 2490})] == list(range(2490, 2500))
        assert [r.value for r in log.iter_outputs(1)] == [b"out-1"]
        assert list(log.iter_outputs(2)) == []


@pytest.mark.parametrize("policy", list(FsyncPolicy))
def test_every_fsync_policy_round_trips(tmp_path: Path, policy: FsyncPolicy) -> None:
    fill(tmp_path, 30, fsync=policy, segment_bytes=100)
    with FileLog(tmp_path, fsync=policy) as log:
        assert all_inputs(log) == values(30)


def test_closed_log_refuses_and_close_is_idempotent(tmp_path: Path) -> None:
    log = FileLog(tmp_path)
    log.close_sync()
    asyncio.run(log.close())
    with pytest.raises(LogError, match="closed"):
        asyncio.run(log.read_inputs({}, 10))
    with pytest.raises(LogError, match="closed"):
        asyncio.run(log.input_end())
    with pytest.raises(LogError, match="closed"):
        log.append_inputs_sync([(None, b"x")])


# -- torn tails (repaired) and corruption (refused) ----------------------------------------


def test_torn_tail_is_truncated_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fill(tmp_path, 10)
    seg = segments(tmp_path)[0]
    os.truncate(seg, 10 * FRAME - 5)  # the last record loses its last 5 bytes
    with caplog.at_level(logging.WARNING, logger="evsched.log"), FileLog(tmp_path) as log:
        assert all_inputs(log) == values(9)
        assert len(log.repairs) == 1 and "truncated frame" in log.repairs[0]
        assert "inputs@9" in log.repairs[0] and "truncated to the last valid" in log.repairs[0]
        log.append_inputs_sync([(None, b"after-torn")])
        assert asyncio.run(log.input_end()) == {"inputs": 10, "admin": 0}
    assert [r.getMessage() for r in caplog.records] == log.repairs
    with FileLog(tmp_path) as log:
        assert log.repairs == []
        assert all_inputs(log) == [*values(9), b"after-torn"]


def test_flipped_byte_in_last_record_is_detected(tmp_path: Path) -> None:
    fill(tmp_path, 10)
    seg = segments(tmp_path)[0]
    patch_bytes(seg, 9 * FRAME + 25, b"X")  # inside the last record's value
    with FileLog(tmp_path) as log:
        assert all_inputs(log) == values(9)
        assert "crc mismatch" in log.repairs[0]
    assert seg.stat().st_size == 9 * FRAME


@pytest.mark.parametrize("zero_last_record", [False, True])
def test_zero_filled_block_at_the_end_is_detected(tmp_path: Path, zero_last_record: bool) -> None:
    fill(tmp_path, 10)
    seg = segments(tmp_path)[0]
    keep = 9 * FRAME if zero_last_record else 10 * FRAME
    os.truncate(seg, keep)
    with open(seg, "ab") as f:
        f.write(bytes(4096))
    with FileLog(tmp_path) as log:
        assert all_inputs(log) == values(keep // FRAME)
        assert log.repairs and "zero-filled block of 4096 bytes" in log.repairs[0]
    assert seg.stat().st_size == keep


def test_corruption_mid_last_segment_with_valid_records_after_is_refused(tmp_path: Path) -> None:
    fill(tmp_path, 10)
    patch_bytes(segments(tmp_path)[0], 4 * FRAME + 25, b"X")
    with pytest.raises(LogError, match=r"inputs@4.*valid records follow.*not a torn tail"):
        FileLog(tmp_path)
    assert segments(tmp_path)[0].stat().st_size == 10 * FRAME  # nothing dropped


def test_structural_damage_in_an_old_segment_is_refused(tmp_path: Path) -> None:
    fill(tmp_path, 20, segment_bytes=4 * FRAME)
    first = segments(tmp_path)[0]
    patch_bytes(first, 1 * FRAME, b"\x00\x00\x00\x00\x00")  # record 1's magic and length
    refused = r"00000000000000000000\.seg.*inputs@1.*not a torn tail"
    with pytest.raises(LogError, match=refused):
        FileLog(tmp_path)  # the writer checks every segment's structure on open
    with FileLog(tmp_path, readonly=True) as reader:  # a reader indexes an old segment on first read
        assert [r.offset for r in asyncio.run(reader.read_inputs({"inputs": 8}, 2))] == [8, 9]
        with pytest.raises(LogError, match=refused):
            asyncio.run(reader.read_inputs({}, 3))


def test_payload_damage_in_an_old_segment_is_caught_on_read_or_full_verify(tmp_path: Path) -> None:
    fill(tmp_path, 20, segment_bytes=4 * FRAME)
    patch_bytes(segments(tmp_path)[0], 2 * FRAME + 25, b"X")  # structure intact, crc wrong
    with FileLog(tmp_path) as log:  # open walks old segments' structure only (fast)
        assert [r.offset for r in asyncio.run(log.read_inputs({"inputs": 3}, 5))] == [3, 4, 5, 6, 7]
        with pytest.raises(LogError, match=r"inputs@2 is corrupt"):
            asyncio.run(log.read_inputs({}, 10))
    with pytest.raises(LogError, match=r"crc mismatch.*inputs@2"):
        FileLog(tmp_path, verify_all=True)


def test_missing_segment_is_refused(tmp_path: Path) -> None:
    fill(tmp_path, 20, segment_bytes=4 * FRAME)
    segments(tmp_path)[1].unlink()
    with pytest.raises(LogError, match="missing or damaged"):
        FileLog(tmp_path)


# -- segments ------------------------------------------------------------------------------


def test_segment_rollover(tmp_path: Path) -> None:
    with FileLog(tmp_path, segment_bytes=100) as log:  # three 31-byte frames per segment
        for start in range(0, 50, 7):
            log.append_inputs_sync([(None, v) for v in values(min(7, 50 - start), start)])
        names = [p.name for p in segments(tmp_path)]
        assert names == [f"{base:020d}.seg" for base in range(0, 50, 3)]
        assert all(p.stat().st_size <= 100 for p in segments(tmp_path))
        got = asyncio.run(log.read_inputs({"inputs": 4}, 10))
        assert [r.value for r in got] == values(10, 4)
    with FileLog(tmp_path, segment_bytes=100) as log:
        assert all_inputs(log) == values(50)
        log.append_inputs_sync([(None, b"x" * 500)])  # bigger than a segment: its own
        assert segments(tmp_path)[-1].name == f"{50:020d}.seg"
        log.append_inputs_sync([(None, b"y")])
        assert segments(tmp_path)[-1].name == f"{51:020d}.seg"
        assert [r.value for r in log.iter_inputs({"inputs": 49})] == [
            b"value-0049",
            b"x" * 500,
            b"y",
        ]


# -- locking and read-only opens -------------------------------------------------------


def test_second_opener_gets_the_lock_error(tmp_path: Path) -> None:
    with FileLog(tmp_path):
        with pytest.raises(LogError, match=rf"in use by another process \(pid {os.getpid()}\)"):
            FileLog(tmp_path)
        with FileLog(tmp_path, readonly=True) as reader:  # readers take no lock
            assert all_inputs(reader) == []
    with FileLog(tmp_path):
        pass  # released on close


def test_another_process_holding_the_lock(tmp_path: Path) -> None:
    child = (
        "import sys; from events.log.file import FileLog; log = FileLog(sys.argv[1]); "
        "print('ready', flush=True); sys.stdin.read(); log.close_sync()"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", child, str(tmp_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        with pytest.raises(LogError, match=rf"{tmp_path} is in use .*\(pid {proc.pid}\)"):
            FileLog(tmp_path)
    finally:
        proc.communicate("", timeout=30)
    assert proc.returncode == 0
    with FileLog(tmp_path):
        pass


def test_readonly_open_stops_before_a_torn_tail(tmp_path: Path) -> None:
    fill(tmp_path, 10)
    seg = segments(tmp_path)[0]
    os.truncate(seg, 10 * FRAME - 3)
    with FileLog(tmp_path, readonly=True) as log:
        assert all_inputs(log) == values(9)
        assert "not repaired" in log.repairs[0]
        with pytest.raises(LogError, match="read-only"):
            log.append_inputs_sync([(None, b"x")])
    assert seg.stat().st_size == 10 * FRAME - 3  # untouched
    with FileLog(tmp_path) as log:
        assert "truncated" in log.repairs[0]


def test_readonly_open_ignores_a_last_record_whose_crc_fails(tmp_path: Path) -> None:
    # The reader checks only the last frame's crc at open: a torn write that kept the
    # frame's structure (its bytes damaged, its length whole) is still a torn tail to it.
    fill(tmp_path, 10)
    patch_bytes(segments(tmp_path)[0], 9 * FRAME + 25, b"X")
    with FileLog(tmp_path, readonly=True) as log:
        assert all_inputs(log) == values(9)
        assert "crc mismatch" in log.repairs[0] and "not repaired" in log.repairs[0]


def test_readonly_open_refuses_a_damaged_record_when_it_reads_it(tmp_path: Path) -> None:
    # Damage inside the last segment, valid records after it: the writer refuses to open
    # (test above); a reader opens without checking every crc, as for older segments, and
    # refuses the record when it reads it — never returning its bytes.
    fill(tmp_path, 10)
    patch_bytes(segments(tmp_path)[0], 4 * FRAME + 25, b"X")
    with FileLog(tmp_path, readonly=True) as log:
        assert log.repairs == []
        assert [r.value for r in asyncio.run(log.read_inputs({"inputs": 5}, 10))] == values(5, 5)
        with pytest.raises(LogError, match=r"inputs@4 is corrupt"):
            all_inputs(log)


def test_readonly_open_follows_the_writer(tmp_path: Path) -> None:
    with FileLog(tmp_path, segment_bytes=100) as writer:
        writer.append_inputs_sync([(None, v) for v in values(2)])
        with FileLog(tmp_path, readonly=True) as reader:
            assert asyncio.run(reader.input_end()) == {"inputs": 2, "admin": 0}
            writer.append_inputs_sync([(None, v) for v in values(8, 2)])  # rolls over
            writer.append_outputs_sync([b"o"])
            assert asyncio.run(reader.input_end()) == {"inputs": 10, "admin": 0}
            assert all_inputs(reader) == values(10)
            assert [r.value for r in reader.iter_outputs()] == [b"o"]


def test_readonly_open_of_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(LogError, match="does not exist"):
        FileLog(tmp_path / "nope", readonly=True)


# -- disk full -------------------------------------------------------------------------------


def _fail_writes_after(monkeypatch: pytest.MonkeyPatch, ok_calls: int) -> None:
    """``os.write`` writes at most 20 bytes a call, and after ``ok_calls`` calls: ENOSPC."""
    real, calls = os.write, [0]

    def write(fd: int, data: bytes) -> int:
        calls[0] += 1
        if calls[0] > ok_calls:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, bytes(data)[:20])

    monkeypatch.setattr(os, "write", write)


@pytest.mark.parametrize(
    ("segment_bytes", "ok_calls", "created"),
    [(64 << 20, 4, 0), (100, 4, 1), (100, 1, 0)],  # created: segments the append had started
)
def test_disk_full_rolls_the_append_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, segment_bytes: int, ok_calls: int, created: int
) -> None:
    fill(tmp_path, 5, segment_bytes=segment_bytes)
    before = {p.name: p.stat().st_size for p in segments(tmp_path)}
    with FileLog(tmp_path, segment_bytes=segment_bytes) as log:
        seen: list[int] = []
        with monkeypatch.context() as m:
            _fail_writes_after(m, ok_calls)
            real_unlink = os.unlink

            def unlink(path: str | os.PathLike[str]) -> None:
                seen.append(1)
                real_unlink(path)

            m.setattr(os, "unlink", unlink)
            with pytest.raises(LogError, match=r"disk full \(ENOSPC\).*rolled back"):
                log.append_inputs_sync([(None, v) for v in values(6, 100)])
        assert len(seen) == created
        assert {p.name: p.stat().st_size for p in segments(tmp_path)} == before
        assert all_inputs(log) == values(5)
        assert asyncio.run(log.input_end()) == {"inputs": 5, "admin": 0}
        log.append_inputs_sync([(None, b"next")])
    with FileLog(tmp_path, segment_bytes=segment_bytes) as log:
        assert log.repairs == []
        assert all_inputs(log) == [*values(5), b"next"]


def test_failed_fsync_rolls_the_append_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(tmp_path, 3)
    with FileLog(tmp_path) as log:
        with monkeypatch.context() as m:

            def broken(fd: int) -> None:
                raise OSError(errno.EIO, "I/O error")

            m.setattr(os, "fdatasync", broken)
            m.setattr(os, "fsync", broken)
            with pytest.raises(LogError, match="I/O error"):
                log.append_outputs_sync([b"lost"])
        assert [r.value for r in log.iter_outputs()] == [b"out-0", b"out-1"]
        with pytest.raises(LogError, match="reopened to recover"):  # undo's fsync failed too
            log.append_outputs_sync([b"more"])
    with FileLog(tmp_path) as log:
        assert [r.value for r in log.iter_outputs()] == [b"out-0", b"out-1"]
