"""Scaling: per-allocation time against cluster size and against the pending backlog, plotted.

(i)  Nodes: the reference workload (50,000 asks, 500 apps, 50 leaves) on clusters of
     ``--sizes`` nodes; each run allocates until nothing fits. Target: µs/allocation at
     50,000 nodes ≤ 1.5× that at 5,000. The simple reference runs ``--baseline-steps``
     decisions at each size beside it (same inputs, same decisions checked).
(ii) Pending asks: 5,000 nodes with 50,000 vs 500,000 pending asks (500 apps both), each
     timed over its first ``--decisions`` allocations (all asks of the smaller case).
     Target: µs/allocation with 500,000 ≤ 1.5× with 50,000.

The plot (``--plot``, PNG) shows µs/allocation of the core and of the reference against
the number of nodes, log–log.

    python benchmarks/scaling.py [--sizes 1000,2000,5000,10000,20000,50000] [--repeat N]
                                 [--baseline-steps K] [--decisions N] [--plot FILE] [--skip nodes|asks]
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import harness  # noqa: F401  (puts the repository on sys.path)
from core import NOW_US, core_run, reference_run
from harness import engine_with, gc_setting, info, machine, report, timed

from scheduler.core.cycle import run_cycle
from scheduler.simulation.workload import REFERENCE, WorkloadSpec

NODE_RATIO_LIMIT = 1.5
ASK_RATIO_LIMIT = 1.5
DEFAULT_PLOT = Path(__file__).resolve().parent / "alloc_vs_cluster.png"


def per_allocation(spec: WorkloadSpec, repeat: int, steps: int, default_gc: bool
                   ) -> tuple[float, int, list[tuple[str, str, str]]]:
    """Best CPU µs/allocation over ``repeat`` full runs, the decisions, and the first ``steps`` of them."""
    best_us, decisions, head = float("inf"), 0, []
    for _ in range(repeat):
        n, cpu, wall, _, first = core_run(spec, None, steps, default_gc, None)
        us = cpu / n * 1e6
        print(f"   {spec.nodes:>7,} nodes: {n:,} decisions, {us:.1f} us/allocation cpu "
              f"({wall / n * 1e6:.1f} wall)", flush=True)
        if us < best_us:
            best_us, decisions, head = us, n, first
    return best_us, decisions, head


def node_scaling(args: argparse.Namespace) -> list[tuple[int, float, float | None]]:
    print(f"\n== per-allocation time against cluster size ({REFERENCE.asks:,} asks, {REFERENCE.apps} apps)", flush=True)
    points: list[tuple[int, float, float | None]] = []
    for nodes in args.sizes:
        spec = dataclasses.replace(REFERENCE, nodes=nodes)
        steps = args.baseline_steps if nodes <= 20_000 else max(1, args.baseline_steps // 2)
        core_us, _, head = per_allocation(spec, args.repeat, steps, args.default_gc)
        ref_us: float | None = None
        if steps:
            ref_step, ref_head = reference_run(spec, steps)
            ref_us = ref_step * 1e6
            same = ref_head == head
            print(f"   {nodes:>7,} nodes: reference {ref_us:,.0f} us/allocation over {steps} steps "
                  f"(core {ref_us / core_us:,.0f}x faster); decisions identical: {'yes' if same else 'NO'}",
                  flush=True)
            if not same:
                raise SystemExit("the reference and the core decided differently")
        points.append((nodes, core_us, ref_us))
    by_size = {n: us for n, us, _ in points}
    if 5_000 in by_size and 50_000 in by_size:
        ratio = by_size[50_000] / by_size[5_000]
        report("scaling.nodes", "per-allocation time, 50,000 vs 5,000 nodes", ratio, "x", NODE_RATIO_LIMIT,
               at_least=False, fmt=".2f",
               note=f"{by_size[5_000]:.1f} -> {by_size[50_000]:.1f} us/allocation")
        refs = {n: r for n, _, r in points if r is not None}
        if 5_000 in refs and 50_000 in refs:
            info("scaling.nodes.reference", "the simple reference, 50,000 vs 5,000 nodes",
                 f"{refs[50_000] / refs[5_000]:.1f}x ({refs[5_000]:,.0f} -> {refs[50_000]:,.0f} us/allocation; "
                 "it re-sorts and scans every node per step)", ratio=refs[50_000] / refs[5_000])
    return points


def ask_scaling(args: argparse.Namespace) -> None:
    print(f"\n== per-allocation time against pending asks ({REFERENCE.nodes:,} nodes, first {args.decisions:,} "
          "allocations)", flush=True)
    results = {}
    for asks in (REFERENCE.asks, 10 * REFERENCE.asks):
        spec = dataclasses.replace(REFERENCE, asks=asks)
        best = float("inf")
        for _ in range(args.repeat):
            engine = engine_with(spec)
            with gc_setting(args.default_gc), timed() as t:
                _, n = run_cycle(engine.state, NOW_US, args.decisions)
            us = t.cpu / n * 1e6
            print(f"   {asks:>7,} pending asks: {n:,} decisions, {us:.1f} us/allocation cpu "
                  f"({t.wall / n * 1e6:.1f} wall)", flush=True)
            best = min(best, us)
        results[asks] = best
    small, large = results[REFERENCE.asks], results[10 * REFERENCE.asks]
    report("scaling.asks", "per-allocation time, 500,000 vs 50,000 pending asks", large / small, "x",
           ASK_RATIO_LIMIT, at_least=False, fmt=".2f", note=f"{small:.1f} -> {large:.1f} us/allocation")


def plot(points: list[tuple[int, float, float | None]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    sizes = [n for n, _, _ in points]
    ax.plot(sizes, [c for _, c, _ in points], "o-", label="evsched core (indexed, cached)")
    refs = [(n, r) for n, _, r in points if r is not None]
    if refs:
        ax.plot([n for n, _ in refs], [r for _, r in refs], "s--", label="simple reference (re-sort, linear scan)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("nodes in the cluster")
    ax.set_ylabel("CPU time per allocation (µs)")
    ax.set_title(f"Allocation time vs cluster size ({REFERENCE.asks:,} pending asks, {REFERENCE.apps} apps)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    print(f"plot written to {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,2000,5000,10000,20000,50000",
                        type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--baseline-steps", type=int, default=10)
    parser.add_argument("--decisions", type=int, default=REFERENCE.asks)
    parser.add_argument("--plot", type=lambda s: Path(s) if s else None, default=DEFAULT_PLOT,
                        help="where the plot goes ('': no plot)")
    parser.add_argument("--skip", choices=("nodes", "asks"))
    parser.add_argument("--default-gc", action="store_true")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    if args.skip != "nodes":
        points = node_scaling(args)
        if args.plot:
            plot(points, args.plot)
    if args.skip != "asks":
        ask_scaling(args)


if __name__ == "__main__":
    main()
