"""``evsched replay …``: the command line of the replay tools (verify, state, diff, export, whatif).

``add_replay_commands(subparsers)`` registers ``replay`` on the ``evsched`` parser; the
``explain`` subcommand comes from ``scheduler.cli.explain.add_explain`` when that module is
present. Every subcommand reads the embedded log (``--log DIR``) or Kafka (``--kafka
HOST:PORT`` with ``evsched run``'s topic and security options: ``scheduler.cli.sources``).
``state``, ``diff`` and ``whatif`` start from the newest usable snapshot before the
cycles they need; ``verify`` splits the log at snapshots and verifies the ranges in
``--jobs`` processes (``replay.verify_parallel``). Exit codes: 0 success, 1 bad usage or
an unreadable/missing log, 2 a replay divergence (or a log whose structure cannot be
replayed). This module is shell: it reads the clock (for the progress bar) and prints.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import IO, Any

from events.codec import dumps
from events.display import printable_lines
from events.log.port import LogError
from events.log.source import LogUnavailable, input_total
from replay.export import ExportError, ExportStats, export_lines
from replay.find_cycle import latest_cycle
from replay.heap_pad import keep_heap_pad
from replay.open_source import open_source
from replay.state_at import StateError, diff_states, format_diff, state_at, states_at
from replay.verify import VerifyReport
from replay.verify_parallel import ParallelRun, verify_parallel
from replay.whatif import WhatIfError, whatif
from scheduler.cli.flags import ExitOneParser
from scheduler.cli.settings import log_settings, snapshot_settings
from scheduler.cli.sources import add_snapshot_arguments, add_source_arguments, pick_start, snapshot_store

PROG = "evsched replay"
PROGRESS_EVERY_S = 0.25
BAR_WIDTH = 24


def _fail(message: str, code: int = 1) -> int:
    print("\n".join(printable_lines(f"{PROG}: {message}".split("\n"))), file=sys.stderr)  # may quote log content
    return code


class _Progress:
    """A progress bar on stderr (inputs re-derived out of the log's total), redrawn at most
    every ``PROGRESS_EVERY_S``."""

    def __init__(self, stream: IO[str], total_inputs: int | None) -> None:
        self.stream = stream
        self.total = total_inputs or 0
        self.started = time.monotonic()
        self._last = 0.0
        self.cycles = self.inputs = self.outputs = 0

    def _line(self) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        rate = self.inputs / elapsed
        counts = f"{self.inputs:,} inputs, {self.cycles:,} cycles, {self.outputs:,} outputs"
        if self.total:
            done = min(self.inputs / self.total, 1.0)
            filled = int(done * BAR_WIDTH)
            eta = (self.total - self.inputs) / rate if rate > 0 else 0.0
            return (f"verify [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done:4.0%} {counts},"
                    f" {elapsed:.1f} s, {rate:,.0f} inputs/s, ETA {max(eta, 0.0):.0f} s")
        return f"verify: {counts}, {elapsed:.1f} s, {rate:,.0f} inputs/s"

    def update(self, cycles: int, inputs: int, outputs: int) -> None:
        """New totals; redraws when the last redraw is old enough."""
        self.cycles, self.inputs, self.outputs = cycles, inputs, outputs
        now = time.monotonic()
        if now - self._last >= PROGRESS_EVERY_S:
            self._last = now
            self.stream.write("\r" + self._line())
            self.stream.flush()

    def __call__(self, run: ParallelRun) -> None:
        self.update(*run.totals())

    def finish(self, report: VerifyReport) -> None:
        """The last line, with the final counts."""
        self.cycles, self.inputs, self.outputs = report.cycles, report.inputs, report.outputs
        self.stream.write("\r" + self._line() + "\n")
        self.stream.flush()


def cmd_verify(args: argparse.Namespace) -> int:
    """``replay verify``: exit 0 when everything re-derives, 2 at the first divergence."""
    log = log_settings(args)
    if args.jobs is not None and args.jobs < 1:
        return _fail(f"--jobs must be at least 1, got {args.jobs}")
    jobs = args.jobs or os.cpu_count() or 1
    show = args.progress or sys.stderr.isatty()
    keep_heap_pad()  # for this process and the workers it forks (replay.heap_pad says why)
    with open_source(log) as source:
        progress = _Progress(sys.stderr, input_total(source)) if show else None
        report = verify_parallel(source, log, snapshot_store(snapshot_settings(args, log)), jobs, on_progress=progress)
    if progress is not None:
        progress.finish(report)
    if args.json:
        body = {
            "ok": report.ok, "cycles": report.cycles, "inputs": report.inputs, "outputs": report.outputs,
            "incomplete_cycle": report.incomplete_cycle, "rerun_cycles": report.rerun_cycles,
            "unconsumed_inputs": report.unconsumed_inputs,
            "rederived_by_rules_version": {str(v): n for v, n in sorted(report.rederived.items())},
            "checked_only_by_rules_version": {str(v): n for v, n in sorted(report.checked.items())},
            "divergence": None if report.divergence is None else report.divergence.to_dict(),
        }
        print(dumps(body).decode())
    else:
        print("\n".join(report.summary_lines()))
    return 0 if report.ok else 2


LATEST = -1


def cycle_arg(text: str) -> int:
    """An argparse type: a cycle number (0 or more), or ``latest`` (LATEST: the last complete cycle)."""
    if text == "latest":
        return LATEST
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a cycle number nor 'latest'") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is not a cycle number (0 or more)")
    return value


def cmd_state(args: argparse.Namespace) -> int:
    """``replay state --cycle N``: the state form after cycle N, one canonical JSON line."""
    log = log_settings(args)
    snaps = snapshot_settings(args, log)
    with open_source(log) as source:
        cycle = latest_cycle(source) if args.cycle == LATEST else args.cycle
        found = state_at(source, cycle, pick_start(source, snaps, cycle, f"{PROG} state"))
    sys.stdout.write(dumps(found.form).decode() + "\n")
    if not found.digest_matches:
        return _fail(f"divergence: the re-derived state digest after cycle {found.cycle} ({found.derived_digest})"
                     f" differs from the recorded one ({found.recorded_digest}); run `{PROG} verify`", 2)
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    """``replay diff --cycle N --cycle M``: what changed in the state between two cycles."""
    log = log_settings(args)
    snaps = snapshot_settings(args, log)
    if not args.cycle or len(args.cycle) != 2:
        return _fail("diff needs exactly two --cycle options")
    first, second = args.cycle
    with open_source(log) as source:
        positive = [c for c in (first, second) if c > 0]  # cycle 0 is the initial state: nothing to re-derive
        start = pick_start(source, snaps, min(positive), f"{PROG} diff") if positive else None
        found = states_at(source, [first, second], start)
    diff = diff_states(found[first].form, found[second].form)
    if args.json:
        print(dumps({"from_cycle": first, "to_cycle": second, **diff}).decode())
    else:
        print("\n".join(format_diff(diff, first, second, raw=args.raw)))
    bad = [s for s in (found[first], found[second]) if not s.digest_matches]
    if bad:
        return _fail(f"divergence: the re-derived state digest after cycle {bad[0].cycle} differs from the"
                     f" recorded one; run `{PROG} verify`", 2)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """``replay export``: a simulate file that reproduces the run, on stdout or ``--output``."""
    log = log_settings(args)
    stats = ExportStats()
    with open_source(log) as source:
        lines = list(export_lines(source, stats, args.through_cycle))
    body = b"".join(line + b"\n" for line in lines)
    if args.output in (None, "-"):
        sys.stdout.buffer.write(body)
        sys.stdout.flush()
    else:
        try:
            with open(args.output, "wb") as fh:
                fh.write(body)
        except OSError as exc:
            return _fail(f"cannot write {args.output}: {exc.strerror}")
    notes = [f"exported {stats.cycles} cycles, {stats.inputs} inputs"]
    if stats.stand_ins:
        shown = ", ".join(stats.stand_ins[:10]) + (" …" if len(stats.stand_ins) > 10 else "")
        notes.append(f"{len(stats.stand_ins)} unreadable records written as stand-in lines: {shown}")
    if stats.incomplete_cycle is not None:
        notes.append(f"incomplete last cycle {stats.incomplete_cycle} left out (the service will re-run it)")
    print(f"{PROG} export: " + "; ".join(notes), file=sys.stderr)
    return 0


def cmd_whatif(args: argparse.Namespace) -> int:
    """``replay whatif --config NEW.yaml | --rules current``: how decisions change under another
    queue config, or under this build's scheduling rules."""
    log = log_settings(args)
    snaps = snapshot_settings(args, log)
    from scheduler.config import ConfigError, SchedulerConfig, load_config
    from scheduler.config.profiles import RulesProfile

    if args.config is None and args.rules is None:
        return _fail("whatif needs --config NEW.yaml, --rules current|yunikorn-1.5|yunikorn-1.9, or both")
    config: SchedulerConfig | None = None
    if args.config is not None:
        try:
            with open(args.config, "rb") as fh:
                text = fh.read()
        except OSError as exc:
            return _fail(f"cannot read config {args.config}: {exc.strerror}")
        try:
            config = load_config(text)
        except ConfigError as exc:
            return _fail(f"config {args.config} is invalid:\n" + "\n".join(f"  - {r}" for r in exc.reasons))
    with open_source(log) as source:
        start = pick_start(source, snaps, args.from_cycle - 1, f"{PROG} whatif") if args.from_cycle > 1 else None
        profile = RulesProfile(args.rules) if args.rules not in (None, "current") else None
        report = whatif(source, config, from_cycle=args.from_cycle, start=start, profile=profile)
    print(dumps(report.to_dict()).decode() if args.json else "\n".join(report.lines()))
    return 0


def _guarded(handler: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            code: int = handler(args)
        except LogUnavailable as exc:
            return _fail(f"no readable log: {exc}")
        except LogError as exc:
            return _fail(f"cannot read the log: {exc}")
        except (StateError, ExportError, WhatIfError) as exc:
            return _fail(str(exc), 2 if exc.structural else 1)
        return code

    return run


def _no_subcommand(args: argparse.Namespace) -> int:
    return _fail("choose a subcommand: verify, state, diff, export, whatif (or explain); see --help")


def add_replay_commands(sub: Any) -> None:
    """Register ``replay`` and its subcommands on the ``evsched`` subparsers object."""
    replay = sub.add_parser("replay", help="re-derive, verify, inspect and export the decision log")
    replay.set_defaults(handler=_no_subcommand)
    rsub = replay.add_subparsers(dest="replay_command", metavar="SUBCOMMAND", parser_class=ExitOneParser)

    p = rsub.add_parser("verify", help="re-derive every cycle and compare every output and state digest")
    add_source_arguments(p)
    add_snapshot_arguments(p)
    p.add_argument("--jobs", type=int, metavar="N",
                   help="worker processes verifying ranges between snapshots (default: the number of CPUs)")
    p.add_argument("--progress", action="store_true", help="progress on stderr even when it is not a terminal")
    p.add_argument("--json", action="store_true", help="the result as one JSON object")
    p.set_defaults(handler=_guarded(cmd_verify))

    p = rsub.add_parser("state", help="the state after cycle N (one canonical JSON line)")
    p.add_argument("--cycle", type=cycle_arg, required=True, metavar="N|latest",
                   help="0 is the state before the first cycle; 'latest' the last complete cycle")
    add_source_arguments(p)
    add_snapshot_arguments(p)
    p.set_defaults(handler=_guarded(cmd_state))

    p = rsub.add_parser("diff", help="what changed in the state between two cycles")
    p.add_argument("--cycle", type=int, action="append", metavar="N", help="give twice: --cycle N --cycle M")
    p.add_argument("--json", action="store_true", help="the diff as one JSON object")
    p.add_argument("--raw", action="store_true",
                   help="exact integers (milli-cores, bytes) in the text instead of human units (256 GiB, 64 cores)")
    add_source_arguments(p)
    add_snapshot_arguments(p)
    p.set_defaults(handler=_guarded(cmd_diff))

    p = rsub.add_parser("export", help="a simulate file that reproduces the run")
    add_source_arguments(p)
    p.add_argument("--through-cycle", type=int, metavar="N", help="stop after cycle N (default: every complete cycle)")
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    p.set_defaults(handler=_guarded(cmd_export))

    p = rsub.add_parser("whatif", help="re-run the log under another queue configuration or the current rules")
    p.add_argument("--config", metavar="NEW.yaml", help="the queue configuration to try")
    p.add_argument("--rules", choices=["current", "yunikorn-1.5", "yunikorn-1.9"],
                   help="re-run under this build's scheduling rules (with the recorded configs unless --config); "
                        "a profile name re-runs every partition under that rules profile: what upgrading YuniKorn "
                        "would change")
    p.add_argument("--from-cycle", type=int, default=1, metavar="N", help="apply it from cycle N (default: 1)")
    p.add_argument("--json", action="store_true", help="the report as one JSON object")
    add_source_arguments(p)
    add_snapshot_arguments(p)
    p.set_defaults(handler=_guarded(cmd_whatif))

    try:
        from scheduler.cli.explain import add_explain
    except ImportError:
        return
    add_explain(rsub)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``evsched replay …`` on its own (tests, and tools that want only replay)."""
    parser = ExitOneParser(prog="evsched")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_replay_commands(sub)
    args = parser.parse_args(argv)
    if not hasattr(args, "handler"):
        parser.print_usage(sys.stderr)
        return 1
    code: int = args.handler(args)
    return code
