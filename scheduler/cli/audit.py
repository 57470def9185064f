"""``evsched audit [--log DIR | --kafka …] [--follow] [--json]``: audit a decision log (``replay.audit.checks``).

Batch mode reads the whole log and exits 0 when clean, 1 on any violation (or an
unreadable log). ``--follow`` keeps tailing the log, polling every 0.5 s, and prints each
violation as it is found until SIGINT; it then prints the summary and exits as batch does.
Once the log as it was is read, it says so on stderr (``… outputs read; following the log``).
Text output by default; ``--json`` prints one JSON object per line (violations, then the
summary).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator, Mapping
from typing import Any

from events.codec import dumps
from events.display import printable
from events.log.open import LogSettings
from events.log.port import LogRecord
from events.log.source import LogSource, read_range
from replay.audit.checks import Auditor, InputSource, Violation
from replay.open_source import open_source
from scheduler.cli.settings import log_settings
from scheduler.cli.sources import READ_FAILURES, add_source_arguments, log_failure
from scheduler.cli.stopping import sigterm_interrupts

POLL_SECONDS = 0.5
PROG = "evsched audit"


def add_audit(subparsers: Any) -> None:
    """Register the top-level ``audit`` command."""
    p = subparsers.add_parser(
        "audit",
        help="check a decision log's invariants independently of the scheduler",
        description="Replays inputs and decisions with the audit's own bookkeeping (no scheduler decision code) "
        "and reports broken invariants: node or queue over capacity, decisions for asks that were not pending, "
        "conflicting duplicate decision ids, missing or unterminated cycles.",
    )
    add_source_arguments(p)
    p.add_argument("--follow", action="store_true", help="keep tailing the log until interrupted")
    p.add_argument("--json", action="store_true", help="JSON lines instead of text")
    p.set_defaults(handler=cmd_audit)


def source_inputs(source: LogSource) -> InputSource:
    """An ``InputSource`` over any log source."""

    def read(start: Mapping[str, int], end: Mapping[str, int]) -> Iterator[LogRecord]:
        return read_range(source, start, end)

    return read


def _print_violation(v: Violation, as_json: bool) -> None:
    if as_json:
        print(dumps(v.as_event()).decode())
    else:
        where = f"cycle {v.cycle}" if v.cycle is not None else "log"
        did = f" [{v.decision_id}]" if v.decision_id else ""
        print(printable(f"VIOLATION {v.rule} ({where}){did}: {v.message}"))
    sys.stdout.flush()


def _print_summary(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(dumps(summary).decode())
        return
    s = summary["data"]
    verdict = "clean" if s["clean"] else f"{s['violations']} violation(s): " + ", ".join(
        f"{rule} ×{n}" for rule, n in s["by_rule"].items()
    )
    print(f"audit: {s['cycles']} cycles, {s['decisions']} decisions, {s['inputs']} inputs — {verdict}")
    if s["admin_off_channel"]:
        print(f"audit: {s['admin_off_channel']} rules change(s) applied from outside the admin channel (listed above)")
    if s["open_cycle"] is not None:
        print(f"audit: cycle {s['open_cycle']} has no cycle.completed yet and was not audited")


def _drain(auditor: Auditor, source: LogSource, offset: int, as_json: bool) -> int:
    """Feed every output record from ``offset``; print new violations and rules changes that
    came from outside the admin channel; return the new offset."""
    shown, noted = len(auditor.violations), len(auditor.off_admin)
    for rec in source.iter_outputs(offset):
        auditor.feed(rec)
        offset = rec.offset + 1
        for v in auditor.violations[shown:]:
            _print_violation(v, as_json)
        for note in auditor.off_admin[noted:]:
            print(dumps({"type": "audit.admin_off_channel", "data": {"message": note}}).decode() if as_json
                  else printable(f"NOT FROM THE ADMIN CHANNEL: {note}"))
        shown, noted = len(auditor.violations), len(auditor.off_admin)
    return offset


def log_admin_topic(log: LogSettings) -> str | None:
    """The Kafka admin topic the settings name (None for the embedded log)."""
    return log.kafka_topics()["admin_topic"] if log.kafka else None


def cmd_audit(args: argparse.Namespace) -> int:
    """Handler of ``evsched audit``."""
    log = log_settings(args)
    try:
        with open_source(log) as source:
            order = list(getattr(source, "input_channel_order", None) or ["inputs"])
            # The admin channels: the embedded log's ``admin``, Kafka's admin topic partitions.
            admin = [ch for ch in order if ch == "admin" or ch.rpartition("/")[0] == log_admin_topic(log)]
            auditor = Auditor(source_inputs(source), channel_order=order, admin_channels=admin)
            try:
                with sigterm_interrupts():
                    offset = _drain(auditor, source, 0, args.json)
                    if args.follow:  # on stderr, so --json's stdout stays JSON lines
                        print(f"{PROG}: {offset} outputs read; following the log (Ctrl-C or SIGTERM ends)",
                              file=sys.stderr, flush=True)
                    while args.follow:
                        time.sleep(POLL_SECONDS)
                        offset = _drain(auditor, source, offset, args.json)
            except KeyboardInterrupt:
                if not args.follow:
                    raise
                # SIGINT or SIGTERM is how following ends: the summary and exit code follow as in batch mode.
    except READ_FAILURES as exc:
        print(f"{PROG}: {log_failure(exc)}", file=sys.stderr)
        return 1
    _print_summary(auditor.summary(), args.json)
    return 1 if auditor.violations else 0
