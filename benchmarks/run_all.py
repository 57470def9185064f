"""``make bench``: every issue #7 benchmark in one run, then one summary of every target.

Each script runs in a fresh interpreter (so one cannot warm or bloat the heap of the next)
and records its figures (``harness.report``), the end-to-end Kafka benchmark (``e2e.py``,
on the reference workload, 2 service runs and 5 s of latency; its scale-out part runs alone,
``e2e.py --shards 4``) included. Sizes are the targets' own, except where a target does not fix one
(the verify log): that is reduced to keep the whole run to a few minutes, and the output
says so.

    python benchmarks/run_all.py [--quick] [--skip NAME ...] [--summary FILE]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from harness import RESULTS_ENV, machine  # noqa: E402

# name, script arguments, arguments with --quick, and what was reduced (None: the target's own sizes)
PLAN: list[tuple[str, list[str], list[str], str | None]] = [
    ("core", ["--repeat", "2", "--baseline-steps", "20"], ["--repeat", "1", "--baseline-steps", "5"], None),
    ("scaling", [], ["--sizes", "1000,5000,50000", "--baseline-steps", "3"], None),
    ("apply", ["--repeat", "3"], ["--repeat", "1"], None),
    ("verify", ["--events", "60000", "--repeat", "1"], ["--events", "20000", "--repeat", "1"],
     "a 60,000-event service log (the target fixes no size)"),
    ("simulate", ["--repeat", "2"], ["--repeat", "1", "--nodes", "500", "--asks", "5000", "--apps", "50"], None),
    ("memory", [], ["--asks", "200000"], None),
    ("e2e", ["--runs", "2", "--seconds", "5"], ["--events", "10000", "--asks", "4000", "--seconds", "3", "--runs", "1"],
     None),
]


def run_script(name: str, args: list[str], results: Path) -> tuple[int, str, float]:
    """Run one benchmark, echoing its output; return its exit code, output and seconds."""
    print(f"\n######## {name}.py {' '.join(args)}", flush=True)
    env = dict(os.environ, **{RESULTS_ENV: str(results)})
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(HERE / f"{name}.py"), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, cwd=HERE.parent)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        print(line, end="", flush=True)
        lines.append(line)
    code = proc.wait()
    return code, "".join(lines), time.perf_counter() - t0


def summary(entries: list[dict[str, Any]], failures: list[str], reduced: list[str], notes: list[str],
            seconds: float, host: str) -> str:
    rows = ["", "=" * 100, f"SUMMARY (issue #7 targets) — {host}; {seconds / 60:.1f} min", "=" * 100]
    for e in entries:
        sign = "≥" if e["at_least"] else "≤"
        fmt = ".2f" if e["unit"] == "x" else ",.0f"
        verdict = "met" if e["met"] else (f"MISSED by {(1 - e['ratio']) * 100:.0f}%" if e["at_least"]
                                          else f"MISSED by {(e['ratio'] - 1) * 100:.0f}%")
        rows.append(f"  {e['label']:<66} {e['value']:>12{fmt}} {e['unit']:<14} target {sign} "
                    f"{e['target']:{fmt}}  ratio {e['ratio']:.2f}x  {verdict}")
    for text in reduced:
        rows.append(f"  reduced size: {text}")
    for text in notes:
        rows.append(f"  note: {text}")
    for name in failures:
        rows.append(f"  {name}: FAILED to run (see its output above); its targets are not measured")
    rows.append("  (core figures use CPU time of a single-threaded process; see benchmarks/RESULTS.md)")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes everywhere (a smoke test, minutes)")
    parser.add_argument("--skip", nargs="*", default=[], choices=[p[0] for p in PLAN])
    parser.add_argument("--summary", type=Path, help="also write the summary to this file")
    args = parser.parse_args()
    started = time.perf_counter()
    host = machine()  # the load average at the start of the run
    failures: list[str] = []
    reduced: list[str] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="evsched-bench-") as tmp:
        results = Path(tmp) / "results.jsonl"
        results.touch()
        for name, full, quick, why in PLAN:
            if name in args.skip:
                continue
            if args.quick:
                reduced.append(f"{name}: --quick sizes ({' '.join(quick)})")
            elif why:
                reduced.append(f"{name}: {why}")
            code, _, _ = run_script(name, quick if args.quick else full, results)
            if code != 0:
                failures.append(name)
        recorded = [orjson.loads(line) for line in results.read_bytes().splitlines()]
    targets = [r for r in recorded if "target" in r]
    text = summary(targets, failures, reduced, notes, time.perf_counter() - started, host)
    for r in recorded:
        if "text" in r:
            text += f"\n  {r['label']}: {r['text']}"
    print(text)
    if args.summary:
        args.summary.write_text(text + "\n")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
