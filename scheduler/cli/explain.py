"""``evsched replay explain``: why a decision was made, or why an ask is still pending (docs/contract.md §6).

``explain DECISION_ID [--log DIR | --kafka …] [--json]``, ``explain --ask APP/ASK …`` and
``explain --revoked APP/ASK …`` (why that allocation was preempted).
Re-derivation starts from the newest usable snapshot before the decision's cycle (or
before the last cycle, for ``--ask``); without one the whole log is re-derived, and
stderr says so. Exit 0 with the explanation; 1 for bad usage, an unreadable log, an
unknown decision id or ask; 2 when re-deriving the decision disagrees with the log (a
replay divergence).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from events.codec import dumps
from events.display import printable_lines
from replay.explain.decision import ExplainError
from replay.explain.from_log import explain_ask_from_log, explain_from_log
from replay.explain.gang import explain_placeholder_release, render_gang_revocation
from replay.explain.rejections import rejections_of
from replay.explain.revocation import explain_revocation_from_log
from replay.explain.text import render_explanation, render_pending, render_revocation
from replay.open_source import open_source
from scheduler.cli.settings import log_settings, snapshot_settings
from scheduler.cli.sources import READ_FAILURES, add_snapshot_arguments, add_source_arguments, log_failure, pick_start

PROG = "evsched replay explain"


def add_explain(replay_subparsers: Any) -> None:
    """Register ``explain`` on the ``replay`` command's subparsers."""
    p = replay_subparsers.add_parser(
        "explain",
        help="why a decision was made, or why an ask is still pending",
        description="Re-derive a decision from the log and explain it: queue order with priorities and fair "
        "shares, app order, ask order, nodes tried and why each was passed over. With --ask, explain why an "
        "ask is still pending after the last cycle.",
    )
    p.add_argument("decision_id", nargs="?", metavar="DECISION_ID", help="e.g. default-12-3")
    p.add_argument("--ask", metavar="APP/ASK", help="explain a pending ask instead of a decision")
    p.add_argument("--revoked", metavar="APP/ASK",
                   help="explain why that allocation was preempted, or a gang's placeholder released")
    add_source_arguments(p)
    add_snapshot_arguments(p)
    p.add_argument("--json", action="store_true", help="print the explanation as one JSON object")
    p.add_argument("--raw", action="store_true",
                   help="exact integers (milli-cores, bytes) in the text instead of human units (256 GiB, 64 cores)")
    p.set_defaults(handler=cmd_explain)


def _fail(message: str) -> int:
    print("\n".join(printable_lines(f"{PROG}: {message}".split("\n"))), file=sys.stderr)  # may quote log content
    return 1


def cmd_explain(args: argparse.Namespace) -> int:
    """Handler of ``replay explain``."""
    log = log_settings(args)
    snaps = snapshot_settings(args, log)
    if sum(x is not None for x in (args.decision_id, args.ask, args.revoked)) != 1:
        return _fail("give either a DECISION_ID or --ask APP/ASK (or --revoked APP/ASK)")
    app_id = ask_id = ""
    for flag, value in (("--ask", args.ask), ("--revoked", args.revoked)):
        if value is not None:
            app_id, sep, ask_id = value.partition("/")
            if not sep or not app_id or not ask_id:
                return _fail(f"{flag} takes APP/ASK, got {value!r}")
    try:
        with open_source(log) as source:
            if args.revoked is not None:
                gang_report = explain_placeholder_release(source, app_id, ask_id)
                if gang_report is not None:  # a placeholder replaced or timed out, a failed app's allocation
                    sys.stdout.write(dumps(gang_report).decode() + "\n" if args.json
                                     else render_gang_revocation(gang_report))
                    return 0
                report = explain_revocation_from_log(source, app_id, ask_id, pick_start(source, snaps, None, PROG))
                sys.stdout.write(dumps(report).decode() + "\n" if args.json else render_revocation(report))
                return 0
            if args.ask is not None:
                start = pick_start(source, snaps, None, PROG)
                pending = explain_ask_from_log(source, app_id, ask_id, start)
                if pending.status in ("unknown-app", "unknown-ask"):
                    rejected = rejections_of(source, app_id, ask_id)
                    why = "".join(f"\n  {line}" for line in rejected)
                    return _fail(f"unknown ask {args.ask}: {pending.summary}" + (f"; rejected:{why}" if why else ""))
                sys.stdout.write(dumps(pending.to_dict()).decode() + "\n" if args.json else render_pending(pending))
                return 0
            explanation = explain_from_log(
                source, args.decision_id, lambda through: pick_start(source, snaps, through, PROG)
            )
    except ExplainError as exc:
        return _fail(str(exc))
    except READ_FAILURES as exc:
        return _fail(log_failure(exc))
    text = dumps(explanation.to_dict()).decode() + "\n" if args.json else render_explanation(explanation, raw=args.raw)
    sys.stdout.write(text)
    return 2 if explanation.problems else 0
