"""Guarantee-based preemption: YuniKorn v1.5.2 ``preemption.go`` (``Preemptor``), deterministic.

An ask that may preempt (``preempt_other``; not yet triggered; no required node; older than
its leaf's ``preemption.delay``; at an attempt tick, see ``may_attempt``) and that fits no
node, or not its queues' headroom, looks for victims:

1. ``find_victims`` (``Queue.FindEligiblePreemptionVictims``): from the preemption fence root
   (the nearest ancestor with ``preemption.policy: fence``, else root) down, every leaf other
   than the ask's whose policy is not ``disabled`` and whose allocated resources exceed its
   guarantee gives its allocations of equal or lower priority (all of them below a priority
   fence the ask's priority reaches), except required-node ones and ones already preempted.
2. ``check_queue_guarantees``: removing victims can bring the ask's queue within its guarantee.
3. ``victims_on_node`` per schedulable node not held for another ask (``calculateVictimsByNode``),
   victims newest first (``allow_preemption: false`` last); the node with the lowest start index
   wins, then the lowest node id (the no-plugin path of ``checkPreemptionPredicates``).
4. ``additional_victims`` (``calculateAdditionalVictims``) anywhere until the ask's queue is
   within its guarantee; then every victim is marked preempted and the ask reserves the node.

Deterministic adaptations: queues in config order, apps in arrival order, allocations in
allocation order, nodes by id. A victim already preempted is not chosen again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from events.models import AllocationRevoked, OutputData, Preemptor
from events.resources import Resources, add_into, min_permissive
from scheduler.config.profiles import RulesProfile
from scheduler.core.constrained_nodes import node_excludes
from scheduler.core.objects import Allocation, App, Ask, Node
from scheduler.core.partition import PartitionState
from scheduler.core.preemption_queues import (
    BaseQueueSnap,
    QueueSnap,
    duplicate,
    equals_or_empty,
    fit_in,
    live_guaranteed,
    live_max,
    snapshot,
    sub,
    sub_non_negative,
)
from scheduler.core.preemption_victims import Candidates, VictimIndex
from scheduler.core.queues import QueueNode

ATTEMPT_PERIOD_US = 15_000_000  # YuniKorn preemptAttemptFrequency
MAX_ATTEMPTS_PER_QUEUE = 10  # YuniKorn maxPreemptionsPerQueue: attempts per leaf per step


def may_attempt(ask: Ask, leaf: QueueNode, now_us: int, prev_cycle_us: int | None) -> bool:
    """``CheckPreconditions`` in log time: attempts at the first cycle at or after ``created +
    delay`` and then at the first cycle at or after each 15 s tick from there.

    >>> leaf = QueueNode(name="a", path="root.a", parent=None, is_leaf=True, order=0)
    >>> ask = Ask("app", "a", {"vcore": 1}, 0, created_us=0, seq=1, preempt_other=True)
    >>> [may_attempt(ask, leaf, t, p) for t, p in [(29_000_000, None), (30_000_000, 29_000_000),
    ...  (40_000_000, 30_000_000), (45_000_000, 40_000_000)]]
    [False, True, False, True]
    """
    if not ask.preempt_other or ask.preempt_triggered or ask.required_node is not None:
        return False
    base = ask.created_us + leaf.preemption_delay_us
    if now_us < base:
        return False
    if prev_cycle_us is None or prev_cycle_us < base:
        return True
    return (now_us - base) // ATTEMPT_PERIOD_US > (prev_cycle_us - base) // ATTEMPT_PERIOD_US


@dataclass
class NodeTry:
    """One node of ``tryNodes``: its victims in order and the index from which the ask fits."""

    node_id: str
    start_index: int
    victims: list[Allocation]


@dataclass
class Outcome:
    """What one attempt found; ``node`` is None when it failed (``reason`` says where)."""

    fence: str
    queues: dict[str, QueueSnap]
    tried: list[NodeTry] = field(default_factory=list)
    node: Node | None = None
    victims: list[Allocation] = field(default_factory=list)
    reason: str = ""


def fence_root(leaf: QueueNode, priority: int) -> tuple[QueueNode, dict[str, int]]:
    """``findPreemptionFenceRoot``: the fence queue and the ask's priority adjusted at each level."""
    priorities: dict[str, int] = {}
    queue = leaf
    current = priority
    while True:
        current = queue.offset if queue.fence else current + queue.offset
        priorities[queue.path] = current
        if queue.parent is None or queue.preemption_policy == "fence":
            return queue, priorities
        queue = queue.parent


def _collect(part: PartitionState, queue: QueueNode, ask_path: str, priorities: dict[str, int],
             priority: int, fenced: bool, out: dict[str, QueueSnap]) -> None:
    if queue.path == ask_path:
        snapshot(queue, part.preempting, part.cluster_capacity, out)
        return
    if queue.is_leaf:
        if queue.preemption_policy == "disabled":
            return
        if not any(value > 0 for value in queue.allocated.values()):
            return  # nothing allocated: within any guarantee (the test below, without building it)
        guaranteed = min_permissive(live_guaranteed(queue), live_max(queue, part.cluster_capacity))
        if fit_in(guaranteed, queue.allocated, True):
            return  # within its guarantee
        snap = snapshot(queue, part.preempting, part.cluster_capacity, out)
        for app_id in queue.apps:
            for alloc in part.apps[app_id].allocations.values():
                if alloc.required_node is not None or alloc.preempted:
                    continue
                if fenced or alloc.priority <= priority:
                    snap.victims.append(alloc)
        if not snap.victims:
            del out[queue.path]
        return
    for child in queue.children:
        ranked = child_priority(child, priority, priorities)
        if ranked is not None:
            _collect(part, child, ask_path, priorities, ranked[0], fenced or ranked[1], out)


def child_priority(child: QueueNode, priority: int, priorities: dict[str, int]) -> tuple[int, bool] | None:
    """The priority a child queue's candidates are compared at and whether it fences them, or None
    when a fence above the ask's priority keeps the whole subtree out (``findEligiblePreemptionVictims``).
    ``priorities`` holds the priorities up the ask's own lineage (``fence_root``)."""
    on_lineage = priorities.get(child.path)
    if on_lineage is not None:
        return on_lineage, False
    if child.fence:
        if child.offset > priority:
            return None
        return priority, True
    return priority - child.offset, False


def find_victims(part: PartitionState, leaf: QueueNode, ask: Ask) -> tuple[QueueNode, dict[str, QueueSnap]]:
    """``FindEligiblePreemptionVictims``: the fence and the snapshots (with candidate victims) by path."""
    fence, priorities = fence_root(leaf, ask.priority)
    out: dict[str, QueueSnap] = {}
    _collect(part, fence, leaf.path, priorities, priorities[fence.path], False, out)
    return fence, out


def victim_order(alloc: Allocation) -> tuple[bool, int, int]:
    """``sortVictimsForPreemption``: preemptable first, then the newest first, then allocation
    order (where YuniKorn's stable sort keeps Go's map order)."""
    return (not alloc.allow_preemption, -alloc.created_us, alloc.seq)


def full_available(node: Node) -> dict[str, int]:
    """capacity − allocated − occupied with every type kept (Go's ``Sub`` keeps zeros)."""
    return sub(sub(node.capacity, node.allocated), node.occupied)


def released_on_node(owners: list[BaseQueueSnap], head: list[Allocation], available: Resources,
                     request: Resources, skip_undef: bool) -> tuple[int, list[Allocation] | None]:
    """``calculateVictimsByNode``'s second pass, either profile: each victim of ``head`` in turn
    whose queue (its snapshot in ``owners``, fresh copies) gives it up counts as freed on the node.
    Returns those victims and the index of the first whose release lets the request fit the node
    (``FitIn``, or ``FitInMaxUndef`` with ``skip_undef``); (-1, None) when none does."""
    current = dict(available)
    results: list[Allocation] = []
    index = -1
    for i, victim in enumerate(head):
        if owners[i].gives_up(victim.resources, request):
            for name, value in victim.resources.items():
                current[name] = current.get(name, 0) + value
            if index < 0 and fit_in(current, request, skip_undef):
                index = len(results)
            results.append(victim)
    if index < 0:
        return -1, None
    return index, results


def fits_as_is(tried: list[NodeTry], node_id: str, available: Resources, request: Resources, lowest: int) -> int:
    """Once a node needs only its first victim, the nodes after it are only checked for holding the
    ask as they are (a try with no victims, start -1). Returns the lowest start index so far."""
    if fit_in(available, request, False):
        tried.append(NodeTry(node_id, -1, []))
        return -1
    return lowest


def noted_try(tried: list[NodeTry], node_id: str, start: int, victims: list[Allocation] | None, keep_empty: bool,
              lowest: int) -> int:
    """A node's victims (``calculateVictimsByNode``) noted among the nodes tried (none: preempting
    there cannot help; an empty list only when ``keep_empty``). Returns the lowest start index so far."""
    if victims is not None and (victims or keep_empty):
        tried.append(NodeTry(node_id, start, victims))
        return min(lowest, start)
    return lowest


def victims_on_node(queues: dict[str, QueueSnap], leaf_of: Callable[[str], str], leaf: str, request: Resources,
                    available: Resources, candidates: list[Allocation]) -> tuple[int, list[Allocation] | None]:
    """``calculateVictimsByNode``: (start index, victims) — (-1, []) when the ask fits already,
    (-1, None) when preempting here cannot make it fit."""
    if fit_in(available, request, False):
        return -1, []
    if not candidates:
        return -1, None  # nothing to preempt here (the loops below would find no head)
    snaps = duplicate(queues)
    if leaf not in snaps:
        return -1, None
    snaps[leaf].add(request)
    current = dict(available)
    head: list[Allocation] = []
    tail: list[Allocation] = []
    for victim in candidates:
        snap = snaps[leaf_of(victim.app_id)]
        if snap.gives_up(victim.resources, request):
            shortfall = sub_non_negative(request, current)
            grown = dict(current)
            for name, value in victim.resources.items():
                grown[name] = grown.get(name, 0) + value
            if equals_or_empty(shortfall, sub_non_negative(request, grown)):
                snap.add(victim.resources)
                tail.append(victim)
            else:
                current = grown
                head.append(victim)
    head.extend(tail)
    if not head:
        return -1, None
    snaps = duplicate(queues)
    snaps[leaf].add(request)
    return released_on_node([snaps[leaf_of(victim.app_id)] for victim in head], head, available, request, True)


def additional_victims(queues: dict[str, QueueSnap], leaf_of: Callable[[str], str], leaf: str, request: Resources,
                       chosen: list[Allocation], victims: Callable[[], list[Allocation]]) -> list[Allocation] | None:
    """``calculateAdditionalVictims``: more victims (of ``victims()``, every candidate) until the ask's
    queue is within its guarantee."""
    snaps = duplicate(queues)
    ask_queue = snaps.get(leaf)
    if ask_queue is None:
        return None
    ask_queue.add(request)
    seen = {id(v) for v in chosen}
    for victim in chosen:
        snaps[leaf_of(victim.app_id)].remove(victim.resources)
    if ask_queue.within_guaranteed():
        return []  # the loop below would stop before its first candidate
    candidates = [v for v in victims() if id(v) not in seen]
    candidates.sort(key=victim_order)  # compareAllocationLess, then allocation order
    extra: list[Allocation] = []
    for victim in candidates:
        if ask_queue.within_guaranteed():
            break
        snap = snaps[leaf_of(victim.app_id)]
        remaining = ask_queue.remaining_guaranteed()
        snap.remove(victim.resources)
        if snap.at_or_above_guaranteed() and not equals_or_empty(remaining, ask_queue.remaining_guaranteed()):
            extra.append(victim)
        else:
            snap.add(victim.resources)
    return extra if ask_queue.within_guaranteed() else None


def try_preemption(part: PartitionState, app: App, ask: Ask, nodes_tried: bool, exhaustive: bool = False,
                   index: VictimIndex | None = None) -> Outcome:
    """``TryPreemption`` without side effects: the node and victims, or a failed ``Outcome``.

    ``exhaustive`` tries every node (for explain); otherwise nodes that cannot beat the best
    found so far are skipped — the chosen node and victims are the same. With the cycle's
    ``index`` the candidates come from it (``scheduler.core.preemption_victims``: the same
    outcome, but ``queues`` without their victims); without, ``find_victims`` gathers them.
    """
    leaf = app.queue
    own = (app.app_id, ask.ask_id)
    found: Candidates
    node_ids: Iterable[str]
    if index is None:
        fence, queues = find_victims(part, leaf, ask)
        found = Candidates(part, queues, leaf)
        node_ids = sorted(part.nodes)
    else:
        fence, priorities = fence_root(leaf, ask.priority)
        found = index.givers(fence, priorities, leaf)
        queues = found.queues
        node_ids = index.node_order(own)
    outcome = Outcome(fence.path, queues)
    if not found.guarantee_reachable(ask.resources):
        outcome.reason = "guarantee"  # no set of victims brings the ask's queue within its guarantee
        return outcome
    leaf_of, eligible = found.leaf_of, found.eligible
    fits_somewhere = part.index.first_fit(ask.resources) is not None or (
        ask.reserved_node is not None and fit_in(full_available(part.nodes[ask.reserved_node]), ask.resources, False))
    lowest = 1 << 62  # the lowest start index so far (nodes go in id order, so ties keep the first)
    for node_id in node_ids:
        if lowest <= 0 and not exhaustive and (lowest < 0 or nodes_tried or not fits_somewhere):
            # Nothing left can win: (0, a later id) loses to (0, this id), and only a node where
            # the ask fits outright (start index -1, offered when nodes were not tried) could
            # beat a 0. Exact, and the difference between trying 1 and 5,000 nodes.
            break
        node = part.nodes[node_id]
        if not node.schedulable or (node.reserved_for is not None and node.reserved_for != own):
            continue
        if ask.constraints is not None and node_excludes(ask.constraints, node) is not None:
            continue  # where it may not run (scheduler.core.constrained_nodes)
        available = full_available(node)
        if lowest == 0 and not exhaustive:
            lowest = fits_as_is(outcome.tried, node_id, available, ask.resources, lowest)
            continue
        candidates = sorted((a for a in node.allocations.values() if eligible(a)), key=victim_order)
        start, victims = victims_on_node(queues, leaf_of, leaf.path, ask.resources, available, candidates)
        lowest = noted_try(outcome.tried, node_id, start, victims, not nodes_tried, lowest)
    if not outcome.tried:
        outcome.reason = "no-node"
        return outcome
    best = min(outcome.tried, key=lambda t: (t.start_index, t.node_id))
    chosen = best.victims[: best.start_index + 1]
    extra = additional_victims(queues, leaf_of, leaf.path, ask.resources, chosen, found.all_victims)
    if extra is None:
        outcome.reason = "additional"  # the ask's queue would stay outside its guarantee
        return outcome
    if not chosen and not extra:
        outcome.reason = "no-victims"
        return outcome
    outcome.node = part.nodes[best.node_id]
    outcome.victims = chosen + extra
    return outcome


def record_preemption(part: PartitionState, app: App, ask: Ask, node: Node, victims: list[Allocation],
                      cycle: int, out: list[OutputData] | None, now_us: int = 0) -> None:
    """Mark the victims preempted (one ``allocation.revoked`` each) and reserve the node for the ask.

    A victim's resources stay allocated, counted as "preempting" in its queue, until the
    resource manager releases it. An ask already holding another node keeps that reservation
    (YuniKorn 1.5's ``reserve`` refuses a second one); it may take any node that frees up.
    Under yunikorn-1.9 the reservation moves to the preemption's node (``ask.unreserved``,
    reason ``preemption``, then ``ask.reserved``).
    """
    preemptor = Preemptor(app_id=app.app_id, ask_id=ask.ask_id, queue=app.queue.path)
    for victim in victims:
        victim.preempted = True
        owner = part.apps[victim.app_id]
        add_into(part.preempting.setdefault(owner.queue.path, {}), victim.resources)
        part.form.app_changed(owner.app_id)
        if out is not None:
            out.append(AllocationRevoked.model_construct(
                app_id=victim.app_id, ask_id=victim.ask_id, node_id=victim.node_id, reason="preempted",
                decision_id=victim.decision_id, preemptor=preemptor))
    ask.preempt_triggered = True
    if ask.reserved_node is None:
        part.reserve(app, ask, node, cycle, "preemption", out, now_us)
    elif ask.reserved_node != node.node_id and part.profile is RulesProfile.YUNIKORN_1_9:
        # v1.9.0 partition.go:reserve moves an ask's reservation ("fixing reservations"):
        # the node it held is unreserved and the node its victims free reserved.
        part.unreserve(app, ask, "preemption", out)
        part.reserve(app, ask, node, cycle, "preemption", out, now_us)


def fold(partitions: Mapping[str, PartitionState], data: AllocationRevoked) -> None:
    """Apply a recorded ``allocation.revoked`` with reason ``preempted`` or ``quota-preempted`` to the state.

    Marks the victim preempted (its leaf's preempting resources grow) and the preemptor's ask
    as having preempted, as ``record_preemption`` did; the ``ask.reserved`` that follows folds
    with ``scheduler.core.reservations.fold``. Raises KeyError when the victim or the
    preemptor does not exist.
    """
    for part in partitions.values():
        owner = part.apps.get(data.app_id)
        victim = owner.allocations.get(data.ask_id) if owner is not None else None
        if owner is None or victim is None:
            continue
        # ``quota-preempted`` (scheduler.core.quota_preemption) has no preemptor
        preemptor = part.apps[data.preemptor.app_id].asks[data.preemptor.ask_id] if data.preemptor else None
        victim.preempted = True
        add_into(part.preempting.setdefault(owner.queue.path, {}), victim.resources)
        part.form.app_changed(owner.app_id)
        if preemptor is not None:
            preemptor.preempt_triggered = True
        return
    raise KeyError(f"no allocation {data.app_id}/{data.ask_id}")
