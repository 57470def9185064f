"""Replay verify rate on a generated service log (issue #7: ≥ 50,000 input events/s).

A workload of ``--events`` input events (asks ≈ 90%, nodes and apps the rest) is submitted
to an embedded log and run by the service (``evsched run --once --batch B``), which writes
its cycles and snapshots. Then ``evsched replay verify`` re-derives the whole log:

- as users run it (the figure for the target): default options, i.e. worker processes
  over snapshot ranges, one per CPU;
- with ``--jobs 1`` (one process, from snapshots where they help) and with
  ``--jobs 1 --no-snapshots`` (one process re-deriving every cycle from the first).

Each is a fresh ``evsched`` process timed by wall clock, interpreter start included.

The service run has the shape of a real long log: fixed batches (``--max-batch`` equal to
``--batch``, so the log has one cycle per batch, ~187 for 200,000 events) and a snapshot
every ``--snapshots``-th of the cycles, all kept. The service's defaults (batches doubling
to 4 × ``--batch`` under the backlog, a snapshot every 100 cycles, 2 kept) gave 48 cycles and
one snapshot, at the log's end: verify then planned a single range and the second worker
idled, which measures the benchmark's shape rather than verify.

    python benchmarks/verify.py [--events 100000] [--batch 1000] [--snapshots 8] [--repeat N]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness  # noqa: F401  (puts the repository on sys.path)
import orjson
from harness import ROOT, compile_bytecode, info, log_decisions, machine, report, write_workload_jsonl

from scheduler.simulation.workload import WorkloadSpec

TARGET_PER_S = 50_000


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def evsched(*args: str) -> tuple[float, str, float]:
    """Run ``evsched ARGS`` (fails loudly); its wall seconds, stdout, and CPU seconds (workers included)."""
    t0, cpu0 = time.perf_counter(), children_cpu()
    done = subprocess.run([sys.executable, "-m", "scheduler", *args], cwd=ROOT, capture_output=True, text=True)
    elapsed, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    if done.returncode != 0:
        raise SystemExit(f"evsched {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return elapsed, done.stdout, cpu


def verify_rate(log: Path, extra: list[str], repeat: int) -> tuple[float, int, int, float]:
    """Best wall inputs/s of ``replay verify`` over ``repeat`` runs, the inputs and cycles it checked,
    and the best inputs per CPU second (all its processes)."""
    best, inputs, cycles, best_cpu = 0.0, 0, 0, 0.0
    for _ in range(repeat):
        elapsed, out, cpu = evsched("replay", "verify", "--log", str(log), "--json", *extra)
        result = orjson.loads(out.strip().splitlines()[-1])
        if not result["ok"]:
            raise SystemExit(f"verify found a divergence on a clean log: {result}")
        inputs, cycles = result["inputs"], result["cycles"]
        rate = inputs / elapsed
        print(f"   verify {' '.join(extra) or '(defaults)'}: {cycles} cycles, {inputs:,} inputs in "
              f"{elapsed:.2f} s = {rate:,.0f} inputs/s ({cpu:.2f} s cpu: {inputs / cpu:,.0f} inputs per cpu second)",
              flush=True)
        best, best_cpu = max(best, rate), max(best_cpu, inputs / cpu)
    return best, inputs, cycles, best_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1_000, help="the service's --batch (inputs per cycle)")
    parser.add_argument("--snapshots", type=int, default=8,
                        help="snapshots the service run writes over the log (a few per verify worker)")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    compile_bytecode()  # the timed processes start as an installed evsched does
    spec = WorkloadSpec(nodes=max(100, args.events // 30), apps=200, asks=int(args.events * 0.9), leaves=20,
                        departments=4)
    work = Path(tempfile.mkdtemp(prefix="evsched-bench-verify-"))
    try:
        count = write_workload_jsonl(spec, work / "in.jsonl")
        log = work / "log"
        print(f"\n== replay verify: a service log of {count:,} input events ({spec.asks:,} asks, "
              f"{spec.nodes:,} nodes, {spec.apps} apps), batches of {args.batch:,}", flush=True)
        evsched("submit", "--admin", "--log", str(log), str(work / "in.jsonl"))  # carries the config
        cycles = -(-(count - 1) // args.batch)  # fixed batches: one cycle per batch of inputs
        every = max(1, cycles // (args.snapshots + 1))
        print(f"   service: --batch {args.batch:,} --max-batch {args.batch:,} (~{cycles} cycles), "
              f"--snapshot-every {every} --snapshot-keep 0", flush=True)
        run_s, _, run_cpu = evsched("run", "--log", str(log), "--once", "--batch", str(args.batch),
                                    "--max-batch", str(args.batch), "--snapshot-every", str(every),
                                    "--snapshot-keep", "0")
        info("verify.service_run", "the service run that wrote the log",
             f"{count:,} inputs in {run_s:.1f} s = {count / run_s:,.0f} inputs/s, "
             f"{count / run_cpu:,.0f} per cpu second (embedded log, fsync per cycle, interpreter start "
             "included)", rate=count / run_s)
        print(f"   the log holds {log_decisions(log):,} decisions", flush=True)
        default, inputs, cycles, default_cpu = verify_rate(log, [], args.repeat)
        one, _, _, one_cpu = verify_rate(log, ["--jobs", "1"], args.repeat)
        sequential, _, _, sequential_cpu = verify_rate(log, ["--jobs", "1", "--no-snapshots"], 1)
        report("verify", "replay verify (defaults: a worker per CPU over snapshot ranges)", default, "inputs/s",
               TARGET_PER_S, note=f"{inputs:,} inputs, {cycles} cycles, wall time incl. interpreter start; "
               f"{default_cpu:,.0f} inputs per cpu second")
        info("verify.single", "replay verify in one process",
             f"--jobs 1: {one:,.0f} inputs/s ({one_cpu:,.0f} per cpu second); --jobs 1 --no-snapshots: "
             f"{sequential:,.0f} inputs/s ({sequential_cpu:,.0f} per cpu second)", jobs1=one, sequential=sequential,
             jobs1_cpu=one_cpu, sequential_cpu=sequential_cpu)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
