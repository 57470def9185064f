"""Engine snapshots: the whole scheduler state as a JSON-ready dict, and back.

A snapshot holds the facts (config text, classes, nodes, apps with their asks and
allocations, timers, counters, seen input ids); every cache is rebuilt through the same
mutation functions the live core uses, so a restored engine is indistinguishable from
the one that was saved (tests compare digests and the decisions that follow).
"""

from __future__ import annotations

import heapq
from typing import Any

from events.models import Constraints
from events.seen import SeenIds
from scheduler.config import load_config
from scheduler.config.profiles import RulesProfile
from scheduler.core.engine import Engine
from scheduler.core.node_constraints import Taint, compile_constraints
from scheduler.core.objects import Allocation, App, Ask, Gang, Node, TaskGroup
from scheduler.core.priorityclass import PriorityClass
from scheduler.core.state import _Timer

# The snapshot schema: bump it whenever ``dump``'s form changes (a field added, moved or
# re-meant), not when decisions change — snapshots are valid across rules versions.
# Columns added at the end of a row with defaults when absent (a gang's, node constraints) need no bump.
SNAPSHOT_VERSION = 3  # 2: seen input ids grouped by source, in log order; 3: reservations, draining queues


def _ask(a: Ask) -> list[Any]:
    row = [a.ask_id, a.resources, a.priority, a.created_us, a.seq, a.required_node, a.priority_class, a.tags,
           a.preempt_other, a.allow_preemption, a.preempt_triggered]
    # A gang's ask: two more columns (rows without them: defaults); its constraints after them.
    if a.placeholder or a.task_group or a.constraints is not None:
        row += [a.placeholder, a.task_group]
    if a.constraints is not None:  # where it may run: its event's form (rows without it: anywhere)
        row.append(a.constraints.wire.model_dump(mode="json"))
    return row


def _alloc(al: Allocation) -> list[Any]:
    row = [al.ask_id, al.node_id, al.resources, al.priority, al.decision_id, al.seq, al.created_us,
           al.allow_preemption, al.required_node, al.preempted]
    if al.placeholder or al.task_group or al.host_ports:
        row += [al.placeholder, al.task_group]
    if al.host_ports:  # the host ports it binds (rows without them: none)
        row.append([list(p) for p in al.host_ports])
    return row


def _gang(g: Gang) -> dict[str, Any]:
    """An app's gang (its placeholders' total is re-derived from its allocations)."""
    return {"placeholder_ask": g.placeholder_ask, "hard": g.hard, "timeout_us": g.timeout_us, "timer_us": g.timer_us,
            "groups": {name: [t.count, t.replaced, t.timed_out] for name, t in sorted(g.groups.items())},
            "allocating_accepted": g.allocating_accepted}


def _load_gang(data: dict[str, Any]) -> Gang:
    gang = Gang(data["placeholder_ask"], data["hard"], data["timeout_us"], timer_us=data["timer_us"],
                allocating_accepted=data.get("allocating_accepted", False))
    gang.groups = {name: TaskGroup(*counts) for name, counts in data["groups"].items()}
    return gang


def _node_constraints(n: Node) -> list[Any]:
    """A node's labels and taints, two more columns when it has any (rows without them: none)."""
    if not n.labels and not n.taints:
        return []
    return [n.labels, [[t.key, t.value, t.effect] for t in n.taints]]


def _load_ask(app_id: str, row: list[Any]) -> Ask:
    """An ask from ``_ask`` output; rows of older snapshots lack the preemption fields (defaults)."""
    ask = Ask(app_id, *row[:8])
    if len(row) > 8:
        ask.preempt_other, ask.allow_preemption, ask.preempt_triggered = row[8:11]
    if len(row) > 11:
        ask.placeholder, ask.task_group = row[11:13]
    if len(row) > 13:
        ask.constraints = compile_constraints(Constraints.model_validate(row[13]))  # its event's form
    return ask


def _load_alloc(app_id: str, row: list[Any]) -> Allocation:
    """An allocation from ``_alloc`` output (older rows: preemption fields at their defaults)."""
    alloc = Allocation(app_id, *row[:12])
    if len(row) > 12:
        alloc.host_ports = [(p[0], p[1], p[2]) for p in row[12]]
    return alloc


def dump(engine: Engine) -> dict[str, Any]:
    """The engine's state as plain data (call between cycles: no pending outputs)."""
    if engine.pending_outputs:
        raise ValueError("snapshot taken mid-cycle (outputs pending)")
    state = engine.state
    partitions = {}
    for name, part in state.partitions.items():
        partitions[name] = {
            "allocation_seq": part.allocation_seq,
            "draining": part.draining,
            # yunikorn-1.9's quota preemption timers that are set (their delays come from the config)
            **({"quota_starts": starts} if (starts := {path: clock.start_us for path, clock in
                                                        sorted(part.quota_clocks.items())
                                                        if clock.start_us is not None}) else {}),
            "reservations": [
                [app_id, ask_id, node_id, part.apps[app_id].asks[ask_id].reserved_cycle,
                 # its log time, for yunikorn-1.9's reservation timeout (only there: 1.5 snapshots as before)
                 *([part.apps[app_id].asks[ask_id].reserved_us] if part.profile is RulesProfile.YUNIKORN_1_9 else [])]
                for (app_id, ask_id), node_id in part.reservations.items()
            ],
            "nodes": [
                [n.node_id, n.capacity, n.occupied, n.schedulable, n.attributes, n.seq, *_node_constraints(n)]
                for n in sorted(part.nodes.values(), key=lambda n: n.seq)
            ],
            "apps": [
                {
                    "id": a.app_id, "queue": a.queue.path, "user": a.user, "groups": a.groups, "tags": a.tags,
                    "submit_us": a.submit_us, "seq": a.seq, "state": a.state, "since_us": a.state_since_us,
                    "stateaware_disabled": a.stateaware_disabled,
                    **({"gang": _gang(a.gang)} if a.gang is not None else {}),
                    # yunikorn-1.9's unschedulable-ask backoff, only while set (other snapshots as before)
                    **({"backoff_until_us": a.backoff_until_us} if a.backoff_until_us else {}),
                    "asks": [_ask(x) for x in sorted(a.asks.values(), key=lambda x: x.seq)],
                    "allocations": [_alloc(x) for x in sorted(a.allocations.values(), key=lambda x: x.seq)],
                }
                for a in sorted(part.apps.values(), key=lambda a: a.seq)
            ],
        }
    return {
        "version": SNAPSHOT_VERSION,
        "source": engine.source,
        "config_yaml": state.config.yaml,
        "cycle": state.cycle,
        "cycle_time_us": state.cycle_time_us,
        "seq": state.seq,
        "seen": engine.seen.grouped(),  # sources least recently active first: the order the total forgets in
        "classes": [[c.name, c.value, c.global_default, c.preemption_policy]
                    for c in state.priority_classes.classes.values()],
        "timers": [[t.deadline_us, t.app_seq, t.app_id, t.partition, t.state, t.since_us] for t in state._timers],
        "partitions": partitions,
    }


def load(data: dict[str, Any]) -> Engine:
    """Rebuild an engine from ``dump`` output. Raises ValueError on a version mismatch."""
    if data.get("version") != SNAPSHOT_VERSION:
        raise ValueError(f"snapshot version {data.get('version')} is not {SNAPSHOT_VERSION}")
    engine = Engine(load_config(data["config_yaml"]), source=data["source"])
    state = engine.state
    state.cycle = data["cycle"]
    state.cycle_time_us = data.get("cycle_time_us")
    state.seq = data["seq"]
    engine.seen = SeenIds.from_grouped(data["seen"])
    for name, value, default, policy in data["classes"]:
        state.priority_classes.classes[name] = PriorityClass(name, value, default, policy)
    for pname, pdata in data["partitions"].items():
        part = state.partitions[pname]
        if pdata.get("draining"):
            part.restore_draining(pdata["draining"])
        for node_id, capacity, occupied, schedulable, attributes, seq, *more in pdata["nodes"]:
            node = Node(node_id, pname, capacity, occupied, schedulable, attributes, seq)
            if more:
                node.labels = more[0]
                node.taints = [Taint(*t) for t in more[1]]
            part.add_node(node)
        for a in pdata["apps"]:
            leaf, _ = part.ensure_queue(a["queue"])  # a dynamic queue is created again
            app = App(
                app_id=a["id"], partition=pname, queue=leaf, user=a["user"], groups=a["groups"],
                tags=a["tags"], submit_us=a["submit_us"], seq=a["seq"], state_since_us=a["since_us"],
                stateaware_disabled=a["stateaware_disabled"],
            )
            if "gang" in a:
                app.gang = _load_gang(a["gang"])
            part.add_app(app)
            part.back_off(app, a.get("backoff_until_us", 0))
            for row in a["asks"]:
                part.add_ask(app, _load_ask(app.app_id, row))
            allocations = [_load_alloc(app.app_id, row) for row in a["allocations"]]
            part.restore_allocations(app, allocations, a["state"])
        for app_id, ask_id, node_id, cycle, *since in pdata["reservations"]:
            app = part.apps[app_id]
            part.reserve(app, app.asks[ask_id], part.nodes[node_id], cycle, "", None, since[0] if since else 0)
        part.restore_done()
        for path, start_us in pdata.get("quota_starts", {}).items():
            part.quota_clocks[path].start_us = start_us
        part.allocation_seq = pdata["allocation_seq"]
    state._timers = [_Timer(*t) for t in data["timers"]]
    heapq.heapify(state._timers)
    return engine
