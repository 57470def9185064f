"""Snapshot files that are not snapshots are skipped with a warning, never a crash on every
start; a store that would keep fewer than one snapshot cannot be made."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from events.log.memory import MemoryLog
from scheduler.service.loop import Service
from scheduler.storage.snapshot_files import SnapshotStore
from tests.cli import evsched
from tests.contracts.log_contract import run


@pytest.mark.parametrize("content", [b"null", b"[]", b"42", b'"x"', b"{}"])
def test_a_snapshot_file_that_is_not_an_object_is_skipped_with_a_warning(
    tmp_path: Path, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    async def body() -> int:
        log = MemoryLog()
        await log.append_inputs([(b"n", orjson.dumps({"id": "n", "source": "t", "type": "node.added",
                                                       "data": {"node_id": "n", "capacity": {"vcore": 1}}}))])
        first = Service(log, snapshots=SnapshotStore(tmp_path), snapshot_every=1)
        await first.start()
        await first.run(once=True)
        (tmp_path / "snapshot-000000000009.json").write_bytes(content)  # the newest file
        second = Service(log, snapshots=SnapshotStore(tmp_path))
        await second.start()
        return second.engine.cycle_number

    with caplog.at_level("WARNING"):
        assert run(body()) == 1
    assert "discarding snapshot snapshot-000000000009.json" in caplog.text


@pytest.mark.parametrize("keep", [-1, -5])
def test_a_negative_number_of_snapshots_to_keep_is_refused(tmp_path: Path, keep: int) -> None:
    """``--snapshot-keep -5`` deleted the snapshot just written (0 keeps all, as documented)."""
    with pytest.raises(ValueError, match="at least 1"):
        SnapshotStore(tmp_path, keep=keep)
    proc = evsched("run", "--log", str(tmp_path / "log"), "--once", "--snapshot-keep", str(keep), check=False)
    assert proc.returncode != 0 and b"--snapshot-keep" in proc.stderr, proc.stderr.decode()[-1000:]
