"""Core allocation benchmark: allocations/s and peak memory on the issue's reference workload.

Default: 5,000 nodes, 50,000 pending asks in 500 apps over 50 leaf queues in a 3-level tree
with fences and offsets, fifo and fair leaves, mixed priority classes. Inputs are applied
first (timed separately: the apply rate); then one cycle allocates until nothing fits.

    python benchmarks/core.py [--nodes N] [--asks N] [--apps N] [--leaves N] [--policy fair|binpacking]
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from events.codec import decode_input_object
from events.models import InputEvent
from scheduler.config import load_config
from scheduler.core.engine import Engine
from scheduler.workload import WorkloadSpec, config_yaml, events, numbered

TARGET_ALLOC_PER_S = {"fair": 10_000, "binpacking": 5_000}
TARGET_APPLY_PER_S = 100_000


def build(spec: WorkloadSpec) -> tuple[Engine, list[InputEvent]]:
    engine = Engine(load_config(config_yaml(spec)))
    decoded = []
    for obj in numbered(events(spec)):
        evt = decode_input_object(obj, append_time_us=0)
        assert isinstance(evt, InputEvent), evt
        decoded.append(evt)
    return engine, decoded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5_000)
    parser.add_argument("--asks", type=int, default=50_000)
    parser.add_argument("--apps", type=int, default=500)
    parser.add_argument("--leaves", type=int, default=50)
    parser.add_argument("--policy", choices=("fair", "binpacking"), default="fair")
    parser.add_argument("--memory", action="store_true", help="also measure peak memory (slower)")
    args = parser.parse_args()
    spec = WorkloadSpec(nodes=args.nodes, apps=args.apps, asks=args.asks, leaves=args.leaves,
                        departments=5, node_policy=args.policy)
    engine, decoded = build(spec)

    if args.memory:
        tracemalloc.start()
    t0 = time.perf_counter()
    for evt in decoded:
        engine.apply(evt)
    apply_s = time.perf_counter() - t0
    if args.memory:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    t0 = time.perf_counter()
    outputs = engine.cycle(10**12, {"inputs": len(decoded)})
    cycle_s = time.perf_counter() - t0
    decisions = sum(1 for o in outputs if o.type == "allocation.decided")
    rate = decisions / cycle_s
    target = TARGET_ALLOC_PER_S[args.policy]
    print(f"workload: {args.nodes} nodes, {args.asks} asks, {args.apps} apps, {args.leaves} leaves, {args.policy}")
    print(f"apply:    {len(decoded)} events in {apply_s:.3f} s = {len(decoded) / apply_s:,.0f} events/s"
          f" (target {TARGET_APPLY_PER_S:,}: {len(decoded) / apply_s / TARGET_APPLY_PER_S:.2f}x)")
    print(f"allocate: {decisions} decisions in {cycle_s:.3f} s = {rate:,.0f} allocations/s"
          f" (target {target:,}: {rate / target:.2f}x); {cycle_s / max(decisions, 1) * 1e6:.1f} us/allocation")
    if args.memory:
        per_ask = peak / max(args.asks, 1)
        print(f"memory:   peak {peak / 2**20:.1f} MiB while applying = {per_ask:,.0f} B per pending ask"
              " (target <= 2048 B)")


if __name__ == "__main__":
    main()
