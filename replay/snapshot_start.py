"""Starting a replay from a snapshot: the newest one at or before a cycle that the log vouches for.

The service saves snapshots (``scheduler.storage.snapshot_files``) every N cycles. A replay that needs
the state after cycle ``k`` can restore the newest snapshot of a cycle ``<= k`` and
re-derive only the cycles after it. A snapshot is used only when recovery would use it:
readable by this code (its snapshot schema), its cycle's ``cycle.completed`` sits in the
log just before the snapshot's output offset with the same state digest, and the
restored engine has that digest. Anything else is passed over (``SnapshotStore`` says
why on the ``evsched.snapshots`` logger) in favour of an older snapshot, or none.

Reading a snapshot file is I/O, as in recovery; the choice itself is a pure function of
the files and the log.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replay.reader import LogSource, output_at
from replay.rederive import StartPoint
from scheduler.storage.snapshot_files import VOUCH_LOOK_BACK, SnapshotStore, vouched_digest


@dataclass(frozen=True)
class SnapshotPick:
    """The start point chosen (None: re-derive from the beginning) and what was looked at."""

    start: StartPoint | None
    path: Path | None = None
    candidates: int = 0  # snapshot files at or before the wanted cycle
    stale: int = 0  # of those, unreadable or of another schema (told apart by their header alone)

    @property
    def cycle(self) -> int:
        """The last cycle the start point holds (0 when starting from the beginning)."""
        return self.start.engine.cycle_number if self.start is not None else 0


def recorded_completion(source: LogSource, body: dict[str, Any]) -> str | None:
    """The ``state_digest`` the log records for a snapshot's cycle, judged as recovery judges it
    (``snapshot_files.vouched_digest``: the last output before the snapshot's output offset)."""
    offset = body.get("output_offset")
    if not isinstance(offset, int) or offset <= 0:
        return None
    before = [rec for at in range(max(0, offset - VOUCH_LOOK_BACK), offset)
              if (rec := output_at(source, at)) is not None]
    return vouched_digest(body, before)


def restore_start(
    source: LogSource, store: SnapshotStore, path: Path, body: dict[str, Any] | None = None
) -> StartPoint | None:
    """The start point of one snapshot file (its ``body`` when already read), or None when
    recovery would not trust it."""
    body = body if body is not None else store.read(path)
    if body is None:
        return None
    recorded = recorded_completion(source, body)
    restored = store.restore(path, body, recorded)
    if restored is None:
        return None
    return StartPoint(restored.engine, dict(restored.positions), restored.output_offset, recorded)


def pick_snapshot(source: LogSource, store: SnapshotStore | None, through_cycle: int | None) -> SnapshotPick:
    """The newest trustworthy snapshot of a cycle ``<= through_cycle`` (any cycle when None)."""
    if store is None:
        return SnapshotPick(None)
    paths = []
    for path in store.candidates():
        cycle = store.cycle_of(path)
        if cycle is not None and cycle > 0 and (through_cycle is None or cycle <= through_cycle):
            paths.append(path)
    stale = 0
    for path in paths:
        if store.header(path) is None:
            stale += 1  # cheap: the engine is not parsed (a log line each would drown the answer)
            continue
        start = restore_start(source, store, path)
        if start is not None:
            return SnapshotPick(start, path, len(paths), stale)
    return SnapshotPick(None, None, len(paths), stale)
