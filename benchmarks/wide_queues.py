"""One cycle over many leaf queues of one ask each: the queue sort's cost (issue 15).

A root with ``--leaves`` leaf queues (each its own app and one ask), enough nodes for every
ask, one cycle that allocates them all. Each allocation re-sorts root's children, so the
queue order's cost is paid once per decision. ``--asks same`` gives every ask one size
(no queue's pending dominates another's); ``varied`` gives sizes from a seeded generator
(some dominate), ``growing`` sizes that grow with the queue's config order (each queue's
pending dominates every earlier one's: the worst case of the old insertion pass, O(n²) per
sort, O(n³) per cycle). Prints the cycle time and decisions.

    python benchmarks/wide_queues.py [--leaves 2000] [--asks same|varied|growing|all] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import time

import harness  # noqa: F401  (puts the repository on sys.path)
import orjson

from scheduler.config import load_config
from scheduler.core.cycle import run_cycle
from scheduler.simulation.simulate import Simulation


def config(leaves: int) -> str:
    children = "".join(f"          - name: q{i}\n" for i in range(leaves))
    return ("partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: '*'\n"
            "        queues:\n" + children)


def simulation(leaves: int, kind: str) -> Simulation:
    rng = random.Random(15)
    sim = Simulation(load_config(config(leaves)))
    lines: list[dict[str, object]] = []
    for n in range(leaves // 50 + 1):
        capacity = {"vcore": 10**9, "memory": 10**12}
        lines.append({"type": "node.added", "data": {"node_id": f"n{n}", "capacity": capacity}})
    for i in range(leaves):
        vcore, memory = {"same": (500, 10**8), "varied": (rng.randint(1, 40) * 100, rng.randint(1, 40) * 10**6),
                         "growing": (100 + i, 10**6 + i)}[kind]
        lines.append({"type": "app.added", "data": {"app_id": f"a{i}", "queue": f"root.q{i}", "user": "u"}})
        lines.append({"type": "ask.added", "data": {"app_id": f"a{i}", "ask_id": "k",
                                                    "resources": {"vcore": vcore, "memory": memory}}})
    for line in lines:
        assert not sim.feed(orjson.dumps(line)), line
    return sim


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--leaves", type=int, default=2000)
    ap.add_argument("--asks", choices=["same", "varied", "growing", "all"], default="all")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    kinds = ["same", "varied", "growing"] if args.asks == "all" else [args.asks]
    for kind in kinds:
        best = float("inf")
        for _ in range(args.repeat):
            sim = simulation(args.leaves, kind)
            start = time.process_time()
            _, decisions = run_cycle(sim.engine.state, 10**12)
            best = min(best, time.process_time() - start)
        assert decisions == args.leaves, decisions
        print(f"wide queues: {args.leaves} leaves, asks {kind}: one cycle of {decisions} decisions "
              f"in {best:.3f} s cpu (best of {args.repeat})")


if __name__ == "__main__":
    main()
