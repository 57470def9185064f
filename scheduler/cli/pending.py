"""``evsched pending``: a queue's pending asks in try order, why each waits, and what would let it run.

``pending [--log DIR | --kafka …] [--queue root.a] [--partition P] [--cycle N] [--offset K] [--limit N]
[--ask APP/ASK] [--json]`` re-derives the state after the last complete cycle (or cycle N)
from the log, starting from the newest usable snapshot, and prints
``replay.explain.pending_list``'s report (the same as ``GET /ws/v1/partition/{p}/queue/{q}/pending``).
Exit 0 with the report; 1 for bad usage, an unknown partition, queue or cycle, or an unreadable log.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from events.codec import dumps
from replay.explain.pending_list import DEFAULT_LIMIT, MAX_LIMIT, UnknownQueue, pending_in_queue, render_pending_list
from replay.open_source import open_source
from replay.state_at import StateError, engine_at
from scheduler.cli.settings import log_settings, snapshot_settings
from scheduler.cli.sources import READ_FAILURES, add_snapshot_arguments, add_source_arguments, log_failure, pick_start

PROG = "evsched pending"


def _limit(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) > MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"a whole number 0..{MAX_LIMIT}, got {text!r}")
    return int(text)


def _count(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or len(text) > 12:
        raise argparse.ArgumentTypeError(f"a whole number, got {text!r}")
    return int(text)


def add_pending(sub: Any) -> None:
    """Register ``pending``."""
    p = sub.add_parser(
        "pending", help="a queue's pending asks in try order: position, every reason, what would let each run",
        description="List the pending asks under a queue (a leaf, or a parent and everything below it) in the "
        "order the next cycle tries them, each with its position in the queue and in the partition, every "
        "reason it is held and what would let it run; from the log, after the last complete cycle or --cycle N.")
    p.add_argument("--queue", default="root", metavar="Q", help="queue path (default root: the whole partition)")
    p.add_argument("--cycle", type=_count, metavar="N", help="the state after cycle N (default: the last complete)")
    p.add_argument("--offset", type=_count, default=0, metavar="K", help="skip the first K asks")
    p.add_argument("--limit", type=_limit, default=DEFAULT_LIMIT, metavar="N",
                   help=f"list at most N asks (default {DEFAULT_LIMIT}, at most {MAX_LIMIT})")
    p.add_argument("--ask", metavar="APP/ASK", help="only this ask (its positions, reasons and remedies)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    add_source_arguments(p)
    add_snapshot_arguments(p)
    p.set_defaults(handler=cmd_pending)


def _fail(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return 1


def cmd_pending(args: argparse.Namespace) -> int:
    """Handler of ``pending``."""
    only = None
    if args.ask is not None:
        app_id, sep, ask_id = args.ask.partition("/")
        if not sep or not app_id or not ask_id:
            return _fail(f"--ask takes APP/ASK, got {args.ask!r}")
        only = (app_id, ask_id)
    named = [name for given in args.partitions or [] for name in given.split(",") if name]
    if len(named) > 1:
        return _fail("give one --partition")
    partition = named[0] if named else "default"
    log = log_settings(args)
    try:
        with open_source(log) as source:
            engine = engine_at(source, args.cycle, pick_start(source, snapshot_settings(args, log), args.cycle, PROG))
    except StateError as exc:
        return _fail(str(exc))
    except READ_FAILURES as exc:
        return _fail(log_failure(exc))
    try:
        report = pending_in_queue(engine, partition, args.queue, args.offset, args.limit, only)
    except UnknownQueue as exc:
        return _fail(exc.args[0])
    if only is not None and not report["items"]:
        return _fail(f"ask {args.ask} is not pending under {args.queue} after cycle {report['afterCycle']} "
                     f"(evsched replay explain --ask {args.ask} says why)")
    sys.stdout.write(dumps(report).decode() + "\n" if args.json else render_pending_list(report))
    return 0
