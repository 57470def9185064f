"""Preemption rate: a cluster full of best-effort work, then high-priority asks that must preempt.

Workload: ``--nodes`` nodes (4 vcore, 4 GB) filled by best-effort asks of 1 vcore / 1 GB
(four per node) in ``root.best`` (guarantee: 1 vcore, 1 GB), then ``--asks`` asks of the same
size in ``root.crit`` (guarantee: half the cluster) with ``preempt_other``, priority 1,000,
``preemption.delay: 1ms``. One cycle then runs: each step preempts one victim for one ask
and reserves its node (YuniKorn tries every node for every preemption), so the cycle makes
``--asks`` preemptions. Preemptions/s = victims / CPU time of that cycle. The release of the
victims and the preemptors' allocations are not timed.

    python benchmarks/preemption.py [--nodes 5000] [--asks 1000] [--repeat 1] [--rules yunikorn-1.9]

``--rules`` runs the partition under that rules profile (docs/semantics.md#rules-profiles);
the default is yunikorn-1.5. Under yunikorn-1.9 each attempt gathers its candidates from
scratch (``scheduler.core.preemption_19``: no per-cycle victim index), so expect it slower.
"""

from __future__ import annotations

import argparse

import harness  # noqa: F401  (puts the repository on sys.path)
from harness import info, machine, timed

from events.codec import decode_input
from events.models import AllocationRevoked, InputEvent
from scheduler.config import load_config
from scheduler.config.profiles import DEFAULT_PROFILE, PROFILE_NAMES
from scheduler.core.cycle import run_cycle
from scheduler.core.engine import Engine

CONFIG = """
partitions:
  - name: default
{rules}    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: best
            resources: {{guaranteed: {{vcore: 1, memory: 1G}}}}
          - name: crit
            resources: {{guaranteed: {{vcore: {half}, memory: {half}G}}}}
            properties: {{preemption.delay: 1ms}}
"""


def _event(obj: dict[str, object], n: int) -> InputEvent:
    import orjson

    decoded = decode_input(orjson.dumps({"id": f"e{n}", "source": "bench", **obj}), append_time_us=0)
    assert isinstance(decoded, InputEvent), decoded
    return decoded


def full_cluster(nodes: int, asks: int, rules: str = "") -> Engine:
    """Nodes filled with best-effort work (allocated), the high-priority asks pending."""
    engine = Engine(load_config(CONFIG.format(half=nodes * 2, rules=f"    rules: {rules}\n" if rules else "")))
    n = 0

    def add(obj: dict[str, object]) -> None:
        nonlocal n
        n += 1
        engine.apply(_event({"time": "1970-01-01T00:00:00Z", **obj}, n))

    size = {"vcore": 1000, "memory": 1_000_000_000}
    for i in range(nodes):
        add({"type": "node.added", "data": {"node_id": f"n{i:05d}", "capacity": {"vcore": 4000,
                                                                                  "memory": 4_000_000_000}}})
    add({"type": "app.added", "data": {"app_id": "be", "queue": "root.best", "user": "u"}})
    for i in range(nodes * 4):
        add({"type": "ask.added", "data": {"app_id": "be", "ask_id": f"b{i}", "resources": size}})
    run_cycle(engine.state, 0)
    add({"type": "app.added", "data": {"app_id": "crit", "queue": "root.crit", "user": "u"}})
    for i in range(asks):
        add({"type": "ask.added", "data": {"app_id": "crit", "ask_id": f"c{i}", "resources": size,
                                           "priority": 1000, "preempt_other": True}})
    return engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--asks", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--rules", choices=PROFILE_NAMES, default=DEFAULT_PROFILE.value, help="the rules profile")
    args = parser.parse_args()
    print(f"machine: {machine()}\n")
    print(f"== preemption: {args.nodes:,} nodes full of best-effort work, {args.asks:,} high-priority asks "
          f"({args.rules})")
    best = 0.0
    for run in range(args.repeat):
        engine = full_cluster(args.nodes, args.asks, "" if args.rules == DEFAULT_PROFILE.value else args.rules)
        with timed() as t:
            outputs, _ = run_cycle(engine.state, 10_000)  # 10 ms: past the 1 ms preemption delay
        victims = sum(1 for o in outputs if isinstance(o, AllocationRevoked))
        rate = victims / t.cpu if t.cpu else 0.0
        best = max(best, rate)
        print(f"   run {run + 1}: {victims:,} preemptions in {t.cpu:.2f} s cpu ({t.wall:.2f} s wall) "
              f"= {rate:,.1f}/s cpu")
    info("preemption_rate", "preemption rate", f"{best:,.1f} preemptions/s (best of {args.repeat}; "
         f"{args.nodes:,} nodes, {args.asks:,} asks, {args.rules})", value=best)


if __name__ == "__main__":
    main()
