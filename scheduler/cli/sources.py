"""Command-line plumbing shared by ``replay …`` and ``audit``: which log to read, which snapshots to use.

``add_source_arguments`` gives a subcommand ``evsched run``'s own log options (``--log DIR |
--kafka HOST:PORT``, ``--input-topic`` …, security options: ``scheduler.cli.run``), so a
log is named the same way everywhere; ``open_source`` opens it read-only as a
``LogSource``. ``add_snapshot_arguments`` / ``pick_start`` choose a snapshot to start
from (``replay.snapshot_start``), saying on stderr when there is none and the whole log
is re-derived. Shell code: it prints and opens files and connections. The snapshot and
re-derivation modules are imported only when used, so ``evsched audit`` (which must not
load the scheduler core) can share the log options.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from replay.kafka_source import REPLAY_GROUP, open_kafka_source
from replay.reader import DEFAULT_LOG_DIR, LogSource, open_file_log

if TYPE_CHECKING:
    from replay.rederive import StartPoint
    from scheduler.storage.snapshot_files import SnapshotStore


def add_source_arguments(p: argparse.ArgumentParser) -> None:
    """``--log DIR | --kafka HOST:PORT`` with Kafka's topic and security options, as ``evsched run``."""
    from scheduler.cli.run import add_log_arguments

    add_log_arguments(p)
    # Replay reads with its own (never committing) consumer group, not the service's.
    p.set_defaults(group=REPLAY_GROUP)


def add_snapshot_arguments(p: argparse.ArgumentParser) -> None:
    """``--snapshot-dir DIR`` and ``--no-snapshots``."""
    p.add_argument("--snapshot-dir", metavar="DIR",
                   help="the service's snapshots, to start from instead of cycle 1 "
                   "(default: DIR/snapshots for the embedded log; none for Kafka)")
    p.add_argument("--no-snapshots", action="store_true", help="re-derive from the first cycle, ignoring snapshots")


@contextmanager
def open_source(args: argparse.Namespace) -> Iterator[LogSource]:
    """The log the arguments name, read-only: the embedded log, or Kafka with ``--kafka``."""
    if getattr(args, "kafka", None):
        with open_kafka_source(args) as kafka:
            yield kafka
        return
    with open_file_log(getattr(args, "log", None) or DEFAULT_LOG_DIR) as source:
        yield source


def snapshot_store(args: argparse.Namespace) -> SnapshotStore | None:
    """The snapshot directory the arguments name (None with ``--no-snapshots`` or none at all).

    As ``evsched run`` lays them out: ``DIR/snapshots`` of the embedded log, ``--snapshot-dir``
    for Kafka, and ``--snapshot-dir``/``P`` for the shard of ``--partition P``.
    """
    if getattr(args, "no_snapshots", False):
        return None
    directory = getattr(args, "snapshot_dir", None)
    if directory is None and not getattr(args, "kafka", None):
        directory = str(Path(getattr(args, "log", None) or DEFAULT_LOG_DIR) / "snapshots")
    elif directory is not None and getattr(args, "partitions", None):
        from scheduler.cli.shards import partition_names

        shards = partition_names(args)
        directory = str(Path(directory) / shards[0]) if len(shards) == 1 else directory
    if directory is None or not Path(directory).is_dir():
        return None
    from scheduler.storage.snapshot_files import SnapshotStore

    return SnapshotStore(directory)


def pick_start(source: LogSource, args: argparse.Namespace, through_cycle: int | None, prog: str) -> StartPoint | None:
    """The newest usable snapshot at or before ``through_cycle``; says on stderr when there is none."""
    if through_cycle is not None and through_cycle < 1:
        return None  # cycle 0 (or nothing) needs no re-derivation
    from replay.snapshot_start import pick_snapshot

    store = snapshot_store(args)
    pick = pick_snapshot(source, store, through_cycle)
    if pick.start is None:
        where = f"cycle {through_cycle}" if through_cycle is not None else "the last cycle"
        if getattr(args, "no_snapshots", False):
            why = "--no-snapshots"
        elif store is None:
            why = "no snapshot directory"
        elif pick.candidates:
            why = f"none of the {pick.candidates} snapshots at or before {where} matches this log and code"
            if pick.stale:
                why += f" ({pick.stale} unreadable or made by another version of the code)"
        else:
            why = f"no snapshot at or before {where} in {store.directory}"
        print(f"{prog}: {why}: re-deriving from the first cycle", file=sys.stderr)
    return pick.start
