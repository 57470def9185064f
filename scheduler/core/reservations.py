"""Reservations (YuniKorn 1.5 ``reservation.go``, ``application.go:tryNodes``/``tryReservedAllocate``).

* An ask that passed its queue's headroom but fits no node, and has waited longer than
  the reservation delay (2 s of log time since its ``ask.added``), reserves the node it
  fits best: among schedulable, unreserved nodes whose capacity could hold it, the lowest
  ``fit_in_score`` (``reserve_candidates``: YuniKorn's ``ask.FitInScore(node.available)``, the
  fraction of each available type the ask would leave free), the
  first in node order on ties. The step ends there (``ask.reserved``, reason ``no-fit``).
* An ask with a ``required_node`` tries only that node, schedulable or not; when that node
  is not registered, the app's turn ends there (YuniKorn 1.5). A node held
  for other, non-required asks is freed for it first (``ask.unreserved``, reason
  ``required-node``); when it then does not fit, it reserves the node (reason
  ``required-node``) and the step ends. While a required-node reservation holds the node,
  the app's turn ends at that ask (``tryAllocate``'s ``cancelReservations`` refuses).
* A reserved node leaves the node index: no other ask is placed there.
* Reserved asks go first in every step (``reserved_step``): queues in sorted order, in a
  leaf the apps with reservations in sort order (an Accepted app held by
  maxapplications waits), an app's reserved asks in ask order; each that fits its queue's
  headroom is tried on its own node, then — unless it needs that node — on every other
  unreserved node in order. Allocated, the reservation ends (``ask.unreserved``, reason
  ``allocated``); ``ask.removed``, ``app.removed`` and ``node.removed`` end it too.
* A reserved required-node ask that does not fit its node preempts there once
  (``scheduler.core.required_node_preemption``): its victims are revoked and it keeps the node.

Deterministic where YuniKorn iterates maps: apps and asks in their sort orders.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field

from events.models import AskReserved, AskUnreserved
from events.resources import Resources, fits
from scheduler.config.profiles import RulesProfile
from scheduler.core.asks import Shape, shape_of
from scheduler.core.constrained_nodes import first_admitting, node_excludes
from scheduler.core.objects import Allocation, App, Ask, Node
from scheduler.core.partition import PartitionState
from scheduler.core.queues import QueueNode
from scheduler.core.required_node_preemption import required_node_victims
from scheduler.core.sorting import sort_queues

RESERVATION_DELAY_US = 2_000_000
RESERVATION_WAIT_TIMEOUT_US = 60 * 60 * 1_000_000  # yunikorn-1.9 application.go reservationWaitTimeout


def reservation_stale(ask: Ask, now_us: int) -> bool:
    """yunikorn-1.9: a reservation the wait timeout (YUNIKORN-3219) and preemption (YUNIKORN-3092)
    may end — of an ask without a required node, made more than ``reservationWaitTimeout`` ago (log time)."""
    return ask.required_node is None and now_us - ask.reserved_us > RESERVATION_WAIT_TIMEOUT_US

HeadroomCheck = Callable[[PartitionState, QueueNode, Resources], bool]
HeldCheck = Callable[[App], bool]
ChildrenInOrder = Callable[[QueueNode], Iterable[QueueNode]]


def _sorted_children(queue: QueueNode) -> list[QueueNode]:
    return sort_queues(queue.children, queue.sort_priority)


@dataclass
class Step:
    """What one step found: an allocation (``node``) or a reservation (``reserve``) for an ask.

    ``cancel`` lists the asks whose reservations end first (a required-node ask takes their node).
    """

    app: App
    ask: Ask
    node: Node
    reserve: str | None = None  # reservation reason; None for an allocation
    cancel: list[tuple[App, Ask]] = field(default_factory=list)
    victims: list[Allocation] = field(default_factory=list)  # preempted for it (reason ``preemption``)
    replaces: Allocation | None = None  # the gang placeholder this real ask replaces (scheduler.core.gang)

    # Written out (as ``Ask.__init__``): compiled, a native ``__init__``, one per step.
    def __init__(self, app: App, ask: Ask, node: Node, reserve: str | None = None,
                 cancel: list[tuple[App, Ask]] | None = None, victims: list[Allocation] | None = None,
                 replaces: Allocation | None = None) -> None:
        self.app = app
        self.ask = ask
        self.node = node
        self.reserve = reserve
        self.cancel = [] if cancel is None else cancel
        self.victims = [] if victims is None else victims
        self.replaces = replaces


def required_node_step(part: PartitionState, app: App, ask: Ask) -> Step | None:
    """The required-node branch of ``tryAllocate``: a Step, or None (the app's turn ends)."""
    assert ask.required_node is not None
    node = part.nodes.get(ask.required_node)
    if node is None:
        return None  # not registered (yet): the app's turn ends (YuniKorn 1.5 tryAllocate returns nil)
    if not fits(ask.resources, node.capacity):
        # YuniKorn tries to reserve it (and fails: Node.Reserve needs the capacity) on every
        # step, so the app's turn ends here; it does not also stall the rest (docs/semantics.md)
        return None
    cancel: list[tuple[App, Ask]] = []
    if node.reserved_for is not None:
        held_app = part.apps[node.reserved_for[0]]
        held = held_app.asks[node.reserved_for[1]]
        if held.required_node is None:
            cancel.append((held_app, held))
        elif part.profile is not RulesProfile.YUNIKORN_1_9 or ask.reserved_node == node.node_id:
            return None  # 1.5: a required-node ask holds it (maybe this one): the app's turn ends
        else:
            # yunikorn-1.9 (``node.go:Reserve``: "allow multiple required node reservations on
            # the same node"): the other required-node asks keep it, and this one reserves it
            # too, fit or not (``tryRequiredNode``: ``tryNode`` refuses a node reserved for
            # another ask, ``node.go:preAllocateCheck``)
            return Step(app, ask, node, "required-node")
    if fits_node(ask.resources, node):
        return Step(app, ask, node, None, cancel)
    return Step(app, ask, node, "required-node", cancel)


def required_node_passes(part: PartitionState, ask: Ask) -> bool:
    """Under yunikorn-1.9, whether the app goes on to its next ask where ``required_node_step``
    found nothing: the required node is not registered, or already reserved for this very ask
    (``application.go:tryRequiredNode`` returns nil and ``tryAllocate`` continues; YuniKorn
    1.5 ended the app's turn there)."""
    assert ask.required_node is not None
    node = part.nodes.get(ask.required_node)
    return node is None or ask.reserved_node == node.node_id


ReservationKey = tuple[str, str]  # (app id, ask id), as in ``PartitionState.reservations``


def _reserved_by_app(part: PartitionState, keys: Iterable[ReservationKey]) -> dict[str, list[Ask]]:
    """The reserved asks named by ``keys``, per app, in each app's ask order."""
    by_app: dict[str, list[Ask]] = {}
    apps = part.apps
    for app_id, ask_id in keys:
        asks = by_app.get(app_id)
        if asks is None:
            asks = by_app[app_id] = []
        asks.append(apps[app_id].asks[ask_id])
    for asks in by_app.values():
        if len(asks) > 1:
            asks.sort(key=Ask.sort_key)
    return by_app


class _HeldByApp:
    """Reserved asks per app, each app's in ask order when asked for."""

    __slots__ = ("held",)

    def __init__(self, held: dict[str, dict[str, Ask]]) -> None:
        self.held = held

    def get(self, app_id: str) -> list[Ask] | None:
        asks = self.held.get(app_id)
        if asks is None:
            return None
        ordered = list(asks.values())
        if len(ordered) > 1:
            ordered.sort(key=Ask.sort_key)
        return ordered


def _leaves_on_path(part: PartitionState, app_ids: Iterable[str]) -> set[str]:
    """The queues from root down to the leaves of ``app_ids``."""
    paths: set[str] = set()
    for app_id in app_ids:
        q: QueueNode | None = part.apps[app_id].queue
        while q is not None and q.path not in paths:
            paths.add(q.path)
            q = q.parent
    return paths


def reserved_step(part: PartitionState, fits_headroom: HeadroomCheck, held: HeldCheck,
                  unfit: set[Shape] | None = None, only: Iterable[ReservationKey] | None = None,
                  children_in_order: ChildrenInOrder = _sorted_children) -> Step | None:
    """``tryReservedAllocate``: the first reserved ask that can be allocated now, or None.

    Nothing changes while it searches, so a request shape no unreserved node holds
    (``first_fit`` found none) is not searched for again in the same call. A plain reserved
    ask that did not fit its node is noted with the node's ``version`` (``Ask.fit_checked``,
    a cache): while the node is unchanged and its shape fits no free node, it is passed
    over. ``unfit`` may bring shapes already known to fit no unreserved node (the cycle's ``unplaceable``:
    within a cycle nodes only fill up or leave the index until a reservation ends); the
    shapes found here are added to it.

    ``only`` restricts the search to these reservations (default: all). The cycle passes
    the reservations not yet tried since a node last came back: every other one failed
    then and fails again (see ``scheduler.core.cycle``), so the first of ``only`` in walk
    order that succeeds is the first of all. ``children_in_order`` gives a parent's children
    in ``sort_queues`` order (default: sorted afresh; the cycle passes the orders it keeps).
    """
    if not part.reservations:
        return None
    by_app: _HeldByApp
    on_path: Container[str]
    if only is None:  # every reservation: the partition keeps them per app and per queue
        by_app = _HeldByApp(part.reserved_asks)
        on_path = part.reserved_under
    else:
        some: dict[str, dict[str, Ask]] = {}
        apps = part.apps
        for app_id, ask_id in only:
            asks = some.get(app_id)
            if asks is None:
                asks = some[app_id] = {}
            asks[ask_id] = apps[app_id].asks[ask_id]
        if not some:
            return None
        by_app = _HeldByApp(some)
        on_path = _leaves_on_path(part, some)
    return _walk(part, part.root, on_path, by_app, fits_headroom, held, set() if unfit is None else unfit,
                 children_in_order)


def _walk(part: PartitionState, queue: QueueNode, on_path: Container[str], by_app: _HeldByApp,
          fits_headroom: HeadroomCheck, held: HeldCheck, unfit: set[Shape], children_in_order: ChildrenInOrder,
          ) -> Step | None:
    if queue.is_leaf:
        return _try_leaf(part, queue, by_app, fits_headroom, held, unfit)
    for child in children_in_order(queue):
        if child.path in on_path:
            found = _walk(part, child, on_path, by_app, fits_headroom, held, unfit, children_in_order)
            if found is not None:
                return found
    return None


def fits_node(request: Resources, node: Node) -> bool:
    """``fits(request, node.available())`` without building the available dict."""
    capacity, allocated, occupied = node.capacity, node.allocated, node.occupied
    for name, want in request.items():
        if want > capacity.get(name, 0) - allocated.get(name, 0) - occupied.get(name, 0):
            return False
    return True


def _try_leaf(part: PartitionState, leaf: QueueNode, by_app: _HeldByApp, fits_headroom: HeadroomCheck,
              held: HeldCheck, unfit: set[Shape]) -> Step | None:
    headroom: dict[Shape, bool] = {}  # the leaf's headroom per request shape (nothing changes in a search)
    nodes = part.nodes
    for _, app_id in part.candidates[leaf.path]:
        reserved = by_app.get(app_id)
        if reserved is None:
            continue
        app = part.apps[app_id]
        if held(app):
            continue
        limits = part.limits  # the user's/group's headroom and maxapplications too (ugm)
        if limits is not None and app.state == "Accepted" and limits.blocking_apps(app) is not None:
            continue
        ok: list[tuple[Ask, Shape]] = []
        for a in reserved:
            shape = shape_of(a.resources)
            if a.required_node is None and shape in unfit and a.reserved_node is not None \
                    and nodes[a.reserved_node].version == a.fit_checked:
                continue  # it did not fit this very node, and no free node holds its shape: it fails again
            room = headroom.get(shape)
            if room is None:
                room = headroom[shape] = fits_headroom(part, leaf, a.resources)
            if room and (limits is None or limits.fits(app, a.resources)):
                ok.append((a, shape))
        for ask, _ in ok:
            assert ask.reserved_node is not None
            node = part.nodes[ask.reserved_node]
            if ask.required_node is None and not node.schedulable:
                continue  # a cordoned node is not used for an ordinary ask (docs/semantics.md)
            admitted = ask.constraints is None or node_excludes(ask.constraints, node) is None
            if admitted and fits_node(ask.resources, node):
                return Step(app, ask, node)
            if ask.required_node is None:
                ask.fit_checked = node.version
            elif admitted and not ask.preempt_triggered:
                victims = required_node_victims(node, ask)  # YuniKorn tryRequiredNodePreemption
                if victims:
                    return Step(app, ask, node, "required-node", victims=victims)
        for ask, shape in ok:
            if ask.required_node is not None:
                continue
            if shape in unfit:
                continue
            if ask.constraints is not None:  # its failure says nothing of the shape
                admitting = first_admitting(part, ask.resources, ask.constraints)
                if admitting is not None:
                    return Step(app, ask, admitting)
                continue
            node_id = part.index.first_fit(ask.resources)  # unreserved nodes only
            if node_id is not None:
                return Step(app, ask, part.nodes[node_id])
            unfit.add(shape)
    return None


def fold(partitions: Mapping[str, PartitionState], data: AskReserved | AskUnreserved, cycle: int,
         now_us: int = 0) -> None:
    """Apply a recorded ``ask.reserved``/``ask.unreserved`` (of cycle ``cycle``) to the state.

    Folding a cycle's recorded outputs in order leaves the same reservations as running it.
    Raises KeyError when the app, ask or node it names does not exist.
    """
    for part in partitions.values():
        app = part.apps.get(data.app_id)
        if app is not None and data.ask_id in app.asks:
            ask = app.asks[data.ask_id]
            if isinstance(data, AskReserved):
                part.reserve(app, ask, part.nodes[data.node_id], cycle, data.reason, None, now_us)
            else:
                part.unreserve(app, ask, data.reason, None)
            return
    raise KeyError(f"no pending ask {data.app_id}/{data.ask_id}")
