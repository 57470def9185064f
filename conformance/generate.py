"""Random scenarios for the conformance run, in ``evsched simulate``'s JSONL format.

Tie-free where the generator can make them so — no decision of yunikorn-core left to Go's
map order (queues' children, a leaf's apps and the victims are kept in maps and sorted with
stable sorts):

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

Reserved asks and apps are still tried in map order by yunikorn-core; ``conformance.run``
runs the harness several times for those. Every line carries its log time (1 ms after
the previous one, plus the family's waits): the time-driven families (``TIMED``) span
minutes to hours, and the harness's yunikorn-core follows the same clock.

    python -m conformance.generate FAMILY SEED   # one scenario on standard output
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from events.times import format_time

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
    "preemption-tree",
    "placement",
    "acls",
    "user-limits",
    "nodes",
    "app-removed",
    "config-changes",
    "timers",
    "preemption-delay",
    "churn",
    "gang",
)
TIMED = ("timers", "preemption-delay", "churn", "gang")  # families whose scenarios span minutes to hours

WAIT = "_wait_us"  # a pseudo-line: the next line's extra delay (folded in by all_lines)
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
    extra: dict[str, Any] = field(default_factory=dict)  # more config keys (acls, limits, parent, childtemplate)

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
        out.update(self.extra)
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
    partition_extra: dict[str, Any] = field(default_factory=dict)  # placementrules, limits
    first_config: Line | None = None  # the config line as it was before any change (reconfigure)

    def config_line(self) -> Line:
        part: dict[str, Any] = {"name": "default", "queues": [self.root.config()], **self.partition_extra}
        if self.node_policy is not None:
            part["nodesortpolicy"] = self.node_policy
        return {"type": "config.updated", "data": {"yaml": json.dumps({"partitions": [part]})}}

    def all_lines(self) -> list[Line]:
        """The config line and the rest, each with its log time: 1 ms after the previous
        line, plus any ``wait`` before it."""
        out: list[Line] = []
        now_us = 0
        for line in [self.first_config or self.config_line(), *self.lines]:
            if WAIT in line:
                now_us += line[WAIT]
                continue
            out.append({**line, "time": format_time(now_us)})
            now_us += 1000
        return out

    def wait(self, seconds: float) -> None:
        """The next line comes ``seconds`` of log time later (on top of its 1 ms)."""
        self.lines.append({WAIT: round(seconds * 1_000_000)})

    def reconfigure(self) -> None:
        """A config.updated line with the tree and settings as they are now."""
        self.lines.append(self.config_line())

    def freeze_config(self) -> None:
        """The first line's config is the tree and settings as they are now (later ones reconfigure)."""
        self.first_config = self.config_line()

    def add_nodes(self, count: int, *, sizes: tuple[int, ...] = (2, 3, 4, 6, 8)) -> None:
        for i in range(count):
            node_id = f"n{i + 1:02d}"
            cap = {"vcore": self.rng.choice(sizes) * 1000, "memory": self.rng.choice(sizes) * 1000}
            data: dict[str, Any] = {"node_id": node_id, "capacity": cap}
            self.nodes.append(node_id)
            self.lines.append({"type": "node.added", "data": data})

    def add_app(self, queue: Queue | str | None, tags: dict[str, str] | None = None, user: str = "u",
                groups: list[str] | None = None) -> str:
        app_id = f"app{len(self.apps) + 1:02d}"
        data: dict[str, Any] = {"app_id": app_id, "user": user}
        if queue is not None:
            data["queue"] = queue.path if isinstance(queue, Queue) else queue
        if groups:
            data["groups"] = groups
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
    fork = forked(sc.rng)
    if fork.random() < 0.5:  # guarantees, half with an explicit memory 0 (1.9: share 1.0 when used)
        for leaf in sc.root.leaves():
            if fork.random() < 0.6:
                leaf.resources["guaranteed"] = {"vcore": f"{fork.randint(1, 4) * 1000}m"}
                if fork.random() < 0.5:
                    leaf.resources["guaranteed"]["memory"] = "0"
    sc.add_nodes(sc.rng.randint(2, 4))
    workload(sc, phases=sc.rng.randint(1, 3))


def forked(rng: random.Random) -> random.Random:
    """A copy of ``rng`` to draw from without moving it: a setting added to a family this way
    leaves every other draw, and so the rest of each scenario, as it was."""
    fork = random.Random()
    fork.setstate(rng.getstate())
    return fork


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
            cores = sc.rng.randint(1, gbudget)
            q.resources["guaranteed"] = {"vcore": f"{cores * 1000}m"}
            if cores % 2 == 0:  # an explicit zero beside it (no draw: the rest of the scenario stays as it was)
                q.resources["guaranteed"]["memory"] = "0"  # 1.9: a used type guaranteed 0 has share 1.0
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
    cluster = [sum(line["data"]["capacity"][t] for line in sc.lines if line.get("type") == "node.added")
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



def fam_preemption_tree(sc: Scenario) -> None:
    """``preemption`` across a queue tree, where yunikorn-core 1.9 changed the rules: guarantees
    on parents too (an ancestor's guarantee limits what a queue below it can lose, YUNIKORN-3240;
    a preemptor under its guarantee whose parent is over, 2769), guarantees of one resource type
    only (a queue over for one type and under for another, 3113), and maxes on parents (the
    fence found from usage plus the ask, 3241)."""
    fam_preemption(sc)  # builds the lines; the config line is written from the tree at the end
    rng = sc.rng
    for q in sc.root.walk()[1:]:
        if q.children and rng.random() < 0.5:
            vcore, memory = rng.randint(1, 8), rng.randint(1, 8)
            q.resources["guaranteed"] = {"vcore": f"{vcore * 1000}m", "memory": str(memory * 1000)}
        if q.children and rng.random() < 0.3:
            vcore, memory = rng.randint(2, 12), rng.randint(2, 12)
            q.resources["max"] = {"vcore": f"{vcore * 1000}m", "memory": str(memory * 1000)}
        guaranteed = q.resources.get("guaranteed")
        if guaranteed is not None and rng.random() < 0.3:
            del guaranteed[rng.choice(("vcore", "memory"))]

# --- config, placement and access ----------------------------------------------------------

USERS = ("alice", "bob", "carol.d", "dev1", "ops7")
GROUPS = ("devs", "ops", "qa")


def user_pool(rng: random.Random) -> dict[str, list[str] | None]:
    """Users and their groups: each user always sends the same groups, or never any (yunikorn-core
    caches a user's groups from the last app that sent some: a user sending both would see it)."""
    return {u: (rng.sample(GROUPS, rng.randint(1, 2)) if rng.random() < 0.5 else None) for u in USERS}


def pick_user(sc: Scenario, pool: dict[str, list[str] | None]) -> tuple[str, list[str] | None]:
    user = sc.rng.choice(list(pool))
    return user, pool[user]


def acl(rng: random.Random) -> str:
    """A submit/admin ACL: users and/or groups, sometimes a wildcard, sometimes nobody."""
    users = ",".join(rng.sample(USERS, rng.randint(0, 2)))
    groups = ",".join(rng.sample(GROUPS, rng.randint(0, 2)))
    wild_users = "* " + groups if groups else "*"
    return rng.choice((f"{users} {groups}".rstrip(), f"{users}", f" {groups}", "*", "", wild_users))


def fam_placement(sc: Scenario) -> None:
    """Placement rules of every type (provided, user, tag, fixed), with create, parent rules
    and filters; apps with or without a queue and a namespace tag; parents marked
    ``parent: true`` where a fixed parent rule names them; a childtemplate sometimes; apps
    finish and their dynamic queues go (yunikorn's 10 s cleaner: the scenario ends a minute on)."""
    rng = sc.rng
    parents = [q for q in sc.root.walk()[1:] if q.children]
    for q in sc.root.walk()[1:]:
        if not q.children and rng.random() < 0.25:
            q.extra["parent"] = True  # an empty parent: dynamic leaves go under it
            parents.append(q)
    for q in parents:
        q.extra["parent"] = True
    if rng.random() < 0.5:
        sc.root.extra["childtemplate"] = {"resources": {"max": {"vcore": f"{rng.randint(2, 8) * 1000}m"}}}
    if rng.random() < 0.5:
        sc.root.children.append(Queue("default", "root.default"))
    leaves = [q for q in sc.root.leaves() if "parent" not in q.extra]

    def parent_rule() -> dict[str, Any] | None:
        roll = rng.random()
        if roll < 0.4 and parents:
            return {"name": "fixed", "value": rng.choice(parents).path}
        if roll < 0.55:
            return {"name": "tag", "value": "team", "create": rng.random() < 0.5}
        return None

    def rule() -> dict[str, Any]:
        kind = rng.choice(("provided", "user", "tag", "fixed"))
        out: dict[str, Any] = {"name": kind, "create": rng.random() < 0.6}
        if kind == "tag":
            out["value"] = "namespace"
        if kind == "fixed":
            if rng.random() < 0.5 or not parents:
                out["value"] = rng.choice(leaves).path if leaves else "root.fixed"
                out["create"] = not leaves or rng.random() < 0.3
                return out
            out["value"] = f"fx{rng.randint(1, 3)}"
        parent = parent_rule()
        if parent is not None and not (kind == "fixed" and parent["name"] == "fixed" and "value" not in out):
            out["parent"] = parent
        if rng.random() < 0.3:
            flt: dict[str, Any] = {"type": rng.choice(("allow", "deny"))}
            if rng.random() < 0.5:
                flt["users"] = rng.sample(USERS, rng.randint(1, 2)) if rng.random() < 0.7 else ["^(alice|dev).*"]
            else:
                flt["groups"] = rng.sample(GROUPS, 1)
            out["filter"] = flt
        return out

    sc.partition_extra["placementrules"] = [rule() for _ in range(rng.randint(1, 3))]
    pool = user_pool(rng)
    sc.add_nodes(rng.randint(2, 3))
    for _phase in range(rng.randint(1, 3)):
        for _ in range(rng.randint(2, 5)):
            user, groups = pick_user(sc, pool)
            queue: str | None = rng.choice((None, rng.choice(leaves).path if leaves else None,
                                            f"qx{rng.randint(1, 3)}", rng.choice(leaves).name if leaves else None))
            tags = {"namespace": f"ns{rng.randint(1, 3)}"} if rng.random() < 0.6 else {}
            if rng.random() < 0.3:
                tags["team"] = f"t{rng.randint(1, 2)}"
            sc.add_app(queue, tags or None, user=user, groups=groups)
        for _ in range(rng.randint(2, 6)):
            sc.add_ask(rng.choice(sc.apps))
        sc.schedule()
    finish(sc)


def finish(sc: Scenario) -> None:
    """Every allocation released, then a minute of log time: apps go Completing, Completed 30 s
    later (leaving their queues), and yunikorn-core's 10 s queue cleaner removes the empty
    dynamic queues that evsched removes at once."""
    if sc.rng.random() < 0.3:
        return
    sc.wait(sc.rng.uniform(1, 20))
    for app_id, ask_id in sc.asks:
        kind = "allocation.released" if sc.rng.random() < 0.8 else "ask.removed"
        sc.lines.append({"type": kind, "data": {"app_id": app_id, "ask_id": ask_id}})
    sc.schedule()
    sc.wait(sc.rng.choice((5, 31, 45, 60)))
    sc.schedule()


def fam_acls(sc: Scenario) -> None:
    """Submit and admin ACLs (users, groups, wildcards, nobody) on root and below; apps of
    users with and without groups (no groups: a group named after the user) naming leaves,
    parents or unknown queues by full path. No placement rules and no root.default (yunikorn's
    implicit provided rule would fall back to it where evsched rejects)."""
    rng = sc.rng
    sc.root.extra["submitacl"] = rng.choice((acl(rng), acl(rng), "*"))
    for q in sc.root.walk()[1:]:
        if rng.random() < 0.5:
            q.extra["submitacl"] = acl(rng)
        if rng.random() < 0.25:
            q.extra["adminacl"] = acl(rng)
    pool = user_pool(rng)
    sc.add_nodes(rng.randint(2, 3))
    queues = sc.root.walk()[1:]
    for _ in range(rng.randint(1, 2)):
        for _ in range(rng.randint(3, 6)):
            user, groups = pick_user(sc, pool)
            target = rng.choice(queues).path if rng.random() < 0.9 else "root.nosuch"
            sc.add_app(target, user=user, groups=groups)
        for _ in range(rng.randint(2, 5)):
            sc.add_ask(rng.choice(sc.apps))
        sc.schedule()


def fam_user_limits(sc: Scenario) -> None:
    """User and group limits (maxresources, maxapplications) on the partition and queues: named
    users, ``*``, named groups and ``*`` groups; apps of users with and without groups."""
    rng = sc.rng

    def limits() -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for _ in range(rng.randint(1, 3)):
            entry: dict[str, Any] = {"limit": f"l{len(out)}"}
            if rng.random() < 0.5:
                entry["users"] = rng.sample(USERS, rng.randint(1, 2))
            else:
                entry["groups"] = rng.sample([*GROUPS, *USERS], rng.randint(1, 2))
            if rng.random() < 0.7:
                entry["maxresources"] = {"vcore": f"{rng.randint(1, 6) * 1000}m"}
            if rng.random() < 0.5 or "maxresources" not in entry:
                entry["maxapplications"] = rng.randint(1, 3)
            out.append(entry)
        if rng.random() < 0.4:
            out.append({"limit": "any user", "users": ["*"], "maxresources": {"vcore": f"{rng.randint(2, 8) * 1000}m"}})
        if rng.random() < 0.4 and any("groups" in e for e in out):
            out.append({"limit": "any group", "groups": ["*"], "maxapplications": rng.randint(1, 4)})
        return out

    if rng.random() < 0.3:
        sc.partition_extra["limits"] = limits()
    for q in sc.root.walk()[1:]:
        if rng.random() < 0.5:
            q.extra["limits"] = limits()
    pool = user_pool(rng)
    sc.add_nodes(rng.randint(2, 3), sizes=(4, 6, 8))
    leaves = sc.root.leaves()
    for _ in range(rng.randint(1, 3)):
        for _ in range(rng.randint(2, 5)):
            user, groups = pick_user(sc, pool)
            sc.add_app(rng.choice(leaves), user=user, groups=groups)
        for _ in range(rng.randint(3, 8)):
            sc.add_ask(rng.choice(sc.apps))
        sc.schedule(rng.choice((None, None, 1)))
        if rng.random() < 0.5 and sc.asks:
            app_id, ask_id = rng.choice(sc.asks)
            sc.lines.append({"type": "allocation.released", "data": {"app_id": app_id, "ask_id": ask_id}})


# --- nodes, apps leaving, config changes ---------------------------------------------------

def fam_nodes(sc: Scenario) -> None:
    """Nodes that change: capacity updates, ``occupied`` resources, cordon and uncordon, removal
    (their allocations go with them), late joiners."""
    rng = sc.rng
    sc.add_nodes(rng.randint(2, 4))
    for line in sc.lines:
        if line.get("type") == "node.added" and rng.random() < 0.3:
            line["data"]["occupied"] = {"vcore": rng.choice((500, 1000)), "memory": rng.choice((500, 1000))}

    def change(_phase: int) -> None:
        for _ in range(rng.randint(1, 3)):
            node = rng.choice(sc.nodes)
            roll = rng.random()
            data: dict[str, Any] = {"node_id": node}
            if roll < 0.3:
                data["capacity"] = {"vcore": rng.choice((2, 4, 6, 8)) * 1000, "memory": rng.choice((2, 4, 6, 8)) * 1000}
                sc.lines.append({"type": "node.updated", "data": data})
            elif roll < 0.5:
                data["occupied"] = {"vcore": rng.choice((0, 500, 1000, 2000)), "memory": rng.choice((0, 1000))}
                sc.lines.append({"type": "node.updated", "data": data})
            elif roll < 0.75:
                data["schedulable"] = rng.random() < 0.4
                sc.lines.append({"type": "node.updated", "data": data})
            elif roll < 0.9 and len(sc.nodes) > 1:
                sc.nodes.remove(node)
                sc.lines.append({"type": "node.removed", "data": data})
            else:
                node_id = f"n{len(sc.nodes) + 10:02d}"
                sc.nodes.append(node_id)
                sc.lines.append({"type": "node.added", "data": {"node_id": node_id, "capacity": {
                    "vcore": rng.choice((2, 4, 6)) * 1000, "memory": rng.choice((2, 4, 6)) * 1000}}})
        sc.schedule()

    workload(sc, phases=rng.randint(2, 4), between=change)


def fam_app_removed(sc: Scenario) -> None:
    """``app.removed`` between cycles (Completing at once, its asks and allocations gone) and new
    apps taking the room; a minute later the Completing apps are Completed."""
    rng = sc.rng
    sc.add_nodes(rng.randint(2, 3))

    def remove(_phase: int) -> None:
        for app_id in rng.sample(sc.apps, min(len(sc.apps), rng.randint(1, 2))):
            sc.lines.append({"type": "app.removed", "data": {"app_id": app_id}})
        sc.schedule()

    workload(sc, phases=rng.randint(2, 3), between=remove)
    sc.wait(rng.choice((1, 35, 60)))
    sc.schedule()


def fam_config_changes(sc: Scenario) -> None:
    """Config updates between cycles: leaves added, leaves removed (draining while they hold
    apps, gone with their last), max resources and sort policies changed."""
    rng = sc.rng
    for leaf in sc.root.leaves():
        leaf.properties["application.sort.policy"] = rng.choice(("fifo", "fair"))
    sc.freeze_config()
    sc.add_nodes(rng.randint(2, 3))
    extra = 0

    def reconfigure(_phase: int) -> None:
        nonlocal extra
        for _ in range(rng.randint(1, 2)):
            roll = rng.random()
            parents = [q for q in sc.root.walk() if q.children]
            if roll < 0.35:
                extra += 1
                parent = rng.choice(parents)
                parent.children.append(Queue(f"new{extra}", f"{parent.path}.new{extra}"))
            elif roll < 0.6:
                parent = rng.choice(parents)
                leaves = [c for c in parent.children if not c.children]
                if leaves and len(parent.children) > 1:
                    parent.children.remove(rng.choice(leaves))
            elif roll < 0.8:
                q = rng.choice(sc.root.walk()[1:])
                if rng.random() < 0.5:
                    q.resources["max"] = {"vcore": f"{rng.randint(2, 12) * 1000}m"}
                else:
                    q.resources.pop("max", None)
            else:
                for leaf in sc.root.leaves():
                    leaf.properties["application.sort.policy"] = rng.choice(("fifo", "fair"))
        limits_ok(sc.root)
        sc.reconfigure()
        sc.schedule()

    workload(sc, phases=rng.randint(2, 4), between=reconfigure)
    sc.wait(rng.choice((1, 15)))
    sc.schedule()


def limits_ok(q: Queue, cap: int | None = None) -> None:
    """Children's max within their parent's (a config both sides accept)."""
    mine = q.resources.get("max", {}).get("vcore")
    own = int(mine.rstrip("m")) if mine else None
    if cap is not None and own is not None and own > cap:
        q.resources["max"]["vcore"] = f"{cap}m"
        own = cap
    for c in q.children:
        limits_ok(c, own if own is not None else cap)


# --- time-driven ---------------------------------------------------------------------------

def fam_timers(sc: Scenario) -> None:
    """Minutes to hours of log time: asks too big for any free room wait past the 2 s
    reservation delay and reserve (the node ``FitInScore`` picks), Starting apps reach Running
    after 5 minutes, released apps go Completing and Completed 30 s later, dynamic queues
    (a tag rule with create) are cleaned after their last app; waits of 0.5 s to an hour."""
    rng = sc.rng
    if rng.random() < 0.5:
        sc.partition_extra["placementrules"] = [{"name": "tag", "value": "namespace", "create": True},
                                                {"name": "provided"}]
    sc.add_nodes(rng.randint(2, 4))
    leaves = sc.root.leaves()
    ruled = "placementrules" in sc.partition_extra
    for _ in range(rng.randint(3, 7)):
        tags = {"namespace": f"ns{rng.randint(1, 3)}"} if ruled and rng.random() < 0.7 else None
        sc.add_app(rng.choice(leaves), tags)
        for _ in range(rng.randint(1, 3)):
            sc.add_ask(sc.apps[-1], {"resources": {"vcore": rng.choice((1000, 2000, 3000, 5000)),
                                                   "memory": rng.choice((1000, 2000, 4000))}})
        sc.schedule(rng.choice((None, 1)))
        sc.wait(rng.choice((0.5, 1.5, 2.5, 3, 10, 31, 120, 301, 3600)))
        if rng.random() < 0.5 and sc.asks:
            app_id, ask_id = rng.choice(sc.asks)
            sc.lines.append({"type": "allocation.released", "data": {"app_id": app_id, "ask_id": ask_id}})
        sc.schedule()
    finish(sc)


def fam_preemption_delay(sc: Scenario) -> None:
    """Preemption with the default 30 s delay (or 5 s): the preemptors wait in log time, try
    once the delay is over, then every 15 s; waits of 1 s to 2 minutes between cycles. In half
    the scenarios the preemptors come over an hour after the fillers, whose reservations
    (fillers that fit no node) a preemption attempt then cancels under yunikorn-1.9
    (YUNIKORN-3092)."""
    fam_preemption(sc)
    fork = forked(sc.rng)
    if fork.random() < 0.5:
        first_ask = next(i for i, line in enumerate(sc.lines) if line.get("type") == "ask.added")
        first_preemptor = next(i for i, line in enumerate(sc.lines)
                               if i > first_ask and line.get("type") == "app.added")
        sc.lines.insert(first_preemptor, {WAIT: fork.randint(3601, 3900) * 1_000_000})
    delay = sc.rng.choice(("30s", "5s"))
    sc.root.properties["preemption.delay"] = delay
    rng = sc.rng
    out: list[Line] = []
    for line in sc.lines:
        if line.get("type") == "schedule" and rng.random() < 0.6:
            out.append({WAIT: round(rng.choice((1, 4, 6, 16, 31, 45, 120)) * 1_000_000)})
        out.append(line)
    sc.lines = out
    sc.wait(rng.choice((16, 31)))
    sc.schedule()


def fam_churn(sc: Scenario) -> None:
    """Long-running churn: 8-15 phases over hours of log time, each with new apps and asks,
    releases, removed asks and apps, and a cycle."""
    rng = sc.rng
    fork = forked(rng)
    if fork.random() < 0.4:  # yunikorn-1.9's unschedulable-ask backoff (YUNIKORN-3115), inherited from root
        sc.root.properties["application.unschedasks.backoff"] = str(fork.randint(1, 3))
        sc.root.properties["application.unschedasks.backoff.delay"] = fork.choice(("1s", "30s", "5m"))
    sc.add_nodes(rng.randint(2, 4))
    leaves = sc.root.leaves()
    for _ in range(rng.randint(8, 15)):
        sc.wait(rng.choice((0.2, 1, 3, 30, 90, 400, 1800)))
        for _ in range(rng.randint(0, 2)):
            sc.add_app(rng.choice(leaves))
        for _ in range(rng.randint(1, 4)):
            if sc.apps and sc.priorities:
                sc.add_ask(rng.choice(sc.apps))
        for _ in range(rng.randint(0, 3)):
            if sc.asks:
                app_id, ask_id = rng.choice(sc.asks)
                kind = rng.choice(("allocation.released", "allocation.released", "ask.removed"))
                sc.lines.append({"type": kind, "data": {"app_id": app_id, "ask_id": ask_id}})
        if sc.apps and rng.random() < 0.1:
            sc.lines.append({"type": "app.removed", "data": {"app_id": rng.choice(sc.apps)}})
        sc.schedule(rng.choice((None, None, 2)))


def fam_gang(sc: Scenario) -> None:
    """Gang scheduling: apps with task groups (a driver, executors) send their placeholders, then
    real asks that replace them on the same node (some smaller, one more than the placeholders
    now and then); partial gangs (a group no node can hold) wait; Soft and Hard timeouts of 3 s
    to 15 minutes in log time (Soft apps send their real asks again afterwards), releases of
    placeholders and real allocations, sometimes a preemptor taking work back from a queue
    over its guarantee, placeholders included, and sometimes a leaf's maxapplications. A Hard
    gang's real allocations are released before its timeout: yunikorn-core keeps a failed app's
    allocations on their nodes (semantics.md)."""
    rng = sc.rng
    for leaf in sc.root.leaves():
        leaf.properties["application.sort.policy"] = rng.choice(("fifo", "fifo", "stateaware"))
    if rng.random() < 0.5:
        sc.node_policy = {"type": "binpacking"}  # a group's placeholders often share a node
    preempt = rng.random() < 0.3
    leaves = sc.root.leaves()
    if rng.random() < 0.3:  # an Accepted app holding placeholders counts as running here
        rng.choice(leaves).maxapplications = rng.randint(1, 2)
    if preempt:
        sc.root.properties["preemption.delay"] = "1ns"
        for leaf in leaves:
            vcore, memory = rng.randint(1, 3) * 1000, rng.randint(1, 3) * 1000
            leaf.resources["guaranteed"] = {"vcore": f"{vcore}m", "memory": str(memory)}
    sc.add_nodes(rng.randint(2, 4), sizes=(4, 6, 8))
    for _ in range(rng.randint(0, 2)):  # work beside the gangs
        app_id = sc.add_app(rng.choice(leaves))
        for _ in range(rng.randint(1, 2)):
            sc.add_ask(app_id)
    sc.schedule()
    gangs: list[tuple[str, bool, dict[str, tuple[int, dict[str, int]]], list[str]]] = []
    for _ in range(rng.randint(1, 3)):
        groups: dict[str, tuple[int, dict[str, int]]] = {}
        for group in ("driver", "exec")[:rng.randint(1, 2)]:
            size = {"vcore": rng.choice((500, 1000, 2000)), "memory": rng.choice((500, 1000, 2000))}
            groups[group] = (1 if group == "driver" else rng.randint(1, 2), size)
        if rng.random() < 0.25:  # a partial gang: a group no node can hold
            groups["huge"] = (1, {"vcore": 9000, "memory": 1000})
        total = {t: sum(n * size[t] for n, size in groups.values()) for t in ("vcore", "memory")}
        hard = rng.random() < 0.4
        app_id = sc.add_app(rng.choice(leaves))
        sc.lines[-1]["data"].update({"placeholder_ask": total, "gang_scheduling_style": "Hard" if hard else "Soft",
                                     "placeholder_timeout_ms": rng.choice((3_000, 10_000, 40_000, 0))})
        for group, (count, size) in groups.items():
            for _ in range(count):
                sc.add_ask(app_id, {"resources": size, "placeholder": True, "task_group": group})
        gangs.append((app_id, hard, groups, []))
    sc.schedule()
    for app_id, _, groups, real in gangs:
        if rng.random() < 0.25:
            continue  # its real asks come late, or never
        for group, (count, size) in groups.items():
            if group == "huge":
                continue
            for _ in range(rng.randint(1, count + (rng.random() < 0.2))):
                resources = {"vcore": size["vcore"], "memory": rng.choice((size["memory"], size["memory"] // 2))}
                real.append(sc.add_ask(app_id, {"resources": resources, "task_group": group}))
        sc.schedule(rng.choice((None, None, 1)))
    sc.schedule()
    if preempt:
        top = max(sc.priorities)  # the preemptor's ask outranks every other
        sc.priorities.remove(top)
        sc.priorities.append(top)
        app_id = sc.add_app(rng.choice(leaves))
        sc.add_ask(app_id, {"preempt_other": True, "resources": {"vcore": 3000, "memory": 2000}})
        sc.schedule()
    sc.wait(rng.choice((1, 5, 20)))
    for app_id, hard, _, real in gangs:
        if hard:  # before its timeout (see the docstring), allocated or not
            for ask_id in real:
                sc.lines.append({"type": "allocation.released", "data": {"app_id": app_id, "ask_id": ask_id}})
                sc.lines.append({"type": "ask.removed", "data": {"app_id": app_id, "ask_id": ask_id}})
    sc.schedule()
    sc.wait(rng.choice((50, 1000)))  # past the timeouts (1000 s: also past the default 15 minutes)
    sc.schedule()
    for app_id, hard, groups, _ in gangs:
        if not hard and rng.random() < 0.7:  # a resumed app's real asks, sent again
            for group, (_, size) in groups.items():
                if group != "huge":
                    sc.add_ask(app_id, {"resources": size, "task_group": group})
    sc.schedule()
    finish(sc)


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
    "preemption-tree": fam_preemption_tree,
    "placement": fam_placement,
    "acls": fam_acls,
    "user-limits": fam_user_limits,
    "nodes": fam_nodes,
    "app-removed": fam_app_removed,
    "config-changes": fam_config_changes,
    "timers": fam_timers,
    "preemption-delay": fam_preemption_delay,
    "churn": fam_churn,
    "gang": fam_gang,
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
