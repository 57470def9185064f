"""A churning ``evsched simulate`` workload for comparing the compiled and the pure-Python core.

The generated cluster of scheduler.simulation.workload (fences, offsets, fifo/fair leaves, a queue
max, a department without priority sorting), plus a stateaware leaf and a maxapplications
limit, then many cycles, some capped, between which allocations are released, asks and
apps removed, nodes updated (unschedulable, resized) and removed, priority classes
changed and the config replaced. Seeded: the same lines every time.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson

from scheduler.simulation.workload import PRIORITY_CLASSES, WorkloadSpec, config_yaml, events, leaf_paths

SPEC = WorkloadSpec(nodes=120, apps=40, asks=2_400, departments=3, leaves=9, department_max_cores=60_000,
                    unsorted_department=True, seed=22)


def _config(spec: WorkloadSpec, max_cores: int) -> str:
    text = config_yaml(spec).replace(f"vcore: {spec.department_max_cores}", f"vcore: {max_cores}")
    text = text.replace("application.sort.policy: fifo", "application.sort.policy: stateaware", 1)
    # the first department admits 4 running apps; each of its leaves then needs its own limit
    text = text.replace("          - name: dept0\n", "          - name: dept0\n            maxapplications: 4\n", 1)
    for leaf, limit in (("team0", 2), ("team1", 3), ("team2", 4)):  # dept0's leaves
        text = text.replace(f"              - name: {leaf}\n",
                            f"              - name: {leaf}\n                maxapplications: {limit}\n", 1)
    return text


def lines(spec: WorkloadSpec = SPEC, rounds: int = 12) -> list[dict[str, Any]]:
    """The workload's input lines (``schedule`` lines included)."""
    rng = random.Random(spec.seed)
    out: list[dict[str, Any]] = [{"type": "config.updated", "data": {"yaml": _config(spec, 60_000)}}]
    initial = list(events(spec))
    out += [*initial[: len(initial) // 2], {"type": "schedule", "data": {"max_allocations": 300}}]
    out += initial[len(initial) // 2:]
    asks = [e["data"] for e in initial if e["type"] == "ask.added"]
    apps = [f"app-{a:04d}" for a in range(spec.apps)]
    nodes = [f"node-{n:05d}" for n in range(spec.nodes)]
    leaves = leaf_paths(spec)
    extra = 0
    for r in range(rounds):
        out.append({"type": "schedule", "data": {"max_allocations": rng.choice((50, 400))} if r % 3 else {}})
        for ask in rng.sample(asks, 60):  # some were allocated, some not (those are rejected: outputs too)
            out.append({"type": "allocation.released", "data": {"app_id": ask["app_id"], "ask_id": ask["ask_id"]}})
        for ask in rng.sample(asks, 15):
            out.append({"type": "ask.removed", "data": {"app_id": ask["app_id"], "ask_id": ask["ask_id"]}})
        for node in rng.sample(nodes, 3):
            change: dict[str, Any] = {"node_id": node}
            if rng.random() < 0.5:
                change["schedulable"] = rng.random() < 0.5
            else:
                change["capacity"] = {"vcore": rng.choice((8_000, 16_000, 64_000)), "memory": 64 * 2**30, "pods": 110}
            out.append({"type": "node.updated", "data": change})
        if r % 4 == 3:
            gone = nodes.pop(rng.randrange(len(nodes)))
            out.append({"type": "node.removed", "data": {"node_id": gone}})
            out.append({"type": "app.removed", "data": {"app_id": apps.pop(rng.randrange(len(apps)))}})
        if r == 5:
            out.append({"type": "config.updated", "data": {"yaml": _config(spec, 90_000)}})
            name, value = PRIORITY_CLASSES[1]
            out.append({"type": "priorityclass.upserted", "data": {"name": name, "value": value + 500}})
        for _ in range(100):
            extra += 1
            app = rng.choice(apps)
            ask = {"app_id": app, "ask_id": f"x{extra:05d}", "priority": rng.randrange(-5, 50),
                   "resources": {"vcore": rng.choice((250, 1000, 4000)), "memory": rng.choice((1, 8)) * 2**30}}
            out.append({"type": "ask.added", "data": ask})
        if r % 5 == 4:
            new_app = f"late-{r}"
            apps.append(new_app)
            out.append({"type": "app.added", "data": {"app_id": new_app, "queue": rng.choice(leaves), "user": "u"}})
    return out


def write(path: Path, spec: WorkloadSpec = SPEC) -> Path:
    """The workload as a JSONL file for ``evsched simulate``."""
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines(spec)))
    return path
