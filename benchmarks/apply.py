"""Apply rate: input events folded into the state, no allocation (issue #7: ≥ 100,000/s).

The reference workload's 55,504 events (4 priority classes, 5,000 nodes, 500 apps,
50,000 asks) are applied to a fresh engine:

- apply (the target's figure): decoded events → ``Engine.apply`` (dedup, fold, caches);
- ingest: the record bytes → ``Engine.ingest`` (decode + validate + apply), what the
  service and replay pay per record; printed with its ratio to the same target;
- decode only, with the fast path and through pydantic alone (the path before it).

    python benchmarks/apply.py [--repeat N] [--default-gc] [--profile FILE]
"""

from __future__ import annotations

import argparse
import gc

import harness  # noqa: F401  (puts the repository on sys.path)
import orjson
from harness import gc_setting, info, machine, profiled, report, timed

from events.codec import decode_input, decode_input_object
from events.models import InputEvent
from scheduler.config import load_config
from scheduler.core.engine import Engine
from scheduler.simulation.workload import REFERENCE, config_yaml, records

TARGET_PER_S = 100_000


def best_rate(label: str, count: int, runs: list[tuple[float, float]]) -> float:
    """Print each run; return the best CPU rate."""
    for i, (cpu, wall) in enumerate(runs):
        print(f"   {label} run {i + 1}: {count / cpu:,.0f}/s cpu ({count / wall:,.0f}/s wall)", flush=True)
    return max(count / cpu for cpu, _ in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--default-gc", action="store_true", help="CPython's GC thresholds (the 'before' figure)")
    parser.add_argument("--profile", metavar="FILE", help="pyinstrument text profile of one ingest run")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    spec = REFERENCE
    raws = records(spec)
    yaml = config_yaml(spec)
    n = len(raws)
    print(f"\n== apply: {n:,} input events ({spec.nodes:,} nodes, {spec.apps} apps, {spec.asks:,} asks)", flush=True)

    decode_runs, pydantic_runs, apply_runs, ingest_runs = [], [], [], []
    for _ in range(args.repeat):
        with gc_setting(args.default_gc):
            gc.collect()  # each timed phase starts from a settled heap (see harness.engine_with)
            with timed() as t:
                events = [decode_input(raw, append_time_us=0) for raw in raws]
            decode_runs.append((t.cpu, t.wall))
            gc.collect()
            with timed() as t:  # results kept, as above: holding them costs GC time too
                slow = [decode_input_object(orjson.loads(raw), append_time_us=0) for raw in raws]
            pydantic_runs.append((t.cpu, t.wall))
            assert slow == events, "the fast path and pydantic disagree"
            del slow
            engine = Engine(load_config(yaml))
            gc.collect()
            with timed() as t:
                for event in events:
                    assert isinstance(event, InputEvent)
                    engine.apply(event)
            apply_runs.append((t.cpu, t.wall))
            assert not engine.pending_outputs or all(o.__class__.__name__ != "InputRejected"
                                                     for o in engine.pending_outputs)
            del events, engine
            engine = Engine(load_config(yaml))
            gc.collect()
            with timed() as t:
                for i, raw in enumerate(raws):
                    engine.ingest(raw, append_time_us=0, position=f"inputs@{i}")
            ingest_runs.append((t.cpu, t.wall))
            del engine
    if args.profile:
        engine = Engine(load_config(yaml))
        with gc_setting(args.default_gc), profiled(args.profile):
            for i, raw in enumerate(raws):
                engine.ingest(raw, append_time_us=0, position=f"inputs@{i}")

    decode = best_rate("decode (fast path)", n, decode_runs)
    pydantic = best_rate("decode (pydantic only)", n, pydantic_runs)
    apply = best_rate("apply", n, apply_runs)
    ingest = best_rate("ingest (decode + apply)", n, ingest_runs)
    gc_note = "CPython default GC" if args.default_gc else "service GC setting"
    report("apply", "apply: decoded input events folded into the state", apply, "events/s", TARGET_PER_S,
           note=f"best of {args.repeat}, cpu time, {gc_note}")
    info("apply.ingest", "ingest: record bytes decoded, validated and applied",
         f"{ingest:,.0f} events/s ({ingest / TARGET_PER_S:.2f}x of the {TARGET_PER_S:,}/s apply target)",
         rate=ingest, ratio=ingest / TARGET_PER_S)
    info("apply.decode", "decode only",
         f"{decode:,.0f} events/s with the fast path, {pydantic:,.0f} events/s through pydantic alone "
         f"({decode / pydantic:.1f}x)", fast=decode, pydantic=pydantic)


if __name__ == "__main__":
    main()
