"""Recovery time without snapshots: how long a restart takes to rebuild the state from a log.

    python benchmarks/recovery.py --events 1000000 --dir /tmp/evsched-recovery \\
        --writer /path/to/old/checkout --code /path/to/old/checkout --code .

Builds (once, kept in ``--dir``) an embedded log of ``--events`` workload events written by
``evsched run --once`` of the ``--writer`` checkout (default: this one), then times
``recover()`` over it, without snapshots, in a fresh process per ``--code`` checkout (best
of ``--repeat``). Code from before issue 18 re-runs every cycle (``scheduler.recovery``);
from issue 18 on, recovery folds the recorded outputs (``scheduler.service.recovery``).
A log written by the old code is readable by both (its cycles are rules version 1), so
the same log measures before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from harness import ROOT, log_decisions, write_workload_jsonl  # puts the repository on sys.path

from scheduler.simulation.workload import PRIORITY_CLASSES, WorkloadSpec

PROBE = """
import asyncio, gc, json, sys, time
try:
    from scheduler.service.recovery import recover
except ImportError:
    from scheduler.recovery import recover
from events.log.file import FileLog
gc.freeze()
log = FileLog(sys.argv[1])
t0, c0 = time.perf_counter(), time.process_time()
found = asyncio.run(recover(log, source="evsched"))
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"wall": wall, "cpu": cpu, "cycles": found.cycles, "mismatches": len(found.digest_mismatches),
                  "state": found.engine.digest()}))
"""


def _env(code: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(code), "PYTHONDONTWRITEBYTECODE": "1"}


def build(directory: Path, events: int, writer: Path) -> None:
    """The workload as an embedded log, written by ``writer``'s ``evsched run --once``."""
    nodes, apps = max(100, events // 30), 200
    asks = events - nodes - apps - 1 - len(PRIORITY_CLASSES)  # the config line, the classes: exactly `events`
    spec = WorkloadSpec(nodes=nodes, apps=apps, asks=asks, leaves=20, departments=4)
    directory.mkdir(parents=True, exist_ok=True)
    count = write_workload_jsonl(spec, directory / "in.jsonl")
    assert count == events, count
    run = [sys.executable, "-m", "scheduler"]
    log = str(directory / "log")
    # The config goes to the admin channel, the only one a writer that has one accepts it from.
    helps = subprocess.run([*run, "submit", "--help"], cwd=writer, env=_env(writer), check=True,
                           capture_output=True, text=True).stdout
    admin = ["--admin"] if "--admin" in helps else []
    subprocess.run([*run, "submit", *admin, "--log", log, str(directory / "in.jsonl")], cwd=writer,
                   env=_env(writer), check=True, capture_output=True)
    t0 = time.perf_counter()
    subprocess.run([*run, "run", "--log", log, "--once", "--snapshot-dir", str(directory / "no-snapshots"),
                    "--snapshot-every", "1000000000"], cwd=writer, env=_env(writer), check=True, capture_output=True)
    (directory / "in.jsonl").unlink()
    print(f"built {log}: {count} input events, {log_decisions(Path(log)):,} decisions, written by {writer} in "
          f"{time.perf_counter() - t0:.1f} s")


def probe(log: Path, code: Path) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", PROBE, str(log)], cwd=code, env=_env(code), check=True,
                         capture_output=True, text=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--dir", type=Path, required=True, help="where the log is built (and kept)")
    parser.add_argument("--writer", type=Path, default=ROOT, help="checkout whose evsched writes the log")
    parser.add_argument("--code", type=Path, action="append", help="checkout(s) to time recover() of")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    if not (args.dir / "log").is_dir():
        build(args.dir, args.events, args.writer.resolve())
    for code in args.code or [ROOT]:
        runs = [probe(args.dir / "log", code.resolve()) for _ in range(args.repeat)]
        best = min(runs, key=lambda r: r["wall"])
        walls = ", ".join(f"{r['wall']:.2f}" for r in runs)
        print(f"{code}: recover() {best['wall']:.2f} s wall, {best['cpu']:.2f} s CPU (best of {args.repeat}; "
              f"all: {walls}), {best['cycles']} cycles, "
              f"{best['mismatches']} digest mismatches, state {str(best['state'])[:19]}")


if __name__ == "__main__":
    main()
