"""Command-line plumbing shared by ``replay …`` and ``audit``: which log to read, which snapshots to use.

``add_source_arguments`` gives a subcommand ``evsched run``'s own log options (``--log DIR |
--kafka HOST:PORT``, ``--input-topic`` …, security options: ``scheduler.cli.flags``), so a
log is named the same way everywhere; ``scheduler.cli.settings.log_settings`` turns them into
``LogSettings`` and ``replay.open_source.open_source`` opens that read-only.
``add_snapshot_arguments`` / ``pick_start`` choose a snapshot to start from
(``replay.snapshot_start``), saying on stderr when there is none and the whole log is
re-derived. Shell code: it prints and opens files. The snapshot and re-derivation modules
are imported only when used, so ``evsched audit`` (which must not load the scheduler
core) can share the log options.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from events.log.port import LogError
from events.log.source import LogSource, LogUnavailable
from replay.kafka_source import REPLAY_GROUP
from scheduler.cli.flags import add_log_arguments
from scheduler.cli.settings import SnapshotSettings

if TYPE_CHECKING:
    from replay.rederive import StartPoint
    from scheduler.storage.snapshot_files import SnapshotStore


# What a reading command catches when the log cannot be read; ``log_failure`` says it.
READ_FAILURES = (LogUnavailable, LogError)


def log_failure(exc: LogUnavailable | LogError) -> str:
    """The message for a log that cannot be read: a missing or damaged log says so itself, a
    failing one (broker gone, disk) is prefixed ``cannot read the log:``."""
    return str(exc) if isinstance(exc, LogUnavailable) else f"cannot read the log: {exc}"


def add_source_arguments(p: argparse.ArgumentParser) -> None:
    """``--log DIR | --kafka HOST:PORT`` with Kafka's topic and security options, as ``evsched run``."""
    add_log_arguments(p)
    # Replay reads with its own (never committing) consumer group, not the service's.
    p.set_defaults(group=REPLAY_GROUP)


def add_snapshot_arguments(p: argparse.ArgumentParser) -> None:
    """``--snapshot-dir DIR`` and ``--no-snapshots``."""
    p.add_argument("--snapshot-dir", metavar="DIR",
                   help="the service's snapshots, to start from instead of cycle 1 "
                   "(default: where `evsched run` writes them: DIR/snapshots for the embedded log, "
                   "./evsched-data/snapshots/GROUP[/PARTITION] for Kafka)")
    p.add_argument("--no-snapshots", action="store_true", help="re-derive from the first cycle, ignoring snapshots")


def snapshot_store(snapshots: SnapshotSettings) -> SnapshotStore | None:
    """The snapshot directory ``snapshots`` names (None with ``--no-snapshots``, none at all, or not a directory)."""
    if snapshots.disabled or snapshots.directory is None or not Path(snapshots.directory).is_dir():
        return None
    from scheduler.storage.snapshot_files import SnapshotStore

    return SnapshotStore(snapshots.directory)


def pick_start(
    source: LogSource, snapshots: SnapshotSettings, through_cycle: int | None, prog: str
) -> StartPoint | None:
    """The newest usable snapshot at or before ``through_cycle``; says on stderr when there is none."""
    if through_cycle is not None and through_cycle < 1:
        return None  # cycle 0 (or nothing) needs no re-derivation
    from replay.snapshot_start import pick_snapshot

    store = snapshot_store(snapshots)
    pick = pick_snapshot(source, store, through_cycle)
    if pick.start is None:
        where = f"cycle {through_cycle}" if through_cycle is not None else "the last cycle"
        if snapshots.disabled:
            why = "--no-snapshots"
        elif store is None:
            why = "no snapshot directory"
        elif pick.candidates:
            why = f"none of the {pick.candidates} snapshots at or before {where} matches this log and code"
            if pick.stale:
                why += f" ({pick.stale} unreadable or of another snapshot schema)"
        else:
            why = f"no snapshot at or before {where} in {store.directory}"
        print(f"{prog}: {why}: re-deriving from the first cycle", file=sys.stderr)
    return pick.start
