"""Core allocation rate on issue #7's reference workload, with the simple reference side by side.

Workload (``scheduler.simulation.workload.REFERENCE``): 5,000 nodes, 50,000 pending asks in 500 apps
over 50 leaf queues in a 3-level tree (5 departments, one fenced, offsets elsewhere; fifo
and fair leaves), 4 priority classes. All inputs are applied first; then cycles allocate
until nothing fits (the first ``--baseline-steps`` decisions in a cycle of their own, so
the same steps can be compared with the reference); allocations/s = decisions / time in
``run_cycle`` (the per-cycle state digest is not an allocation cost and is left out).

The reference (``benchmarks/baseline.py``) then makes the same first decisions from the
same inputs, re-deriving everything per step; both per-allocation times are printed with
their ratio, and the decisions are checked to be identical.

With ``--constraints`` every ask carries empty node constraints (``constraints: {}``, what the
Kubernetes shim sends for a pod with no node selector, affinity, tolerations or host ports, and
no node is tainted): every node passes, so the decisions are the same, made by the constrained
ask's search (``scheduler.core.constrained_nodes``) — its cost against the plain path.

With ``--user-limit V`` every user of the workload (user0 … user6) gets a partition-level
``limits`` entry of V vcores (YuniKorn ugm), so each allocation also checks and charges the
user's usage at every queue of its path; the reference comparison is skipped then.

    python benchmarks/core.py [--policy fair|binpacking|both] [--repeat N] [--baseline-steps K]
                              [--nodes N] [--asks N] [--apps N] [--leaves N] [--default-gc] [--profile FILE]
                              [--user-limit VCORES] [--constraints]
"""

from __future__ import annotations

import argparse
import dataclasses

import harness  # noqa: F401  (puts the repository on sys.path)
from baseline import ReferenceScheduler
from harness import decoded, engine_with, gc_setting, info, machine, profiled, report, timed

from events.models import AllocationDecided, AskAdded, Constraints, InputEvent
from scheduler.core.cycle import run_cycle
from scheduler.simulation.workload import REFERENCE, WorkloadSpec, config_yaml, events, numbered

TARGET_ALLOC_PER_S = {"fair": 10_000, "binpacking": 5_000}
NOW_US = 10**12


def with_user_limits(config: str, vcores: int, users: int = 7) -> str:
    """The config with a partition-level limit of ``vcores`` for each workload user."""
    entries = [f"      - {{limit: user{u}, users: [user{u}], maxresources: {{vcore: {vcores}}}}}" for u in range(users)]
    head = "  - name: default\n"
    return config.replace(head, head + "    limits:\n" + "\n".join(entries) + "\n", 1)


def with_empty_constraints(evts: list[InputEvent]) -> list[InputEvent]:
    """Every ``ask.added`` with ``constraints: {}`` (decided by the constrained search; no node is tainted)."""
    empty = Constraints()
    return [e.model_copy(update={"data": e.data.model_copy(update={"constraints": empty})})
            if isinstance(e.data, AskAdded) else e for e in evts]


def core_run(spec: WorkloadSpec, evts: list[InputEvent] | None, steps: int, default_gc: bool, profile: str | None,
             config: str | None = None) -> tuple[int, float, float, float, list[tuple[str, str, str]]]:
    """One measured run: (decisions, cpu s, wall s, cpu s of the first ``steps``, those decisions)."""
    engine = engine_with(spec, evts, config)
    with gc_setting(default_gc), profiled(profile):
        with timed() as first:
            out, n_first = run_cycle(engine.state, NOW_US, steps)
        with timed() as rest:
            _, n_rest = run_cycle(engine.state, NOW_US, None)
    head = [(o.app_id, o.ask_id, o.node_id) for o in out if isinstance(o, AllocationDecided)]
    return n_first + n_rest, first.cpu + rest.cpu, first.wall + rest.wall, first.cpu / max(n_first, 1), head


def reference_run(spec: WorkloadSpec, steps: int) -> tuple[float, list[tuple[str, str, str]]]:
    """CPU seconds per step of the reference over its first ``steps`` decisions, and those decisions."""
    ref = ReferenceScheduler(config_yaml(spec), NOW_US)
    for event in numbered(events(spec)):
        ref.apply(event)
    with timed() as t:
        decisions = ref.run(steps)
    return t.cpu / max(len(decisions), 1), decisions


def bench_policy(spec: WorkloadSpec, args: argparse.Namespace) -> None:
    policy = spec.node_policy
    print(f"\n== core allocation, {policy} nodes: {spec.nodes:,} nodes, {spec.asks:,} asks, {spec.apps:,} apps, "
          f"{spec.leaves} leaves in {spec.departments} departments", flush=True)
    evts = decoded(spec)
    if args.constraints:
        evts = with_empty_constraints(evts)
    config = with_user_limits(config_yaml(spec), args.user_limit) if args.user_limit else None
    label = f"core.{policy}" + (".user_limit" if config else "") + (".constraints" if args.constraints else "")
    best: tuple[int, float, float, float, list[tuple[str, str, str]]] | None = None
    for i in range(args.repeat):
        run = core_run(spec, evts, args.baseline_steps, args.default_gc, args.profile if i == 0 else None, config)
        print(f"   run {i + 1}: {run[0]:,} decisions in {run[1]:.3f} s cpu ({run[2]:.3f} s wall) = "
              f"{run[0] / run[1]:,.0f}/s cpu, {run[0] / run[2]:,.0f}/s wall", flush=True)
        if best is None or run[1] < best[1]:
            best = run
    assert best is not None
    decisions, cpu, wall, core_step, head = best
    what = f"core allocation rate, {policy} nodes" + (f", {args.user_limit} vcores per user" if config else "") \
        + (", every ask with empty node constraints" if args.constraints else "")
    report(label, what, decisions / cpu, "allocations/s",
           TARGET_ALLOC_PER_S[policy],
           note=f"best of {args.repeat}; {cpu / decisions * 1e6:.1f} us/allocation; wall {decisions / wall:,.0f}/s")
    if args.baseline_steps and not config:
        ref_step, ref_head = reference_run(spec, args.baseline_steps)
        same = ref_head == head
        info(f"core.{policy}.vs_reference", f"vs the simple reference, {policy} nodes",
             f"first {len(head)} decisions: core {core_step * 1e6:,.1f} us/allocation, reference "
             f"{ref_step * 1e6:,.0f} us/allocation = core {ref_step / core_step:,.0f}x faster; "
             f"decisions identical: {'yes' if same else 'NO'}",
             core_us=core_step * 1e6, reference_us=ref_step * 1e6, speedup=ref_step / core_step, identical=same)
        if not same:
            raise SystemExit("the reference and the core decided differently: see tests/unit/test_bench_baseline.py")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", choices=("fair", "binpacking", "both"), default="both")
    parser.add_argument("--nodes", type=int, default=REFERENCE.nodes)
    parser.add_argument("--asks", type=int, default=REFERENCE.asks)
    parser.add_argument("--apps", type=int, default=REFERENCE.apps)
    parser.add_argument("--leaves", type=int, default=REFERENCE.leaves)
    parser.add_argument("--repeat", type=int, default=3, help="runs per policy; the best is reported")
    parser.add_argument("--baseline-steps", type=int, default=20,
                        help="decisions compared with the reference (0: skip it)")
    parser.add_argument("--default-gc", action="store_true", help="CPython's GC thresholds (the 'before' figure)")
    parser.add_argument("--profile", metavar="FILE", help="pyinstrument text profile of the first run")
    parser.add_argument("--user-limit", type=int, default=0, metavar="VCORES",
                        help="a limits entry of this many vcores for each workload user (0: no limits)")
    parser.add_argument("--constraints", action="store_true",
                        help="every ask with empty node constraints: the constrained search's cost")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    spec = dataclasses.replace(REFERENCE, nodes=args.nodes, asks=args.asks, apps=args.apps, leaves=args.leaves)
    for policy in ("fair", "binpacking") if args.policy == "both" else (args.policy,):
        bench_policy(dataclasses.replace(spec, node_policy=policy), args)


if __name__ == "__main__":
    main()
