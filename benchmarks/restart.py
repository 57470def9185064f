"""Service benchmark on the embedded log: run --once over N input events, SIGKILL mid-run,
recover, and time a restart with and without snapshots.

    python benchmarks/restart.py [--events 100000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import ROOT, log_decisions, write_workload_jsonl  # puts the repository on sys.path

from scheduler.simulation.workload import WorkloadSpec


def evsched(*args: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "scheduler", *args], cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args()
    asks = int(args.events * 0.9)
    spec = WorkloadSpec(nodes=max(100, args.events // 30), apps=200, asks=asks, leaves=20, departments=4)
    work = Path(tempfile.mkdtemp(prefix="evsched-bench-"))
    try:
        count = write_workload_jsonl(spec, work / "in.jsonl")
        log = work / "log"
        evsched("submit", "--admin", "--log", str(log), str(work / "in.jsonl"))  # carries the config
        print(f"input log: {count} events")

        proc = subprocess.Popen([sys.executable, "-m", "scheduler", "run", "--log", str(log), "--once",
                                 "--batch", "1000", "--snapshot-every", "20"], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(3.0)
        killed = proc.poll() is None
        if killed:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        print(f"SIGKILL after 3.0 s: {'landed mid-run' if killed else 'run had already finished'}")
        finish = evsched("run", "--log", str(log), "--once", "--batch", "1000", "--snapshot-every", "20")
        print(f"recover + finish the run: {finish:.2f} s; {log_decisions(log):,} decisions in the log")
        with_snapshot = evsched("run", "--log", str(log), "--once")
        print(f"restart with a snapshot (nothing left to do): {with_snapshot:.2f} s (target < 2 s)")
        shutil.rmtree(log / "snapshots")
        without = evsched("run", "--log", str(log), "--once", "--snapshot-dir", str(work / "none"))
        print(f"restart re-deriving the whole log (no snapshot): {without:.2f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
