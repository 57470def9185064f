"""Replay queries on a large service log: ``replay state --cycle N`` and ``replay explain ID`` (target < 2 s).

Builds an embedded log of ``--events`` input events (default 1,000,000) — a cluster, then
a stream of asks where every ask is released ``--window`` asks later, so the state stays
bounded while the log grows — and runs the real service over it (``evsched run --once
--batch B --snapshot-every K --snapshot-keep 0``), which writes a snapshot every K cycles.
Then times, each as a fresh ``evsched`` process (wall clock, interpreter start included):

- ``state`` of the last cycle (a snapshot holds it: nothing to re-derive);
- ``state`` of the cycle just before a snapshot near the end (the worst case: K-1 cycles
  re-derived after the previous snapshot);
- ``explain`` of the first decision after that snapshot (nothing before it to re-derive)
  and of the last decision of the worst-case cycle (K-2 cycles re-derived before it);

and where the worst ``explain`` spends its time (opening the log, finding the cycle,
restoring the snapshot, re-deriving the tail, explaining).

Every ``evsched`` process runs from a copy of the source taken at the start: a snapshot is
trusted only by the code that wrote it (its code digest), so edits to the working tree
during the (long) build would otherwise make every snapshot stale. A log kept with
``--log`` is reusable by later runs only while the code is unchanged.

    python benchmarks/replay_queries.py [--events 1000000] [--batch 5000] [--snapshot-every 2]
        [--window 10000] [--log DIR (reuse or keep the log)] [--full]

``--full`` also times ``state`` with ``--no-snapshots`` (a whole re-derivation: minutes).
``--verify`` also times ``replay verify`` of the whole log in one process from the first
cycle (``--jobs 1 --no-snapshots``) and over snapshot ranges in one worker per CPU (the
default), against issue #5's 50,000 inputs/s. Prints figures and their ratio to the
targets; asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import harness  # noqa: F401  (puts the repository on sys.path)
import orjson
from harness import ROOT, info, machine, report

from events.log.file import FileLog
from events.models import ADMIN_TYPES
from events.times import format_time
from scheduler.simulation.workload import PRIORITY_CLASSES, WorkloadSpec, config_yaml, leaf_paths

TARGET_S = 2.0
VERIFY_TARGET_PER_S = 50_000
GIB = 2**30
SHAPES = [(16_000, 64 * GIB), (32_000, 128 * GIB), (8_000, 32 * GIB)]


def churn(total: int, *, nodes: int, apps: int, window: int, seed: int = 5) -> Iterator[dict[str, Any]]:
    """``total`` input events: config, classes, nodes, apps, then asks, each released ``window`` asks later."""
    spec = WorkloadSpec(nodes=nodes, apps=apps, leaves=20, departments=4, seed=seed)
    rng = random.Random(seed)
    yield {"type": "config.updated", "data": {"yaml": config_yaml(spec)}}
    for name, value in PRIORITY_CLASSES:
        yield {"type": "priorityclass.upserted", "data": {"name": name, "value": value}}
    for n in range(nodes):
        vcore, memory = SHAPES[n % len(SHAPES)]
        yield {"type": "node.added",
               "data": {"node_id": f"node-{n:05d}", "capacity": {"vcore": vcore, "memory": memory, "pods": 110}}}
    leaves = leaf_paths(spec)
    for a in range(apps):
        yield {"type": "app.added",
               "data": {"app_id": f"app-{a:04d}", "queue": leaves[a % len(leaves)], "user": f"user{a % 7}"}}
    count, k = 1 + len(PRIORITY_CLASSES) + nodes + apps, 0
    while count < total:
        cls = PRIORITY_CLASSES[rng.randrange(len(PRIORITY_CLASSES))][0]
        resources = {"vcore": rng.choice((250, 500, 1000, 2000)), "memory": rng.choice((1, 2, 4)) * GIB}
        yield {"type": "ask.added", "data": {"app_id": f"app-{k % apps:04d}", "ask_id": f"ask-{k:07d}",
                                             "resources": resources, "priority_class": cls}}
        count += 1
        if k >= window and count < total:
            j = k - window
            yield {"type": "allocation.released", "data": {"app_id": f"app-{j % apps:04d}", "ask_id": f"ask-{j:07d}"}}
            count += 1
        k += 1


def write_inputs(log_dir: Path, total: int, window: int) -> None:
    """The churn as an embedded log: the rules (config, priority classes) on its admin channel,
    the only one the service accepts them from, the rest on its inputs."""
    with FileLog(log_dir) as log:
        batch: list[tuple[bytes | None, bytes]] = []
        for i, event in enumerate(churn(total, nodes=1_000, apps=200, window=window)):
            full = {"id": f"w-{i}", "source": "workload", "time": format_time(i * 1000), **event}
            if event["type"] in ADMIN_TYPES:
                log.append_admin_sync([(None, orjson.dumps(full))])
                continue
            batch.append((None, orjson.dumps(full)))
            if len(batch) >= 20_000:
                log.append_inputs_sync(batch)
                batch = []
        log.append_inputs_sync(batch)


PACKAGES = ("events", "projections", "scheduler", "replay")
SOURCE = {"dir": ROOT}  # where evsched runs from: set to a frozen copy in main()


def freeze_source(into: Path) -> Path:
    """A copy of the packages; ``python -m scheduler`` run there imports it, not the working tree."""
    for name in PACKAGES:
        shutil.copytree(ROOT / name, into / name, ignore=shutil.ignore_patterns("__pycache__"))
    return into


def children_cpu_s() -> float:
    """CPU seconds (user + system) of every finished child process so far, workers included."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def evsched(*args: str) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    """Run ``evsched ARGS`` (fails loudly); its wall seconds and the finished process."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "scheduler", *args], cwd=SOURCE["dir"], capture_output=True)
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"evsched {' '.join(args)} exited {done.returncode}:\n{done.stderr.decode()[-3000:]}")
    return elapsed, done


def cycles_and_decisions(log_dir: Path) -> tuple[int, dict[int, list[str]]]:
    """The last complete cycle, and the decision ids of every cycle."""
    last = 0
    ids: dict[int, list[str]] = {}
    with FileLog(log_dir, readonly=True) as log:
        for rec in log.iter_outputs():
            if b'"allocation.decided"' in rec.value:
                data = orjson.loads(rec.value)["data"]
                ids.setdefault(data["cycle"], []).append(data["decision_id"])
            elif b'"cycle.completed"' in rec.value:
                last = orjson.loads(rec.value)["data"]["cycle"]
    return last, ids


def snapshot_cycles(log_dir: Path) -> list[int]:
    return sorted(int(p.stem.removeprefix("snapshot-")) for p in (log_dir / "snapshots").glob("snapshot-*.json"))


BREAKDOWN = """
import sys, time, orjson
t0 = time.perf_counter()
from replay.explain.from_log import explain_from_log
from replay.find_cycle import find_cycle
from replay.reader import open_file_log
from replay.snapshot_start import pick_snapshot
from scheduler.storage.snapshot_files import SnapshotStore
phases = {"import the replay modules": time.perf_counter() - t0}
log_dir, decision_id = sys.argv[1], sys.argv[2]
number = int(decision_id.rsplit("-", 2)[1])
t0 = time.perf_counter()
with open_file_log(log_dir) as source:
    phases["open the log (index its segments)"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    find_cycle(source, number)
    phases["find the decision's cycle (bisection)"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    start = pick_snapshot(source, SnapshotStore(log_dir + "/snapshots"), number - 1).start
    phases["read, restore and check the snapshot"] = time.perf_counter() - t0
    assert start is not None, "no usable snapshot"
    held = start.engine.cycle_number
    t0 = time.perf_counter()
    explanation = explain_from_log(source, decision_id, start)
    phases[f"re-derive cycles {held + 1}..{number - 1} and explain"] = time.perf_counter() - t0
    assert explanation.verified, explanation.problems
print(orjson.dumps(phases).decode())
"""


def breakdown(log_dir: Path, decision_id: str) -> dict[str, float]:
    """Where one ``explain`` spends its time, phase by phase (in a process of its own)."""
    done = subprocess.run([sys.executable, "-c", BREAKDOWN, str(log_dir), decision_id], cwd=SOURCE["dir"],
                          capture_output=True)
    if done.returncode != 0:
        raise SystemExit(f"breakdown failed:\n{done.stderr.decode()[-3000:]}")
    phases: dict[str, float] = orjson.loads(done.stdout.splitlines()[-1])
    return phases


def verify_figures(log_dir: Path) -> None:
    """``replay verify`` of the whole log: one process from cycle 1, then the default (parallel)."""
    runs = [("sequential", ["--jobs", "1", "--no-snapshots"]), ("parallel", [])]
    for name, extra in runs:
        cpu0 = children_cpu_s()
        elapsed, done = evsched("replay", "verify", "--log", str(log_dir), "--json", *extra)
        cpu = children_cpu_s() - cpu0
        result = orjson.loads(done.stdout.strip().splitlines()[-1])
        if not result["ok"]:
            raise SystemExit(f"verify found a divergence on a clean log: {result}")
        rate = result["inputs"] / elapsed
        label = (f"replay verify {' '.join(extra) or '(defaults: a worker per CPU over snapshot ranges)'}: "
                 f"{result['inputs']:,} inputs, {result['cycles']} cycles")
        report(f"replay_queries.verify_{name}", label, rate, "inputs/s", VERIFY_TARGET_PER_S,
               note=f"{elapsed:.1f} s wall, {cpu:.1f} s CPU over all its processes, interpreter start included")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=5_000, help="the service's --batch (inputs per cycle)")
    parser.add_argument("--snapshot-every", type=int, default=2, help="the service's --snapshot-every")
    parser.add_argument("--window", type=int, default=10_000, help="asks live this many asks before release")
    parser.add_argument("--log", type=Path, help="use (or build and keep) the log here")
    parser.add_argument("--full", action="store_true", help="also time a whole re-derivation (--no-snapshots)")
    parser.add_argument("--verify", action="store_true", help="also time replay verify, sequential and parallel")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    work = Path(tempfile.mkdtemp(prefix="evsched-bench-replay-"))
    log_dir = args.log or work / "log"
    every = args.snapshot_every
    SOURCE["dir"] = freeze_source(work / "src")
    try:
        if not (log_dir / "outputs").is_dir():
            print(f"\n== building a log of {args.events:,} input events (churn: asks released {args.window:,} asks"
                  f" later), service --batch {args.batch:,} --snapshot-every {every}", flush=True)
            write_inputs(log_dir, args.events, args.window)
            run_s, _ = evsched("run", "--log", str(log_dir), "--once", "--batch", str(args.batch),
                               "--snapshot-every", str(every), "--snapshot-keep", "0")
            info("replay_queries.service_run", "the service run that wrote the log",
                 f"{args.events:,} inputs in {run_s:.1f} s = {args.events / run_s:,.0f} inputs/s", seconds=run_s)
        last, ids = cycles_and_decisions(log_dir)
        snaps = [c for c in snapshot_cycles(log_dir) if c < last]
        size = sum(p.stat().st_size for p in (log_dir / "snapshots").glob("*.json"))
        print(f"log: {last} cycles, {sum(map(len, ids.values())):,} decisions; {len(snaps) + 1} snapshots "
              f"({size / 2**20:,.0f} MiB)", flush=True)
        if len(snaps) < 2:
            raise SystemExit("need at least two snapshots before the last cycle (lower --snapshot-every)")
        base = snaps[-2]  # a snapshot near the end, with the next one `every` cycles later
        worst = base + every - 1  # the cycle just before the next snapshot
        queries = [
            ("state.last", f"replay state of the last cycle {last} (a snapshot holds it)", "state", str(last)),
            ("state.worst", f"replay state of cycle {worst} ({worst - base} cycles after snapshot {base})",
             "state", str(worst)),
        ]
        if base + 1 in ids:
            queries.append(("explain.best", f"replay explain {ids[base + 1][0]} (its cycle follows snapshot {base})",
                            "explain", ids[base + 1][0]))
        if worst in ids:
            queries.append(("explain.worst", f"replay explain {ids[worst][-1]} ({worst - 1 - base} cycles re-derived "
                            f"after snapshot {base}, then {len(ids[worst]) - 1:,} steps of its cycle)",
                            "explain", ids[worst][-1]))
        for key, label, command, arg in queries:
            argv = ["replay", command, "--cycle", arg] if command == "state" else ["replay", command, arg]
            elapsed, done = evsched(*argv, "--log", str(log_dir))
            if b"re-deriving from the first cycle" in done.stderr:
                raise SystemExit(f"{label}: no snapshot was used:\n{done.stderr.decode()}")
            report(f"replay_queries.{key}", label, elapsed, "s", TARGET_S, at_least=False, fmt=".2f",
                   note=f"{args.events:,}-event log, wall time incl. interpreter start")
        if worst in ids:
            phases = breakdown(log_dir, ids[worst][-1])
            text = "; ".join(f"{name} {seconds:.2f} s" for name, seconds in phases.items())
            info("replay_queries.breakdown", "where the worst explain spends its time", text,
                 **{f"phase{i}": s for i, s in enumerate(phases.values())})
        if args.verify:
            verify_figures(log_dir)
        if args.full:
            elapsed, _ = evsched("replay", "state", "--cycle", str(worst), "--log", str(log_dir), "--no-snapshots")
            info("replay_queries.full", f"replay state of cycle {worst} without snapshots",
                 f"{elapsed:.1f} s ({elapsed / TARGET_S:.1f}x the target)", seconds=elapsed)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the log too, unless --log put it elsewhere


if __name__ == "__main__":
    main()
