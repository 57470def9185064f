"""The HTTP surface's cost: the cycle rate of ``run --once`` with ``--http`` and a client scraping
``/metrics`` every second, against the same run without ``--http`` (target: within 5%).

    python benchmarks/http_overhead.py [--asks 30000] [--runs 3]

Each run re-decides the same pre-submitted log from scratch (a fresh copy, no snapshot);
the figure is the service's own "decisions in T s" line, best of ``--runs`` alternated runs.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from harness import ROOT, write_workload_jsonl  # puts the repository on sys.path

from scheduler.simulation.workload import WorkloadSpec

STOPPED = re.compile(rb"stopped after cycle \d+: (\d+) events, (\d+) decisions in ([0-9.]+) s")
URL_LINE = re.compile(rb"serving HTTP on (http://\S+)")


def _scrape_every_second(log_path: Path, proc: subprocess.Popen[bytes], scrapes: list[int]) -> None:
    url = None
    while proc.poll() is None and url is None:
        found = URL_LINE.search(log_path.read_bytes())
        url = found.group(1).decode() if found else None
        time.sleep(0.01)
    while url is not None and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
                response.read()
            scrapes[0] += 1
        except OSError:
            pass  # the service stopped between the check and the request
        time.sleep(1.0)


def one_run(master: Path, work: Path, http: bool) -> tuple[float, int, int]:
    """Decisions/s of one ``run --once`` over a fresh copy of the log; and the scrapes made."""
    log, snapshots = work / "log", work / "snapshots"
    shutil.rmtree(log, ignore_errors=True)
    shutil.rmtree(snapshots, ignore_errors=True)  # the last run's stop wrote one; this log copy is not its
    shutil.copytree(master, log)
    log_path = work / "service.log"
    args = [sys.executable, "-m", "scheduler", "run", "--log", str(log), "--once", "--snapshot-dir", str(snapshots)]
    if http:
        args += ["--http", "127.0.0.1:0"]
    scrapes = [0]
    with open(log_path, "wb") as err:
        proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
    poller = threading.Thread(target=_scrape_every_second, args=(log_path, proc, scrapes), daemon=True)
    if http:
        poller.start()
    proc.wait()
    if http:
        poller.join()
    found = STOPPED.search(log_path.read_bytes())
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"run failed ({proc.returncode}): {log_path.read_text()[-2000:]}")
    decisions, seconds = int(found.group(2)), float(found.group(3))
    if seconds <= 0:  # the service prints tenths of a second
        raise SystemExit(f"a run too short to time ({decisions} decisions in {found.group(3).decode()} s): "
                         "use more --asks")
    return decisions / seconds, decisions, scrapes[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--asks", type=int, default=30_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    spec = WorkloadSpec(nodes=max(300, args.asks // 10), apps=300, asks=args.asks, leaves=30, departments=5)
    work = Path(tempfile.mkdtemp(prefix="evsched-http-bench-"))
    try:
        write_workload_jsonl(spec, work / "in.jsonl")
        master = work / "master"
        subprocess.run([sys.executable, "-m", "scheduler", "submit", "--admin", "--log", str(master),
                        str(work / "in.jsonl")],
                       cwd=ROOT, check=True, capture_output=True)
        best: dict[bool, float] = {False: 0.0, True: 0.0}
        scraped = 0
        for _ in range(args.runs):
            for http in (False, True):
                rate, decisions, scrapes = one_run(master, work, http)
                best[http] = max(best[http], rate)
                scraped += scrapes
                print(f"  {'--http + /metrics every 1 s' if http else 'no --http':28} {rate:10,.0f} decisions/s "
                      f"({decisions} decisions, {scrapes} scrapes)", flush=True)
        ratio = best[True] / best[False]
        print(f"best without --http: {best[False]:,.0f}/s; with --http and scraping: {best[True]:,.0f}/s "
              f"({ratio:.3f}x; target >= 0.95x); {scraped} scrapes; load average {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
