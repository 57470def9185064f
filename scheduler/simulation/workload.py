"""Synthetic clusters and workloads for the demo, the benchmarks and tests (seeded, reproducible).

A 3-level queue tree (root → departments → teams) with fences and offsets, fifo and fair
leaves, nodes of a few shapes, apps spread over the leaves, and asks in several priority
classes. Every event is a plain dict in input-event form; times advance 1 ms per event.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from events.times import format_time

GIB = 2**30
PRIORITY_CLASSES = [("batch-low", -10), ("standard", 0), ("high", 100), ("critical", 1000)]


@dataclass(frozen=True)
class WorkloadSpec:
    """Sizes of a generated workload."""

    nodes: int = 300
    apps: int = 60
    asks: int = 3000
    departments: int = 3
    leaves: int = 12
    node_policy: str = "fair"
    seed: int = 7
    department_max_cores: int = 0  # > 0: department 1 gets resources.max of this many vcores
    unsorted_department: bool = False  # department 2 (and its leaves) with application.sort.priority disabled
    # Department 2's even leaves get a guarantee: with ``unsorted_department`` they are ordered by
    # fair share first, where the yunikorn-1.5 and -1.9 shares differ (docs/semantics.md#yunikorn-19)
    guaranteed_leaves: bool = False


# Issue #7's reference workload: 5,000 nodes, 50,000 pending asks, 500 apps, 50 leaf queues
# under 5 departments (one fenced, offsets elsewhere), fifo and fair leaves, 4 priority classes.
REFERENCE = WorkloadSpec(nodes=5_000, apps=500, asks=50_000, departments=5, leaves=50)


def config_yaml(spec: WorkloadSpec) -> str:
    """A queue configuration for the spec: departments with offsets/fences, team leaves."""
    lines = ["partitions:", "  - name: default", "    nodesortpolicy:", f"      type: {spec.node_policy}"]
    lines += ["    queues:", "      - name: root", "        submitacl: '*'", "        queues:"]
    per_dept = max(1, spec.leaves // spec.departments)
    leaf_no = 0
    for d in range(spec.departments):
        lines += [f"          - name: dept{d}"]
        if d == 1 and spec.department_max_cores:
            limit = f"                vcore: {spec.department_max_cores}"
            lines += ["            resources:", "              max:", limit]
        lines += ["            properties:"]
        if d == 2 and spec.unsorted_department:
            lines += ["              application.sort.priority: disabled"]
        if d == 0:
            lines += ["              priority.policy: fence", "              priority.offset: '100'"]
        else:
            lines += [f"              priority.offset: '{d * 5}'"]
        lines += ["            queues:"]
        count = per_dept if d < spec.departments - 1 else spec.leaves - leaf_no
        for _ in range(count):
            policy = "fair" if leaf_no % 2 else "fifo"
            lines += [f"              - name: team{leaf_no}"]
            if d == 2 and spec.guaranteed_leaves and leaf_no % 2 == 0:
                lines += ["                resources:", "                  guaranteed:",
                          f"                    vcore: {8 + leaf_no}", f"                    memory: {32 + leaf_no}Gi"]
            lines += [
                "                properties:",
                f"                  application.sort.policy: {policy}",
                f"                  priority.offset: '{leaf_no % 4}'",
            ]
            leaf_no += 1
    return "\n".join(lines) + "\n"


def leaf_paths(spec: WorkloadSpec) -> list[str]:
    """Fully qualified leaf queue names of the generated tree, in config order."""
    per_dept = max(1, spec.leaves // spec.departments)
    out = []
    leaf_no = 0
    for d in range(spec.departments):
        count = per_dept if d < spec.departments - 1 else spec.leaves - leaf_no
        for _ in range(count):
            out.append(f"root.dept{d}.team{leaf_no}")
            leaf_no += 1
    return out


def events(spec: WorkloadSpec) -> Iterator[dict[str, Any]]:
    """Input events: priority classes, nodes, apps, then asks interleaved over apps."""
    rng = random.Random(spec.seed)
    for name, value in PRIORITY_CLASSES:
        yield {"type": "priorityclass.upserted", "data": {"name": name, "value": value}}
    shapes = [(16_000, 64 * GIB), (32_000, 128 * GIB), (8_000, 32 * GIB)]
    for n in range(spec.nodes):
        vcore, memory = shapes[n % len(shapes)]
        yield {
            "type": "node.added",
            "data": {"node_id": f"node-{n:05d}", "capacity": {"vcore": vcore, "memory": memory, "pods": 110}},
        }
    leaves = leaf_paths(spec)
    for a in range(spec.apps):
        yield {
            "type": "app.added",
            "data": {"app_id": f"app-{a:04d}", "queue": leaves[a % len(leaves)], "user": f"user{a % 7}"},
        }
    for k in range(spec.asks):
        app = k % spec.apps
        cls, _ = PRIORITY_CLASSES[rng.randrange(len(PRIORITY_CLASSES))]
        yield {
            "type": "ask.added",
            "data": {
                "app_id": f"app-{app:04d}",
                "ask_id": f"ask-{k:06d}",
                "resources": {"vcore": rng.choice((250, 500, 1000, 2000)), "memory": rng.choice((1, 2, 4)) * GIB},
                "priority_class": cls,
            },
        }


def numbered(
    evts: Iterator[dict[str, Any]], *, source: str = "workload", start_us: int = 0
) -> Iterator[dict[str, Any]]:
    """Give each event an id, a source and a time (1 ms apart) so it is a full input record."""
    for i, evt in enumerate(evts):
        yield {"id": f"{source}-{i}", "source": source, "time": format_time(start_us + i * 1000), **evt}


def records(spec: WorkloadSpec, *, source: str = "workload") -> list[bytes]:
    """The spec's input events as the JSON bytes a producer would publish (ids and times set)."""
    return [orjson.dumps(evt) for evt in numbered(events(spec), source=source)]
