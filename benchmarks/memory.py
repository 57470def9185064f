"""Memory per pending ask (issue #7: ≤ 2 KiB per pending ask; 1,000,000 pending asks in 2 GiB).

The reference cluster (5,000 nodes, 500 apps, 50 leaves) with ``--asks`` pending asks
(default 1,000,000) is folded into the state one event at a time (generated, encoded,
decoded, applied; nothing else kept), without any allocation, so every ask stays pending.
Figures, from the kernel's accounting of this process:

- bytes per pending ask = (resident set after − resident set before the asks) / asks;
- the process's peak resident set (VmHWM), everything included, against 2 GiB.

    python benchmarks/memory.py [--asks 1000000]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
from pathlib import Path

import harness  # noqa: F401  (puts the repository on sys.path)
import orjson
from harness import info, machine, report, timed

from events.codec import decode_input
from events.models import InputEvent
from scheduler.config import load_config
from scheduler.core.engine import Engine
from scheduler.service.gc_thresholds import tuned_gc
from scheduler.simulation.workload import REFERENCE, config_yaml, events, numbered

PER_ASK_LIMIT = 2048
PROCESS_LIMIT = 2 * 2**30


def status_kib(field: str) -> int:
    """A ``VmRSS``/``VmHWM`` line of /proc/self/status, in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise SystemExit(f"/proc/self/status has no {field} (this benchmark needs Linux)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--asks", type=int, default=1_000_000)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    spec = dataclasses.replace(REFERENCE, asks=args.asks)
    print(f"\n== memory: {spec.asks:,} pending asks in {spec.apps} apps, {spec.nodes:,} nodes", flush=True)
    engine = Engine(load_config(config_yaml(spec)))
    stream = numbered(events(spec))
    asks = 0
    with tuned_gc(), timed() as t:
        for obj in stream:  # classes, nodes and apps come first: apply them, measure, then the asks
            if obj["type"] == "ask.added":
                break
            event = decode_input(orjson.dumps(obj), append_time_us=0)
            assert isinstance(event, InputEvent)
            engine.apply(event)
        gc.collect()
        before = status_kib("VmRSS")
        event = decode_input(orjson.dumps(obj), append_time_us=0)
        assert isinstance(event, InputEvent)
        engine.apply(event)
        asks = 1
        for obj in stream:
            event = decode_input(orjson.dumps(obj), append_time_us=0)
            assert isinstance(event, InputEvent)
            engine.apply(event)
            asks += 1
        gc.collect()
        after = status_kib("VmRSS")
    pending = sum(len(app.asks) for part in engine.state.partitions.values() for app in part.apps.values())
    assert pending == asks == spec.asks, (pending, asks)
    peak = status_kib("VmHWM") * 1024
    per_ask = (after - before) * 1024 / asks
    report("memory.per_ask", "memory per pending ask", per_ask, "bytes", PER_ASK_LIMIT, at_least=False,
           note=f"resident set {before / 1024:,.0f} -> {after / 1024:,.0f} MiB for {asks:,} asks")
    report("memory.process", f"process peak with {asks:,} pending asks", peak / 2**20, "MiB", PROCESS_LIMIT / 2**20,
           at_least=False, note="VmHWM, interpreter and cluster included")
    info("memory.load_rate", "loading them", f"{asks:,} asks generated, encoded, decoded and applied in "
         f"{t.cpu:.1f} s cpu ({t.wall:.1f} s wall)", seconds=t.cpu)


if __name__ == "__main__":
    main()
