"""Random tie-free scenarios for the conformance run, in ``evsched simulate``'s JSONL format.

Tie-free means no decision of yunikorn-core is left to Go's map order (queues' children,
a leaf's apps and the victims are kept in maps and sorted with stable sorts):

* every ask has its own non-zero priority, a distinct multiple of 10,000, so apps with
  pending asks never share a priority (the last key of every app sort, fair included);
* priority offsets are distinct powers of 3 with a random sign, and only a queue with an
  offset of its own is fenced: any two different sets of queues add up to different
  sums (balanced ternary is unique), and a sum stays under 3,281, so sibling queues never
  share an adjusted priority (a fenced queue's value is its own offset plus the offsets
  below it up to the next fence, a non-fenced one's a non-zero multiple of 10,000 plus
  such a sum);
* apps and asks arrive one line at a time (1 ms apart), so submission and creation times
  are distinct; nodes tie only on score, where both sides break ties by node id.

Scenarios span well under 2 s of log time (no line has an explicit ``time``), so neither
side reaches a time-dependent rule: the 2 s reservation delay for asks that fit nowhere,
Completing → Completed after 30 s, Starting → Running after 5 minutes.

    python -m conformance.generate FAMILY SEED   # one scenario on standard output
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Line = dict[str, Any]

FAMILIES = (
    "fences",
    "disabled-priority",
    "app-policies",
    "node-policies",
    "limits",
    "maxapps",
    "releases",
    "required-nodes",
    "preemption",
)

POWERS_OF_3 = (1, 3, 9, 27, 81, 243, 729, 2187)
PRIORITY_STEP = 10_000  # > twice the largest sum of offsets (3280)


@dataclass
class Queue:
    """A queue of the generated tree (config order = child order)."""

    name: str
    path: str
    children: list[Queue] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    resources: dict[str, dict[str, str]] = field(default_factory=dict)
    maxapplications: int = 0

    def leaves(self) -> list[Queue]:
        if not self.children:
            return [self]
        return [leaf for c in self.children for leaf in c.leaves()]

    def walk(self) -> list[Queue]:
        return [self, *(q for c in self.children for q in c.walk())]

    def config(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.path == "root":
            out["submitacl"] = "*"
        if self.properties:
            out["properties"] = dict(self.properties)
        if self.resources:
            out["resources"] = {k: dict(v) for k, v in self.resources.items()}
        if self.maxapplications:
            out["maxapplications"] = self.maxapplications
        if self.children:
            out["queues"] = [c.config() for c in self.children]
        return out


@dataclass
class Scenario:
    """What a family builds: the tree, node policy and the lines after the config."""

    rng: random.Random
    root: Queue
    nodes: list[str] = field(default_factory=list)
    node_policy: dict[str, Any] | None = None
    lines: list[Line] = field(default_factory=list)
    apps: list[str] = field(default_factory=list)
    asks: list[tuple[str, str]] = field(default_factory=list)
    priorities: list[int] = field(default_factory=list)

    def config_line(self) -> Line:
        part: dict[str, Any] = {"name": "default", "queues": [self.root.config()]}
        if self.node_policy is not None:
            part["nodesortpolicy"] = self.node_policy
        return {"type": "config.updated", "data": {"yaml": json.dumps({"partitions": [part]})}}

    def all_lines(self) -> list[Line]:
        return [self.config_line(), *self.lines]

    def add_nodes(self, count: int, *, sizes: tuple[int, ...] = (2, 3, 4, 6, 8)) -> None:
        for i in range(count):
            node_id = f"n{i + 1:02d}"
            cap = {"vcore": self.rng.choice(sizes) * 1000, "memory": self.rng.choice(sizes) * 1000}
            data: dict[str, Any] = {"node_id": node_id, "capacity": cap}
            self.nodes.append(node_id)
            self.lines.append({"type": "node.added", "data": data})

    def add_app(self, queue: Queue, tags: dict[str, str] | None = None) -> str:
        app_id = f"app{len(self.apps) + 1:02d}"
        data: dict[str, Any] = {"app_id": app_id, "queue": queue.path, "user": "u"}
        if tags:
            data["tags"] = tags
        self.apps.append(app_id)
        self.lines.append({"type": "app.added", "data": data})
        return app_id

    def next_priority(self) -> int:
        return self.priorities.pop()

    def add_ask(self, app_id: str, extra: dict[str, Any] | None = None) -> str:
        ask_id = f"{app_id}-k{sum(1 for a, _ in self.asks if a == app_id) + 1}"
        size = {"vcore": self.rng.choice((500, 1000, 2000)), "memory": self.rng.choice((500, 1000, 1500, 3000))}
        data: dict[str, Any] = {"app_id": app_id, "ask_id": ask_id, "resources": size,
                                "priority": self.next_priority(), **(extra or {})}
        self.asks.append((app_id, ask_id))
        self.lines.append({"type": "ask.added", "data": data})
        return ask_id

    def schedule(self, limit: int | None = None) -> None:
        line: Line = {"type": "schedule"}
        if limit is not None:
            line["data"] = {"max_allocations": limit}
        self.lines.append(line)


def build_tree(rng: random.Random) -> Queue:
    """root → 1–3 children, each a leaf or a parent of 1–3 leaves (one level deeper at most)."""
    root = Queue("root", "root")
    count = 0

    def grow(parent: Queue, depth: int) -> None:
        nonlocal count
        for _ in range(rng.randint(2 if parent is root else 1, 3)):
            count += 1
            q = Queue(f"q{count}", f"{parent.path}.q{count}")
            parent.children.append(q)
            if depth < 2 and rng.random() < 0.45:
                grow(q, depth + 1)

    grow(root, 1)
    return root


def new_scenario(rng: random.Random) -> Scenario:
    sc = Scenario(rng, build_tree(rng))
    sc.priorities = [PRIORITY_STEP * p for p in rng.sample([p for p in range(-40, 41) if p], 80)]
    return sc


def workload(sc: Scenario, *, phases: int = 2, apps: tuple[int, int] = (2, 5), asks: tuple[int, int] = (1, 4),
             app_tags: Callable[[], dict[str, str] | None] = lambda: None,
             ask_extra: Callable[[], dict[str, Any] | None] = lambda: None,
             between: Callable[[int], None] = lambda _phase: None) -> None:
    """Apps and asks in phases, a schedule line (sometimes with a limit) after each."""
    rng = sc.rng
    leaves = sc.root.leaves()
    for phase in range(phases):
        for _ in range(rng.randint(*apps) if phase == 0 else rng.randint(0, 2)):
            sc.add_app(rng.choice(leaves), app_tags())
        for _ in range(rng.randint(*asks) * max(len(sc.apps), 1) // 2 + 1):
            if sc.apps:
                sc.add_ask(rng.choice(sc.apps), ask_extra())
        sc.schedule(rng.choice((None, None, None, 1, 2)))
        between(phase)


def offsets(sc: Scenario, *, fence_chance: float) -> None:
    """Distinct ±3^i offsets on some non-root queues; some of those fenced."""
    queues = sc.root.walk()[1:]
    powers = list(POWERS_OF_3)
    sc.rng.shuffle(powers)
    for q in queues:
        if powers and sc.rng.random() < 0.6:
            q.properties["priority.offset"] = str(powers.pop() * sc.rng.choice((1, -1)))
            if sc.rng.random() < fence_chance:
                q.properties["priority.policy"] = "fence"


def fam_fences(sc: Scenario) -> None:
    offsets(sc, fence_chance=0.35)
    sc.add_nodes(sc.rng.randint(2, 4))
    workload(sc, phases=sc.rng.randint(1, 3))


def fam_disabled_priority(sc: Scenario) -> None:
    offsets(sc, fence_chance=0.15)
    for q in sc.root.walk():
        if sc.rng.random() < 0.5:
            q.properties["application.sort.priority"] = "disabled"
    for leaf in sc.root.leaves():
        leaf.properties["application.sort.policy"] = sc.rng.choice(("fifo", "fair"))
    sc.add_nodes(sc.rng.randint(2, 4))
    workload(sc, phases=sc.rng.randint(1, 3))


def fam_app_policies(sc: Scenario) -> None:
    for leaf in sc.root.leaves():
        leaf.properties["application.sort.policy"] = sc.rng.choice(("fifo", "fair", "stateaware"))
    sc.add_nodes(sc.rng.randint(2, 4))

    def tags() -> dict[str, str] | None:
        return {"application.stateaware.disable": "true"} if sc.rng.random() < 0.2 else None

    workload(sc, phases=sc.rng.randint(1, 3), app_tags=tags)


def fam_node_policies(sc: Scenario) -> None:
    policy: dict[str, Any] = {"type": sc.rng.choice(("fair", "binpacking"))}
    if sc.rng.random() < 0.7:
        policy["resourceweights"] = {"vcore": sc.rng.choice((1.0, 2.0, 4.0)), "memory": sc.rng.choice((1.0, 3.0))}
    sc.node_policy = policy
    sc.add_nodes(sc.rng.randint(3, 6))
    workload(sc, phases=sc.rng.randint(1, 3))


def fam_limits(sc: Scenario) -> None:
    def limit(q: Queue, vcap: int, mcap: int, gbudget: int) -> None:
        """A max within the parent's (vcap, mcap) and a leaf guarantee within gbudget vcores."""
        if sc.rng.random() < 0.6:
            vcap, mcap = sc.rng.randint(1, vcap), sc.rng.randint(1, mcap)
            mcap = min(vcap, mcap) if sc.rng.random() < 0.3 else mcap
            q.resources["max"] = {"vcore": f"{vcap * 1000}m", "memory": str(mcap * 1000)}
            gbudget = min(gbudget, vcap)
        if not q.children and gbudget >= 1 and sc.rng.random() < 0.6:
            q.resources["guaranteed"] = {"vcore": f"{sc.rng.randint(1, gbudget) * 1000}m"}
        for c in q.children:
            limit(c, vcap, mcap, gbudget // len(q.children))

    for c in sc.root.children:
        limit(c, 8, 8, 8 // len(sc.root.children))
    sc.add_nodes(sc.rng.randint(2, 4))
    workload(sc, phases=sc.rng.randint(1, 3))


def fam_maxapps(sc: Scenario) -> None:
    def cap(q: Queue, parent: int) -> None:
        if parent or sc.rng.random() < 0.5:
            q.maxapplications = sc.rng.randint(1, parent or 3)
        for c in q.children:
            cap(c, q.maxapplications)

    for c in sc.root.children:
        cap(c, 0)
    sc.add_nodes(sc.rng.randint(2, 4))
    workload(sc, phases=sc.rng.randint(2, 3), apps=(3, 6))


def fam_releases(sc: Scenario) -> None:
    sc.add_nodes(sc.rng.randint(2, 3))

    def release(_phase: int) -> None:
        for _ in range(sc.rng.randint(1, 3)):
            if not sc.asks:
                return
            app_id, ask_id = sc.rng.choice(sc.asks)
            kind = sc.rng.choice(("allocation.released", "allocation.released", "ask.removed"))
            sc.lines.append({"type": kind, "data": {"app_id": app_id, "ask_id": ask_id}})
        sc.schedule()

    workload(sc, phases=sc.rng.randint(2, 3), between=release)


def fam_required_nodes(sc: Scenario) -> None:
    sc.add_nodes(sc.rng.randint(2, 4))
    late = f"n{len(sc.nodes) + 1:02d}"  # sometimes named before it exists (a node still joining)

    def extra() -> dict[str, Any] | None:
        if sc.rng.random() >= 0.4:
            return None
        return {"required_node": late if sc.rng.random() < 0.1 else sc.rng.choice(sc.nodes)}

    def join(phase: int) -> None:
        if phase == 0 and sc.rng.random() < 0.5:
            sc.lines.append({"type": "node.added", "data": {"node_id": late, "capacity": {"vcore": 4000,
                                                                                          "memory": 4000}}})

    workload(sc, phases=sc.rng.randint(1, 3), ask_extra=extra, between=join)


def fam_preemption(sc: Scenario) -> None:
    """Low-priority work fills the nodes one ask per cycle (so allocation order is creation order:
    yunikorn-core orders victims by allocation time without the shim's creationTime tag), then
    high-priority asks that may preempt arrive; guarantees on leaves, sometimes a preemption
    fence or a disabled queue, ``preemption.delay: 1ns`` (attempts at once; one per ask, the
    15 s attempt period is never reached), releases of random allocations between cycles."""
    rng = sc.rng
    sc.root.properties["preemption.delay"] = "1ns"
    for q in sc.root.walk()[1:]:
        if q.children and rng.random() < 0.3:
            q.properties["preemption.policy"] = "fence"
        elif not q.children and rng.random() < 0.15:
            q.properties["preemption.policy"] = "disabled"
    if rng.random() < 0.3:
        offsets(sc, fence_chance=0.0)
    sc.add_nodes(rng.randint(2, 3), sizes=(4, 6, 8))
    cluster = [sum(line["data"]["capacity"][t] for line in sc.lines if line["type"] == "node.added")
               for t in ("vcore", "memory")]
    leaves = sc.root.leaves()
    rng.shuffle(leaves)
    cut = rng.randint(1, len(leaves) - 1)
    filler_leaves, preemptor_leaves = leaves[:cut], leaves[cut:]
    for leaf in leaves:  # small guarantees where the work runs, larger ones where the preemptors come
        if rng.random() < 0.85:
            top = 3 if leaf in filler_leaves else 8
            vcore, memory = rng.randint(1, top) * 1000, rng.randint(1, top) * 1000
            leaf.resources["guaranteed"] = {"vcore": f"{vcore}m", "memory": str(memory)}
    low = sorted((p for p in sc.priorities if p < 0), reverse=True)
    high = sorted(p for p in sc.priorities if p > 0)
    fillers = [sc.add_app(rng.choice(filler_leaves)) for _ in range(rng.randint(1, 3))]
    used = [0, 0]
    while used[0] < cluster[0] and used[1] < cluster[1] and len(sc.asks) < 16:
        sc.priorities = [low.pop()]  # later fillers get lower priorities
        extra = {"allow_preemption": False} if rng.random() < 0.15 else None
        sc.add_ask(rng.choice(fillers), extra)
        size = sc.lines[-1]["data"]["resources"]
        used = [used[0] + size["vcore"], used[1] + size["memory"]]
        sc.schedule()
    leaves = preemptor_leaves if rng.random() < 0.85 else leaves
    for _ in range(rng.randint(1, 3)):
        app_id = sc.add_app(rng.choice(leaves))
        for _ in range(rng.randint(1, 2)):
            sc.priorities = [high.pop()]
            sc.add_ask(app_id, {"preempt_other": rng.random() < 0.85})
        sc.schedule()
    for _ in range(rng.randint(1, 2)):
        for _ in range(rng.randint(1, 3)):
            app_id, ask_id = rng.choice(sc.asks)
            sc.lines.append({"type": "allocation.released", "data": {"app_id": app_id, "ask_id": ask_id}})
        sc.schedule()


BUILDERS: dict[str, Callable[[Scenario], None]] = {
    "fences": fam_fences,
    "disabled-priority": fam_disabled_priority,
    "app-policies": fam_app_policies,
    "node-policies": fam_node_policies,
    "limits": fam_limits,
    "maxapps": fam_maxapps,
    "releases": fam_releases,
    "required-nodes": fam_required_nodes,
    "preemption": fam_preemption,
}


def generate(family: str, seed: int) -> list[Line]:
    """The scenario of ``family`` for ``seed`` (the same pair always gives the same lines)."""
    if family not in BUILDERS:
        raise ValueError(f"unknown family {family!r}; one of {', '.join(FAMILIES)}")
    sc = new_scenario(random.Random(f"{family}/{seed}"))
    BUILDERS[family](sc)
    return sc.all_lines()


def encode(lines: list[Line]) -> bytes:
    """JSONL bytes of the lines."""
    return b"".join(json.dumps(line, separators=(",", ":")).encode() + b"\n" for line in lines)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m conformance.generate FAMILY SEED", file=sys.stderr)
        return 2
    sys.stdout.buffer.write(encode(generate(argv[0], int(argv[1]))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
