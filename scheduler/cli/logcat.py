"""``evsched log cat|tail``: the log's records as JSONL, like ``kcat`` — the embedded log is binary, this reads it.

``log cat [--inputs|--outputs] [--type T …] [--meta] [--follow] [--log DIR | --kafka …]``
prints every record, inputs then outputs (both when neither flag is given), one JSON
object per line: the record's own JSON, exactly as stored (``--meta`` wraps it with
its side, channel, offset and append time). ``log tail [-n N]`` prints only the last N
records of each side. ``--follow`` keeps printing records as they are appended until
SIGINT or SIGTERM. ``--type`` keeps records of the given event types (repeatable or a
comma list: ``--type allocation.decided,input.rejected``). A record that is not JSON (an
input the service rejected as unreadable) is printed as ``{"unreadable": "<text>"}``
with ``--meta``'s fields, so the output is always JSONL.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from events.log.port import LogRecord
from events.log.source import LogSource
from replay.open_source import open_source
from scheduler.cli.flags import positive_int
from scheduler.cli.settings import log_settings
from scheduler.cli.sources import READ_FAILURES, add_source_arguments, log_failure
from scheduler.cli.stopping import sigterm_interrupts

POLL_SECONDS = 0.2


def add_log_commands(sub: Any) -> None:
    """Register ``log cat`` and ``log tail``."""
    p = sub.add_parser("log", help="print the log's records as JSONL (cat, tail), like kcat")
    lsub = p.add_subparsers(dest="log_command", metavar="SUBCOMMAND")
    lsub.required = True
    for name, text in (("cat", "every record"), ("tail", "the last records of each side")):
        c = lsub.add_parser(name, help=f"{text}, one JSON object per line")
        side = c.add_mutually_exclusive_group()
        side.add_argument("--inputs", action="store_true", help="only the input log")
        side.add_argument("--outputs", action="store_true", help="only the output (decision) log")
        c.add_argument("--type", action="append", dest="types", metavar="T",
                       help="only records of this event type (repeatable, or a comma list)")
        c.add_argument("--meta", action="store_true",
                       help="wrap each record: {side, channel, offset, append_time_us, record}")
        c.add_argument("--follow", "-f", action="store_true", help="keep printing new records until SIGINT/SIGTERM")
        if name == "tail":
            c.add_argument("-n", type=positive_int, default=10, metavar="N", help="records per side (default 10)")
        add_source_arguments(c)
        c.set_defaults(handler=cmd_log, tail=name == "tail")


def _types(values: list[str] | None) -> frozenset[str] | None:
    if not values:
        return None
    return frozenset(t.strip() for v in values for t in v.split(",") if t.strip())


def render(side: str, rec: LogRecord, types: frozenset[str] | None, meta: bool) -> bytes | None:
    """One record as a JSONL line (None when ``types`` filters it out)."""
    try:
        obj: Any = orjson.loads(rec.value)
    except orjson.JSONDecodeError:
        obj = None
    kind = obj.get("type") if isinstance(obj, dict) else None
    if types is not None and kind not in types:
        return None
    body: Any = obj if obj is not None else {"unreadable": rec.value.decode("utf-8", errors="replace")}
    if not meta:
        return orjson.dumps(body) if obj is None else rec.value.strip()
    return orjson.dumps({"side": side, "channel": rec.channel, "offset": rec.offset,
                         "append_time_us": rec.append_time_us, "record": body})


class _Cursor:
    """Where reading stopped on each side, so a follow picks up after it."""

    def __init__(self) -> None:
        self.inputs: dict[str, int] = {}
        self.outputs = 0

    def new_inputs(self, source: LogSource) -> Iterator[LogRecord]:
        for rec in source.iter_inputs(dict(self.inputs)):
            if rec.offset >= self.inputs.get(rec.channel, 0):
                self.inputs[rec.channel] = rec.offset + 1
                yield rec

    def new_outputs(self, source: LogSource) -> Iterator[LogRecord]:
        for rec in source.iter_outputs(self.outputs):
            self.outputs = rec.offset + 1
            yield rec


def _last(records: Iterable[LogRecord], n: int | None) -> Iterable[LogRecord]:
    return records if n is None else deque(records, maxlen=n)


def _emit(side: str, records: Iterable[LogRecord], args: argparse.Namespace, types: frozenset[str] | None) -> None:
    out = sys.stdout.buffer
    for rec in records:
        line = render(side, rec, types, args.meta)
        if line is not None:
            out.write(line + b"\n")
    out.flush()


def cmd_log(args: argparse.Namespace) -> int:
    """Handler of ``log cat`` / ``log tail``."""
    types = _types(args.types)
    inputs, outputs = not args.outputs, not args.inputs
    last = args.n if args.tail else None
    cursor = _Cursor()
    try:
        with open_source(log_settings(args)) as source, sigterm_interrupts():
            if inputs:
                _emit("inputs", _last(cursor.new_inputs(source), last), args, types)
            if outputs:
                _emit("outputs", _last(cursor.new_outputs(source), last), args, types)
            while args.follow:
                time.sleep(POLL_SECONDS)
                if inputs:
                    _emit("inputs", cursor.new_inputs(source), args, types)
                if outputs:
                    _emit("outputs", cursor.new_outputs(source), args, types)
    except KeyboardInterrupt:
        if not args.follow:
            raise
        return 0  # SIGINT or SIGTERM ends following
    except READ_FAILURES as exc:
        print(f"evsched log: {log_failure(exc)}", file=sys.stderr)
        return 1
    return 0
