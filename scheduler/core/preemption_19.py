"""Guarantee-based preemption under yunikorn-1.9: yunikorn-core v1.9.0 ``preemption.go`` (``Preemptor``), deterministic.

The same attempt as ``scheduler.core.preemption`` (who may preempt and when: ``may_attempt``;
the outcome: ``record_preemption``), with v1.9.0's victim selection. Queues are judged by
their remaining guarantee type by type (``QueueSnap19.remaining``,
``scheduler.core.preemption_queues_19``), and the steps differ from 1.5 as follows:

1. **Fence** (``findPreemptionFenceRoot``): from the ask's leaf up, the first queue with
   ``preemption.policy: fence``, or root, or — new — the first whose usage plus the ask
   exceeds its max in some type (the max layered down from root, root's being the cluster;
   YUNIKORN-3241). A leaf that is its own fence has nothing to take from.
2. **Candidates** (``FindEligiblePreemptionVictims``): in every leaf under the fence other
   than the ask's whose policy is not ``disabled`` and whose remaining guarantee is not
   all ≥ 0 (nil — no guarantee at or above it — counts as over), each allocation that
   shares a resource type with the ask, has no required node, is not being preempted,
   and whose priority the ask reaches (as 1.5).
3. **Guarantee check** (``checkPreemptionQueueGuarantees``): the ask's queue's remaining
   guarantee already holds the ask (``FitInActual``), or, with the ask added, removing the
   candidates leaves no type of the ask below zero in it (``isAskQueueUnderGuaranteed``).
4. **Per node** (``calculateVictimsByNode``), nodes schedulable, not held for another ask
   and — new — whose capacity holds the ask (YUNIKORN-2820): a candidate is usable when
   its queue's remaining guarantee, before it goes, is nil or below zero in a type of the
   ask (``isVictimQueueOverGuaranteed``: per type, YUNIKORN-3113; ancestors included,
   3240); and the ask's queue must have room for it: its remaining guarantee holds the
   victim (``FitInActual``), and the victim is counted in the ask's queue from then on.
   The first candidate the ask's queue cannot hold ends the node's list (Go ``break``).
   Victims that shrink the ask's shortfall on the node go first, the others after; the
   second pass re-checks each victim's queue and finds the start index (``FitIn``).
5. **Node choice** as 1.5: the lowest start index, then the lowest node id.
6. **Additional victims** (``calculateAdditionalVictims``): the other candidates in victim
   order, each taken while the ask's queue can hold it and its remaining guarantee
   changes, until the first it cannot hold; with any taken, the ask's queue must end with
   no type of the ask below zero, else the attempt fails.
7. **Final victims** (``TryPreemption``): unless the ask already fits the node, only
   victims on that node count; they are taken in order while the ask is still strictly
   greater than their total (``StrictlyGreaterThanOnlyExisting``), and the attempt fails
   when even all of them leave a shortfall.

Deterministic adaptations (Go iterates maps here): candidates in configuration order, apps
in arrival order, allocations in allocation order; the victim order (``victim_order``) ends
in allocation order; the per-node and additional loops stop at the first victim the ask's
queue cannot hold, so that order decides where they stop when creation times tie.

Reservations (``initWorkingState``, YUNIKORN-3092): with ``now_us`` given (the cycle's log
time, where yunikorn reads ``time.Since``), an attempt that passed the guarantee check
cancels every reservation, on a node not held for the ask itself, of an ask with a lower
priority than the ask's, no required node and no preemption of its own, made more than 60
minutes before (``stale_reservations``); the outcome lists them (``cancelled``: the cycle
ends them whether the attempt then preempts or not) and a node whose every reservation is
cancelled is usable for the attempt. Any other node held for another ask is skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from events.resources import Resources
from scheduler.core.constrained_nodes import node_excludes
from scheduler.core.objects import Allocation, App, Ask, Node
from scheduler.core.partition import PartitionState
from scheduler.core.preemption import (
    NodeTry,
    child_priority,
    fits_as_is,
    full_available,
    noted_try,
    released_on_node,
    victim_order,
)
from scheduler.core.preemption_queues import duplicate, fit_in, sub_non_negative
from scheduler.core.preemption_queues_19 import (
    QueueSnap19,
    equals_or_empty_19,
    fenced_by_max,
    fit_in_actual,
    greater_only_existing,
    live_max_19,
    negative_in,
    none_negative,
    snapshot_19,
)
from scheduler.core.preemption_victims_19 import Givers19, VictimIndex19
from scheduler.core.queues import QueueNode
from scheduler.core.reservations import reservation_stale

LeafOf = Callable[[Allocation], str]  # a candidate's leaf (its snapshot's path)

# Why a candidate was or was not taken (the trace explain reads; docs/semantics.md#yunikorn-19).
TAKEN = "taken"
TAKEN_LAST = "taken-last-resort"  # usable, but did not shrink the shortfall (1.5's tail too)
KEPT_GUARANTEE = "kept-victim-queue-within-guarantee"  # YUNIKORN-3113/3240
KEPT_ASK_QUEUE = "kept-ask-queue-full"  # the ask's queue cannot hold it: the list ends (YUNIKORN-2769)
KEPT_NO_CHANGE = "kept-no-guarantee-change"
NOT_REACHED = "not-reached"


@dataclass
class Outcome19:
    """What one 1.9 attempt found; ``node`` is None when it failed (``reason`` says where).

    ``trace`` is filled only when asked (explain): (app, ask, verdict) per candidate the
    chosen node's first pass and the additional pass looked at, in order.
    """

    fence: str
    fence_by: str  # "policy", "root" or "max"
    queues: dict[str, QueueSnap19]
    tried: list[NodeTry] = field(default_factory=list)
    node: Node | None = None
    victims: list[Allocation] = field(default_factory=list)
    collected: list[Allocation] = field(default_factory=list)  # node's and additional victims before the last filter
    reason: str = ""
    trace: list[tuple[str, str, str, str]] = field(default_factory=list)  # (stage, app, ask, verdict)
    cancelled: list[tuple[App, Ask]] = field(default_factory=list)  # stale reservations the attempt ends


def fence_root_19(part: PartitionState, leaf: QueueNode, ask: Ask) -> tuple[QueueNode, dict[str, int], str]:
    """``findPreemptionFenceRoot``: the fence queue, the ask's priority at each level, and why it is the fence."""
    priorities: dict[str, int] = {}
    queue = leaf
    current = ask.priority
    while True:
        current = queue.offset if queue.fence else current + queue.offset
        priorities[queue.path] = current
        if queue.parent is None:
            return queue, priorities, "root"
        if queue.preemption_policy == "fence":
            return queue, priorities, "policy"
        projected = dict(queue.allocated)
        for name, value in ask.resources.items():
            projected[name] = projected.get(name, 0) + value
        if fenced_by_max(live_max_19(queue, part.cluster_capacity), projected):
            return queue, priorities, "max"
        queue = queue.parent


def _collect(part: PartitionState, queue: QueueNode, ask: Ask, ask_snap: QueueSnap19, priorities: dict[str, int],
             priority: int, fenced: bool, out: dict[str, QueueSnap19]) -> None:
    """``findEligiblePreemptionVictims``: depth first, in configuration order."""
    if queue.path == ask_snap.path:
        return
    if queue.is_leaf:
        if queue.preemption_policy == "disabled":
            return
        had = set(out)
        snap = snapshot_19(queue, part.preempting, part.cluster_capacity, out, ask_snap)
        remaining = snap.remaining()
        if remaining is None or not none_negative(remaining):
            wanted = ask.resources
            for app_id in queue.apps:
                for alloc in part.apps[app_id].allocations.values():
                    if alloc.required_node is not None or alloc.preempted:
                        continue
                    if not any(name in alloc.resources for name in wanted):
                        continue  # no resource type in common with the ask (``MatchAny``)
                    if fenced or alloc.priority <= priority:
                        snap.victims.append(alloc)
        if not snap.victims:
            # Go deletes the leaf's snapshot here and prunes unused ancestors at the end
            # (``prunePreemptionSnapshots``): neither could give anything.
            for path in set(out) - had:
                del out[path]
        return
    for child in queue.children:
        ranked = child_priority(child, priority, priorities)
        if ranked is not None:
            _collect(part, child, ask, ask_snap, priorities, ranked[0], fenced or ranked[1], out)


def find_victims_19(part: PartitionState, leaf: QueueNode, ask: Ask) -> tuple[QueueNode, str, dict[str, QueueSnap19]]:
    """``FindEligiblePreemptionVictims``: the fence, why, and the snapshots (with candidates) by path."""
    fence, priorities, fence_by = fence_root_19(part, leaf, ask)
    out: dict[str, QueueSnap19] = {}
    ask_snap = snapshot_19(leaf, part.preempting, part.cluster_capacity, out, None)
    snap: QueueSnap19 | None = ask_snap
    while snap is not None and snap.parent is not None:  # every queue of the ask's lineage but root
        snap.ask_queue = ask_snap
        snap = snap.parent
    _collect(part, fence, ask, ask_snap, priorities, priorities[fence.path], False, out)
    return fence, fence_by, out


def guarantee_reachable(queues: dict[str, QueueSnap19], leaf: str, request: Resources) -> bool:
    """``checkPreemptionQueueGuarantees``."""
    copy = duplicate(queues)
    current = copy[leaf]
    before = current.remaining()
    if before is not None and fit_in_actual(before, request):
        return True
    current.add(request)
    # Go removes the candidates one by one, queue by queue (map order), and stops once the test
    # holds. Removing a candidate only raises its ancestors' remaining guarantees (whether one
    # is nil depends on guarantees alone), so the ask's queue's remaining guarantee only rises:
    # the test holds after some candidate exactly when it holds after all of them.
    any_candidate = False
    for snap in copy.values():
        for alloc in snap.victims:
            snap.remove(alloc.resources)
            any_candidate = True
    if not any_candidate:
        return False
    remaining = current.remaining()
    return remaining is not None and not negative_in(request, remaining)


def _take(snap: QueueSnap19, ask_queue: QueueSnap19, request: Resources,
          victim: Allocation) -> tuple[str, dict[str, int] | None]:
    """One candidate of the first pass or the additional pass: (verdict, the ask queue's remaining
    guarantee before it). ``TAKEN``: gone from its queue and counted in the ask's; otherwise
    put back — ``KEPT_ASK_QUEUE`` ends the list (Go's ``break``)."""
    # ``GetPreemptableResource`` ≥ 0 is also required, and always holds: it keeps only the
    # types above their guarantee, and a minimum of positive values stays positive.
    if not snap.gives_up(victim.resources, request):
        return KEPT_GUARANTEE, None
    room = ask_queue.remaining()
    if room is None or not fit_in_actual(room, victim.resources):
        snap.add(victim.resources)
        return KEPT_ASK_QUEUE, room
    ask_queue.add(victim.resources)
    return TAKEN, room


def _untake(snap: QueueSnap19, ask_queue: QueueSnap19, victim: Allocation) -> None:
    """Undo a ``TAKEN`` of ``_take``."""
    ask_queue.remove(victim.resources)
    snap.add(victim.resources)


def _stops_at(trace: list[tuple[str, str, str, str]] | None, stage: str, victim: Allocation,
              rest: Iterator[Allocation], verdict: str) -> bool:
    """Whether a walk stops at ``victim`` (the ask's queue cannot hold it), with its verdict
    traced and, on a stop, the candidates after it (``rest``) traced as not reached."""
    if trace is not None:
        trace.append((stage, victim.app_id, victim.ask_id, verdict))
    if verdict != KEPT_ASK_QUEUE:
        return False
    if trace is not None:
        trace.extend((stage, v.app_id, v.ask_id, NOT_REACHED) for v in rest)
    return True


def victims_on_node_19(queues: dict[str, QueueSnap19], leaf_of: LeafOf, leaf: str, request: Resources,
                       available: Resources, candidates: list[Allocation],
                       trace: list[tuple[str, str, str, str]] | None = None) -> tuple[int, list[Allocation] | None]:
    """``calculateVictimsByNode`` (v1.9.0): (start index, victims) — (-1, []) when the ask fits
    already, (-1, None) when preempting here cannot make it fit."""
    if fit_in(available, request, False):
        return -1, []
    snaps = duplicate(queues)
    ask_queue = snaps[leaf]
    current = dict(available)
    head: list[Allocation] = []
    tail: list[Allocation] = []
    walk = iter(candidates)
    for victim in walk:
        snap = snaps[leaf_of(victim)]
        verdict, _ = _take(snap, ask_queue, request, victim)
        if verdict == TAKEN:
            grown = dict(current)
            for name, value in victim.resources.items():
                grown[name] = grown.get(name, 0) + value
            if equals_or_empty_19(sub_non_negative(request, current), sub_non_negative(request, grown)):
                _untake(snap, ask_queue, victim)  # the shortfall on the node did not shrink
                tail.append(victim)
                verdict = TAKEN_LAST
            else:
                current = grown
                head.append(victim)
        if _stops_at(trace, "node", victim, walk, verdict):
            break
    head.extend(tail)
    if not head:
        return -1, None
    snaps = duplicate(queues)
    return released_on_node([snaps[leaf_of(victim)] for victim in head], head, available, request, False)


def additional_victims_19(queues: dict[str, QueueSnap19], leaf_of: LeafOf, leaf: str, request: Resources,
                          chosen: list[Allocation], in_victim_order: Callable[[set[int]], Iterator[Allocation]],
                          trace: list[tuple[str, str, str, str]] | None = None) -> list[Allocation] | None:
    """``calculateAdditionalVictims`` (v1.9.0): more victims, or None when the ask's queue would
    end below zero in a type of the ask. ``in_victim_order(skip)``: every candidate whose id is
    not in ``skip``, in victim order (``compareAllocationLess``, then allocation order)."""
    snaps = duplicate(queues)
    ask_queue = snaps[leaf]
    for victim in chosen:
        snaps[leaf_of(victim)].remove(victim.resources)
    walk = in_victim_order({id(v) for v in chosen})
    extra: list[Allocation] = []
    for victim in walk:
        snap = snaps[leaf_of(victim)]
        verdict, room = _take(snap, ask_queue, request, victim)
        if verdict == TAKEN:
            if equals_or_empty_19(room, ask_queue.remaining()):
                _untake(snap, ask_queue, victim)  # the ask's queue's remaining guarantee did not change
                verdict = KEPT_NO_CHANGE
            else:
                extra.append(victim)
        if _stops_at(trace, "additional", victim, walk, verdict):
            break
    if extra:
        final = ask_queue.remaining()
        if final is None or negative_in(request, final):
            return None
    return extra


def final_victims(node: Node, available: Resources, request: Resources,
                  victims: list[Allocation]) -> list[Allocation] | None:
    """``TryPreemption``'s last filter: the victims actually preempted, or None on a shortfall."""
    fits = fit_in(available, request, False)
    total: dict[str, int] = {}
    out: list[Allocation] = []
    for victim in victims:
        if not fits and victim.node_id != node.node_id:
            continue  # victims elsewhere do not help an ask that does not fit this node
        if greater_only_existing(request, total):
            out.append(victim)
        for name, value in victim.resources.items():
            total[name] = total.get(name, 0) + value
    if greater_only_existing(request, total):
        return None
    return out


def stale_reservations(part: PartitionState, own: tuple[str, str], ask: Ask, now_us: int,
                       among: list[tuple[str, str]] | None = None) -> tuple[list[tuple[App, Ask]], set[str]]:
    """The reservations an attempt of ``ask`` cancels (``initWorkingState``, YUNIKORN-3092) and the
    nodes they free: on each node not held for ``own`` (the ask's (app, ask) key), the
    reservations of asks with a lower priority than ``ask``, no required node and no
    preemption triggered, more than 60 minutes old in log time. A node is freed when every
    reservation on it is cancelled (yunikorn's ``leftCount``). ``among``: a list holding every
    reservation old enough at ``now_us`` without a required node (the cycle's ``expiring``):
    only their nodes are read (no other node can lose a reservation)."""
    cancelled: list[tuple[App, Ask]] = []
    freed: set[str] = set()
    if not part.reservations:
        return cancelled, freed
    reserved = part.reservations
    held_on = ({n for k, n in reserved.items() if k != own} if among is None else
               {reserved[k] for k in among if k != own and k in reserved})
    for node_id in sorted(held_on):
        node = part.nodes[node_id]
        keys = node.reservations()
        if own in keys:
            continue
        left = len(keys)
        for app_id, ask_id in keys:
            held_app = part.apps[app_id]
            held = held_app.asks[ask_id]
            if held.preempt_triggered:
                continue
            if held.priority < ask.priority and reservation_stale(held, now_us):
                cancelled.append((held_app, held))
                left -= 1
        if left == 0:
            freed.add(node_id)
    return cancelled, freed


def _usable(node: Node, own: tuple[str, str], ask: Ask, freed: set[str]) -> bool:
    """``initWorkingState``'s node filter: schedulable, not held unless (also) for this ask
    (``isReservedForAllocation``: under 1.9 several required-node asks may hold a node) or
    freed by the attempt's cancelled reservations, capacity holds the ask; and, as under 1.5,
    a node the ask's constraints admit (``scheduler.core.constrained_nodes``)."""
    if not node.schedulable or (node.reserved_for is not None and own not in node.reservations()
                                and node.node_id not in freed):
        return False
    if ask.constraints is not None and node_excludes(ask.constraints, node) is not None:
        return False
    return fit_in(node.capacity, ask.resources, False)


class Scratch19:
    """One attempt's candidates gathered from scratch (``find_victims_19``), asked as ``Givers19`` is."""

    def __init__(self, queues: dict[str, QueueSnap19]) -> None:
        self.queues = queues
        self._ids = {id(v) for snap in queues.values() for v in snap.victims}

    def eligible(self, alloc: Allocation) -> bool:
        """``alloc`` is a candidate of this attempt."""
        return id(alloc) in self._ids

    def in_victim_order(self, skip: set[int]) -> Iterator[Allocation]:
        """Every candidate whose id is not in ``skip``, in victim order."""
        candidates = [v for snap in self.queues.values() for v in snap.victims if id(v) not in skip]
        candidates.sort(key=victim_order)  # compareAllocationLess, then allocation order
        return iter(candidates)


def try_preemption_19(part: PartitionState, app: App, ask: Ask, nodes_tried: bool, exhaustive: bool = False,
                      explain: bool = False, now_us: int | None = None, index: VictimIndex19 | None = None,
                      stale_among: list[tuple[str, str]] | None = None) -> Outcome19:
    """``TryPreemption`` (v1.9.0) without side effects: the node and victims, or a failed ``Outcome19``.

    ``exhaustive`` tries every node (for explain); otherwise nodes that cannot beat the best
    found so far are skipped — the chosen node and victims are the same. ``explain`` fills
    the trace. With ``now_us``, the stale reservations the attempt cancels once past the
    guarantee check are in ``cancelled`` (the caller ends them) and their freed nodes are tried;
    ``stale_among``: the only reservations that can be stale (``stale_reservations``). ``index``:
    the cycle's candidates and node order (``preemption_victims_19``) instead of gathering them
    from scratch — the same outcome, but for ``queues``' snapshots, which then hold no victim lists.
    """
    leaf = app.queue
    own = (app.app_id, ask.ask_id)
    request = ask.resources
    apps = part.apps

    def leaf_of(victim: Allocation) -> str:
        return apps[victim.app_id].queue.path

    found: Scratch19 | Givers19
    if index is None:
        fence, fence_by, queues = find_victims_19(part, leaf, ask)
        found = Scratch19(queues)
        reachable = guarantee_reachable(queues, leaf.path, request)
    else:
        fence, priorities, fence_by = fence_root_19(part, leaf, ask)
        found = index.givers(fence, priorities, leaf, ask)
        queues = found.queues
        reachable = found.guarantee_reachable(request)
    outcome = Outcome19(fence.path, fence_by, queues)
    if not reachable:
        outcome.reason = "guarantee"
        return outcome
    freed: set[str] = set()
    if now_us is not None:
        outcome.cancelled, freed = stale_reservations(part, own, ask, now_us, stale_among)
    node_ids: Iterable[str] = sorted(part.nodes) if index is None else index.node_order(ask, freed)
    eligible = found.eligible
    fits_somewhere = part.index.first_fit(request) is not None or (
        ask.reserved_node is not None and fit_in(full_available(part.nodes[ask.reserved_node]), request, False)) or any(
        fit_in(full_available(part.nodes[n]), request, False) for n in freed)
    lowest = 1 << 62
    for node_id in node_ids:
        if lowest <= 0 and not exhaustive and (lowest < 0 or nodes_tried or not fits_somewhere):
            break  # nothing left can win (as in ``preemption.try_preemption``)
        node = part.nodes[node_id]
        if not _usable(node, own, ask, freed):
            continue
        available = full_available(node)
        if lowest == 0 and not exhaustive:
            lowest = fits_as_is(outcome.tried, node_id, available, request, lowest)
            continue
        candidates = sorted((a for a in node.allocations.values() if eligible(a)), key=victim_order)
        start, victims = victims_on_node_19(queues, leaf_of, leaf.path, request, available, candidates)
        lowest = noted_try(outcome.tried, node_id, start, victims, not nodes_tried, lowest)
    if not outcome.tried:
        outcome.reason = "no-node"
        return outcome
    best = min(outcome.tried, key=lambda t: (t.start_index, t.node_id))
    node = part.nodes[best.node_id]
    chosen = best.victims[: best.start_index + 1]
    trace = outcome.trace if explain else None
    if trace is not None:
        candidates = sorted((a for a in node.allocations.values() if eligible(a)), key=victim_order)
        victims_on_node_19(queues, leaf_of, leaf.path, request, full_available(node), candidates, trace)
    extra = additional_victims_19(queues, leaf_of, leaf.path, request, chosen, found.in_victim_order, trace)
    if extra is None:
        outcome.reason = "additional"
        return outcome
    if not chosen and not extra:
        outcome.reason = "no-victims"
        return outcome
    outcome.collected = chosen + extra
    final = final_victims(node, full_available(node), request, outcome.collected)
    if final is None:
        outcome.reason = "shortfall"
        return outcome
    outcome.node = node
    outcome.victims = final
    return outcome
