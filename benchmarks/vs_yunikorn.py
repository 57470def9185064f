"""evsched's core and apache/yunikorn-core v1.5.2 side by side: allocations/s on the same workloads.

Workloads (every input applied first, then the scheduling alone is timed until nothing
more fits; the same JSONL goes to both sides):

* ``yk-N``: YuniKorn's ``BenchmarkScheduling`` (pkg/scheduler/tests/performance_test.go):
  N nodes (500, 1,000, 2,000, 5,000) × 10,000 pods of {memory 10, vcore 1} in two apps
  (root.a, root.b with its guarantees), nodes sized ``pods/N + 1`` pods each. YuniKorn's
  test sends one ask with 5,000 repeats per app; evsched has no repeats, so both sides get
  10,000 asks of one allocation each.
* ``reference``: evsched's reference workload (``scheduler.workload.REFERENCE``: 5,000
  nodes, 50,000 asks in 500 apps over 50 leaves, priority classes, fences and offsets).

evsched: ``run_cycle`` over the engine's state (the digest after a cycle is left out, as
in benchmarks/core.py); yunikorn-core: the Go harness's ``-bench`` mode, one
``ClusterContext.schedule()`` step per allocation in a loop, no sleeps, no RM round trips
beyond the synchronous callback. Both are single-threaded scheduling loops on the same
machine in the same run; wall and CPU seconds are both printed (CPU is the steadier figure
on a loaded machine; Go's includes its GC and background goroutines).

YuniKorn's own benchmark cannot be run unchanged at v1.5.2: both apps ask under the key
``alloc-1`` and v1.5.2 names allocations ``<key>-<n>``, so the test's mock RM, which counts
allocations in a map by that name, never sees more than 5,000 of the 10,000 and waits
out its 300 s timeout.

    python benchmarks/vs_yunikorn.py --harness BIN [--only yk-500,reference]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import harness as _harness  # noqa: F401  (puts the repository on sys.path)
import orjson
from harness import machine

from events.codec import decode_input
from events.models import InputRejected
from scheduler.config import load_config
from scheduler.core.cycle import run_cycle
from scheduler.core.engine import Engine
from scheduler.simulation.workload import REFERENCE, config_yaml, records

ROOT = Path(__file__).resolve().parents[1]
YK_CONFIG = """partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
            resources:
              guaranteed:
                memory: 100000
                vcore: 10000
          - name: b
            resources:
              guaranteed:
                memory: 1000000
                vcore: 10000
"""
NOW_US = 10**12


def yk_lines(nodes: int, pods: int) -> list[bytes]:
    """BenchmarkScheduling's inputs as evsched JSONL lines (config first, one ask per pod)."""
    per_node = pods // nodes + 1
    out: list[dict[str, Any]] = [{"type": "config.updated", "data": {"yaml": YK_CONFIG}}]
    out += [{"type": "app.added", "data": {"app_id": app, "queue": q, "user": "testuser"}}
            for app, q in (("app-1", "root.a"), ("app-2", "root.b"))]
    out += [{"type": "node.added", "data": {"node_id": f"node-{i}:1234",
                                            "capacity": {"memory": 10 * per_node, "vcore": per_node}}}
            for i in range(nodes)]
    half = pods // 2
    for app, count in (("app-1", half), ("app-2", pods - half)):
        out += [{"type": "ask.added", "data": {"app_id": app, "ask_id": f"alloc-{k}",
                                               "resources": {"memory": 10, "vcore": 1}}}
                for k in range(count)]
    return [orjson.dumps(o) for o in out]


def reference_lines() -> list[bytes]:
    spec = REFERENCE
    head = orjson.dumps({"type": "config.updated", "data": {"yaml": config_yaml(spec)}})
    return [head, *records(spec)]


def evsched_run(lines: list[bytes]) -> tuple[int, float, float]:
    """(allocations, wall s, cpu s) of evsched's core over the applied lines."""
    first = orjson.loads(lines[0])
    engine = Engine(load_config(first["data"]["yaml"].encode()))
    for i, raw in enumerate(lines[1:]):
        obj = orjson.loads(raw)
        obj.setdefault("id", f"b-{i}")
        obj.setdefault("source", "bench")
        obj.setdefault("time", "1970-01-01T00:00:00Z")
        event = decode_input(orjson.dumps(obj), append_time_us=0, position=f"inputs@{i}")
        if isinstance(event, InputRejected):
            raise SystemExit(f"workload input {i} rejected: {event}")
        engine.apply(event)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    _, decisions = run_cycle(engine.state, NOW_US, None)
    return decisions, time.perf_counter() - wall0, time.process_time() - cpu0


def yunikorn_run(binary: Path, lines: list[bytes]) -> tuple[int, float, float]:
    """(allocations, wall s, cpu s) of yunikorn-core's scheduling loop over the same lines."""
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as fh:
        fh.write(b"\n".join(lines) + b"\n")
        fh.flush()
        proc = subprocess.run([str(binary), "-bench", fh.name], capture_output=True, check=True)
    result = json.loads(proc.stdout)
    return int(result["allocations"]), float(result["seconds"]), float(result["cpu_seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--harness", type=Path, required=True, help="the Go harness (make conformance-harness)")
    parser.add_argument("--only", help="comma-separated workloads (yk-500,yk-1000,yk-2000,yk-5000,reference)")
    args = parser.parse_args()
    workloads: dict[str, Callable[[], list[bytes]]] = {
        f"yk-{n}": functools.partial(yk_lines, n, 10_000) for n in (500, 1000, 2000, 5000)}
    workloads["reference"] = reference_lines
    names = args.only.split(",") if args.only else list(workloads)
    print(f"machine: {machine()}")
    print(f"load before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    print(f"{'workload':<10} {'allocs':>8} | {'evsched wall/s':>14} {'cpu/s':>8} | "
          f"{'yunikorn wall/s':>15} {'cpu/s':>8} | {'ratio wall':>10} {'cpu':>6}")
    for name in names:
        lines = workloads[name]()
        n_ev, wall_ev, cpu_ev = evsched_run(lines)
        n_yk, wall_yk, cpu_yk = yunikorn_run(args.harness, lines)
        same = "" if n_ev == n_yk else f"  (allocations differ: evsched {n_ev}, yunikorn {n_yk})"
        print(f"{name:<10} {n_ev:>8,} | {n_ev / wall_ev:>14,.0f} {n_ev / cpu_ev:>8,.0f} | {n_yk / wall_yk:>15,.0f} "
              f"{n_yk / cpu_yk:>8,.0f} | {(n_ev / wall_ev) / (n_yk / wall_yk):>9.2f}x "
              f"{(n_ev / cpu_ev) / (n_yk / cpu_yk):>5.2f}x{same}", flush=True)
    print(f"load after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")


if __name__ == "__main__":
    main()
