"""A segment of garbage is refused, never truncated as a "torn tail": a torn write starts
like a frame (the magic byte) or is zero-filled; anything else was not written by us."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from events.log.file import FileLog
from events.log.port import LogError
from tests.cli import evsched


def garbage_log(tmp_path: Path) -> tuple[Path, Path, bytes]:
    log_dir = tmp_path / "log"
    with FileLog(log_dir) as log:
        log.append_inputs_sync([(None, b'{"id": "x"}')])
    (segment,) = [p for p in log_dir.rglob("*") if p.is_file() and p.stat().st_size > 0 and "input" in str(p)]
    junk = bytes(random.Random(15).randrange(1, 256) for _ in range(4096)).replace(b"\xe1", b"\x01")
    segment.write_bytes(junk)
    return log_dir, segment, junk


def test_opening_a_garbage_segment_is_refused_and_nothing_is_truncated(tmp_path: Path) -> None:
    log_dir, segment, junk = garbage_log(tmp_path)
    with pytest.raises(LogError, match="not a torn write"), FileLog(log_dir):
        pass
    assert segment.read_bytes() == junk


def test_run_verify_and_audit_exit_non_zero_on_a_log_of_garbage(tmp_path: Path) -> None:
    log_dir, segment, junk = garbage_log(tmp_path)
    for args in (["run", "--log", str(log_dir), "--once"], ["replay", "verify", "--log", str(log_dir)],
                 ["audit", "--log", str(log_dir)]):
        proc = evsched(*args, check=False)
        assert proc.returncode != 0, (args, proc.stderr.decode()[-2000:])
        assert b"not a torn write" in proc.stderr, proc.stderr.decode()[-2000:]
    assert segment.read_bytes() == junk


def test_a_real_torn_tail_is_still_repaired(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    with FileLog(log_dir) as log:
        log.append_inputs_sync([(None, b'{"id": "a"}'), (None, b'{"id": "b"}')])
    (segment,) = [p for p in log_dir.rglob("*") if p.is_file() and p.stat().st_size > 0 and "input" in str(p)]
    data = segment.read_bytes()
    segment.write_bytes(data[:-5])  # the last frame cut short, as a crash mid-write leaves it
    with FileLog(log_dir) as log:
        assert [r.value for r in log.iter_inputs()] == [b'{"id": "a"}']
