"""Atheris harness: coverage-guided fuzzing of the file log's reader on arbitrary segment bytes.

Not collected by pytest; a long, optional run::

    .venv/bin/python tests/fuzz/fuzz_log.py -max_total_time=600 tests/fuzz/corpus/log

Each input is the content of the only input segment of a fresh log directory. Opening it
read-only and read-write may repair it or raise ``LogError``; anything else is a finding,
as is a returned record that is not a crc-valid frame of the input.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["events.log"]):
    from events.log.file import FileLog, FsyncPolicy
    from events.log.framing import decode_frames, encode_frame, scan, valid_frame_after
    from events.log.port import LogError

WORK = Path(tempfile.mkdtemp(prefix="evsched-atheris-log-"))


def one_input(data: bytes) -> None:
    view = memoryview(data)
    result = scan(data, 0, True)
    if result.problem is not None:
        valid_frame_after(view, result.end + 1)
    with contextlib.suppress(LogError):
        decode_frames(data, 2, "inputs", 0, "fuzz")
    shutil.rmtree(WORK / "log", ignore_errors=True)
    (WORK / "log" / "inputs").mkdir(parents=True)
    (WORK / "log" / "inputs" / f"{0:020d}.seg").write_bytes(data)
    for readonly in (True, False):
        try:
            with FileLog(WORK / "log", readonly=readonly, fsync=FsyncPolicy.NEVER) as log:
                for record in log.iter_inputs():
                    frame = encode_frame(record.append_time_us, record.key, record.value)
                    assert frame in data, "a record that is not a frame of the segment"
        except LogError:
            pass


if __name__ == "__main__":
    logging.disable(logging.CRITICAL)
    atheris.Setup(sys.argv, one_input)
    try:
        atheris.Fuzz()
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
