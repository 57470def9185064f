"""Snapshot files: save the engine every N cycles, and find a trustworthy one on restart.

A snapshot file holds the engine (``scheduler.core.snapshot``), the input positions and
output offset it corresponds to, the snapshot schema version and (for people) the rules
version of the code that wrote it. A snapshot is the state folded from the recorded log,
which no change of scheduling rules alters, so it stays valid for any code that reads its
schema. On restart the newest snapshot is used only when its schema matches and its state
digest equals the one recorded in the log's ``cycle.completed`` for that cycle; anything
else is discarded (with a log line) and recovery falls back to an older snapshot or to
the whole log.

Two more checks (issue 36), both before the state digest's:

* **Integrity.** The state digest does not cover everything a snapshot holds (ask and
  submit times, the config text, priority classes, timers, seen ids), so the file carries
  the sha256 of its own bytes: it starts ``{"content_sha256":"<hex>",`` and the hash is of
  the file with that member left out (``{`` followed by the rest). A file whose bytes do not
  hash to it is discarded with an ERROR and counted (``integrity_failures``, the metric
  ``evsched_snapshots_discarded_total{reason="integrity"}``); recovery then uses an older
  snapshot or folds the log. A snapshot written before the hash existed has none: it is
  used as before (state digest checked), with a WARNING that its integrity cannot be checked.
* **Identity.** A snapshot records which log it belongs to: ``log_identity``, the sha256 of
  the log's first output record (cycle 1's ``cycle.started``: its time, inputs and source;
  outputs are kept for ever, ``retention.ms=-1``, so it never changes). Recovery compares it
  with the log's own first record before anything else and stops at once when they differ
  (``LogMismatch``): the snapshot directory belongs to another log (another Kafka cluster or
  topic, another log directory).
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from events.log.port import LogRecord
from scheduler.core import snapshot
from scheduler.core.engine import Engine
from scheduler.core.recorded_cycles import COMPLETED, parse_record
from scheduler.core.rules_version import RULES_VERSION

LOG = logging.getLogger("evsched.snapshots")
_HASH_HEAD = b'{"content_sha256":"'
_HASH_LEN = 64


def log_identity(first_output: bytes) -> str:
    """Which log a snapshot belongs to: the sha256 of the log's first output record's bytes."""
    return hashlib.sha256(first_output).hexdigest()


def with_content_hash(body: bytes) -> bytes:
    """A JSON object's bytes with its own sha256 as the first member, ``content_sha256``."""
    digest = hashlib.sha256(body).hexdigest().encode()
    return _HASH_HEAD + digest + (b'",' if body != b"{}" else b'"') + body[1:]


def content_hash_problem(data: bytes) -> str | None:
    """Why a file's bytes fail their ``content_sha256`` (None: they pass, or carry no hash)."""
    if not data.startswith(_HASH_HEAD):
        return None
    cut = len(_HASH_HEAD) + _HASH_LEN
    recorded = data[len(_HASH_HEAD):cut]
    rest = data[cut + 2:] if data[cut:cut + 2] == b'",' else data[cut + 1:]
    actual = hashlib.sha256(b"{" + rest).hexdigest().encode()
    if recorded != actual:
        return f"its bytes hash to {actual[:16].decode()}…, not the content_sha256 it records"
    return None


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
        self.integrity_failures = 0  # snapshots discarded because their bytes failed their hash
        self.log_identity: str | None = None  # this log's (recovery, or the first output written)

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
            "log_identity": self.log_identity,
            "engine": snapshot.dump(engine),
        }
        return engine.cycle_number, with_content_hash(orjson.dumps(body))

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
            data = path.read_bytes()
        except OSError as exc:
            LOG.warning("discarding snapshot %s: unreadable (%s)", path.name, exc)
            return None
        problem = content_hash_problem(data)
        if problem is not None:
            self.integrity_failures += 1
            LOG.error("discarding snapshot %s: it fails its integrity check (%s) — damaged on disk; recovering "
                      "from an older snapshot or the log instead", path.name, problem)
            return None
        try:
            body: Any = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            LOG.warning("discarding snapshot %s: unreadable (%s)", path.name, exc)
            return None
        if not isinstance(body, dict):
            LOG.warning("discarding snapshot %s: not a snapshot (a JSON %s)", path.name, type(body).__name__)
            return None
        if not readable_schema(body):
            LOG.warning("discarding snapshot %s: schema %r, this code reads %d", path.name, body.get("schema"),
                        snapshot.SNAPSHOT_VERSION)
            return None
        if "content_sha256" not in body:
            LOG.warning("snapshot %s has no content hash (written before evsched checked snapshot integrity): "
                        "only its state digest can be checked", path.name)
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


# Output offsets read before a snapshot's output offset to find its cycle's ``cycle.completed``:
# on a transactional Kafka log a commit marker may sit between them, taking an offset, holding no record.
VOUCH_LOOK_BACK = 2


def vouched_digest(body: dict[str, Any], before: Iterable[LogRecord]) -> str | None:
    """The state digest the log records for a snapshot's cycle, or None when the log does not vouch for it.

    ``before``: output records read from up to ``VOUCH_LOOK_BACK`` offsets before the snapshot's
    output offset (later ones are ignored). The last of them must be the ``cycle.completed`` of the
    snapshot's cycle. Recovery and replay both ask here, so they trust the same snapshots.
    """
    offset = body.get("output_offset")
    if not isinstance(offset, int) or offset <= 0:
        return None
    last = max((r for r in before if offset - VOUCH_LOOK_BACK <= r.offset < offset), key=lambda r: r.offset,
               default=None)
    obj = parse_record(last) if last is not None else None
    data = obj.get("data") if obj is not None else None
    if obj is None or obj.get("type") != COMPLETED or not isinstance(data, dict) or data.get("cycle") != body.get(
            "cycle"):
        return None
    digest = data.get("state_digest")
    return digest if isinstance(digest, str) else None

