"""Snapshot files: save the engine every N cycles, and find a trustworthy one on restart.

A snapshot file holds the engine (``scheduler.core.snapshot``), the input positions and
output offset it corresponds to, the snapshot schema version and (for people) the rules
version of the code that wrote it. A snapshot is the state folded from the recorded log,
which no change of scheduling rules alters, so it stays valid for any code that reads its
schema. On restart the newest snapshot is used only when its schema matches and its state
digest equals the one recorded in the log's ``cycle.completed`` for that cycle; anything
else is discarded (with a log line) and recovery falls back to an older snapshot or to
the whole log.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from scheduler.core import snapshot
from scheduler.core.engine import Engine
from scheduler.core.rules_version import RULES_VERSION

LOG = logging.getLogger("evsched.snapshots")


def readable_schema(body: dict[str, Any]) -> bool:
    """True when a snapshot's schema is the one this code reads (the rules that made it do not matter)."""
    return body.get("schema") == snapshot.SNAPSHOT_VERSION


@dataclass
class Restored:
    """An engine restored from a snapshot, and where in the log it stands."""

    engine: Engine
    positions: dict[str, int]
    output_offset: int
    cycle: int
    path: Path


class SnapshotStore:
    """Snapshot files in one directory, the newest ``keep`` kept (0: every one), written atomically."""

    def __init__(self, directory: str | Path, *, keep: int = 2) -> None:
        if keep < 0:  # a negative count would delete the snapshot just written
            raise ValueError(f"snapshots to keep must be at least 1 (or 0: keep all), not {keep}")
        self.directory = Path(directory)
        self.keep = keep

    def save(self, engine: Engine, positions: dict[str, int], output_offset: int) -> Path:
        """Write a snapshot of the engine after its last cycle (tmp file, fsync, rename)."""
        return self.write(*self.capture(engine, positions, output_offset))

    def capture(self, engine: Engine, positions: dict[str, int], output_offset: int) -> tuple[int, bytes]:
        """The engine after its last cycle as a snapshot file's bytes, and its cycle: the part of
        ``save`` that reads the engine (``write`` does not, so it may run while the next cycles do)."""
        body = {
            "schema": snapshot.SNAPSHOT_VERSION,
            "rules_version": RULES_VERSION,
            "cycle": engine.cycle_number,
            "state_digest": engine.digest(),
            "positions": positions,
            "output_offset": output_offset,
            "engine": snapshot.dump(engine),
        }
        return engine.cycle_number, orjson.dumps(body)

    def write(self, cycle: int, data: bytes) -> Path:
        """Write captured snapshot bytes as cycle ``cycle``'s file (tmp file, fsync, rename); drop old ones."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"snapshot-{cycle:012d}.json"
        tmp = path.with_suffix(".tmp")
        try:
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except OSError:
            tmp.unlink(missing_ok=True)  # a full disk must not keep a partial file (and its space)
            raise
        for old in sorted(self.directory.glob("snapshot-*.json"))[: -self.keep]:
            old.unlink(missing_ok=True)
        for stale in self.directory.glob("snapshot-*.tmp"):  # left by a writer killed mid-save
            stale.unlink(missing_ok=True)
        return path

    def candidates(self) -> list[Path]:
        """Snapshot files, newest first."""
        if not self.directory.is_dir():
            return []
        return sorted(self.directory.glob("snapshot-*.json"), reverse=True)

    def read(self, path: Path) -> dict[str, Any] | None:
        """A snapshot file's contents if it is readable in a schema this code reads, else None."""
        try:
            body: Any = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            LOG.warning("discarding snapshot %s: unreadable (%s)", path.name, exc)
            return None
        if not isinstance(body, dict):
            LOG.warning("discarding snapshot %s: not a snapshot (a JSON %s)", path.name, type(body).__name__)
            return None
        if not readable_schema(body):
            LOG.warning("discarding snapshot %s: schema %r, this code reads %d", path.name, body.get("schema"),
                        snapshot.SNAPSHOT_VERSION)
            return None
        return body

    def restore(self, path: Path, body: dict[str, Any], recorded_digest: str | None) -> Restored | None:
        """Restore a snapshot whose cycle the log records with ``recorded_digest``, else None."""
        cycle = body["cycle"]
        if recorded_digest != body["state_digest"]:
            LOG.warning("discarding snapshot %s: cycle %d is not in the log with that state", path.name, cycle)
            return None
        try:
            engine = snapshot.load(body["engine"])
        except (KeyError, TypeError, ValueError) as exc:
            LOG.warning("discarding snapshot %s: %s", path.name, exc)
            return None
        if engine.digest() != body["state_digest"]:
            LOG.warning("discarding snapshot %s: restored state does not match its digest", path.name)
            return None
        return Restored(engine, body["positions"], body["output_offset"], cycle, path)

    @staticmethod
    def cycle_of(path: Path) -> int | None:
        """The cycle a snapshot file holds, from its name (``snapshot-<cycle>.json``)."""
        digits = path.stem.removeprefix("snapshot-")
        return int(digits) if digits.isdigit() else None

    def header(self, path: Path) -> dict[str, Any] | None:
        """A snapshot's small fields (everything but ``engine``) without parsing the engine.

        ``save`` writes them first, so only the head of the file is read. None when the
        file is unreadable or of another schema (as ``read``, but without a log line).
        """
        marker = b',"engine":'
        head = b""
        try:
            with open(path, "rb") as fh:
                while (cut := head.find(marker)) < 0:
                    chunk = fh.read(1 << 16)
                    if not chunk:
                        return None
                    head += chunk
            body: dict[str, Any] = orjson.loads(head[:cut] + b"}")
        except (OSError, orjson.JSONDecodeError):
            return None
        return body if readable_schema(body) else None
