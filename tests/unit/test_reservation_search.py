"""Property tests: the reservation searches' shortcuts equal a from-scratch computation.

``reserved_step`` searches each request shape once per call and caches a leaf's headroom
per shape; ``fits_node`` and ``ReserveCandidates`` read a node's availability without
building it. Each is compared here, at every point of random reservation-heavy runs, with
the plain computation: ``node.available()``, every ask searched, nodes in from-scratch order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import native
from events.codec import encode_output
from events.models import CycleCompleted, OutputData
from events.resources import fits
from scheduler.config import load_config
from scheduler.core import cycle as cycle_module
from scheduler.core.asks import shape_of
from scheduler.core.cycle import (
    CycleMemo,
    _hopeless,
    commit_step,
    cycle_memo,
    fits_queue_headroom,
    held_by_max_applications,
    next_step,
    place,
)
from scheduler.core.objects import Ask, Node
from scheduler.core.partition import PartitionState
from scheduler.core.required_node_preemption import required_node_victims
from scheduler.core.reservations import Step, fits_node, reserved_step
from scheduler.core.reserve_candidates import ReserveCandidates, fit_in_score
from scheduler.core.sorting import sort_queues
from scheduler.simulation.simulate import Simulation
from tests.oracles.node_order import sorted_node_ids
from tests.unit.test_core_properties import APPS, CONFIG, NODES, SETUP, line
from tests.unit.test_core_reservations import _times

ASKS = [f"s{i}" for i in range(8)]
# Few shapes (so one call meets the same shape again), some required nodes, dense in cycles.
shaped_ask = st.builds(
    lambda a, k, v, n: {"type": "ask.added", "data": {"app_id": a, "ask_id": k, "resources": {"vcore": v, "memory": 10},
                                                      **({"required_node": n} if n else {})}},
    st.sampled_from(APPS), st.sampled_from(ASKS), st.sampled_from((1000, 1500, 2500, 3500, 4500)),
    st.one_of(st.none(), st.none(), st.none(), st.sampled_from([*NODES, "m1"])))
churn = st.one_of(  # releases free room on nodes, so a reserved ask may fit elsewhere later
    st.builds(lambda a, k: {"type": "allocation.released", "data": {"app_id": a, "ask_id": k}},
              st.sampled_from(APPS), st.sampled_from([*ASKS, "fill"])),
    st.builds(lambda a, k: {"type": "ask.removed", "data": {"app_id": a, "ask_id": k}},
              st.sampled_from(APPS), st.sampled_from(ASKS)),
)
node_change = st.builds(
    lambda n, v, s: {"type": "node.updated", "data": {"node_id": n, "capacity": {"vcore": v, "memory": 4000},
                                                      "schedulable": s}},
    st.sampled_from([*NODES[:3], "m0", "m1", "m2"]), st.sampled_from((1000, 3000, 4000, 5000)), st.booleans())
lines = st.lists(st.one_of(shaped_ask, shaped_ask, shaped_ask, churn, churn, node_change,
                           st.just({"type": "schedule"}), line), min_size=10, max_size=50)
quantities = st.dictionaries(st.sampled_from(("vcore", "memory", "gpu")), st.integers(-3, 6), max_size=3)


def _node(capacity: dict[str, int], allocated: dict[str, int], occupied: dict[str, int]) -> Node:
    return Node("n", "default", capacity, occupied, True, {}, 0, allocated=allocated)


@settings(max_examples=300, deadline=None)
@given(quantities, quantities, quantities, quantities)
def test_availability_read_in_place_equals_available(request: dict[str, int], capacity: dict[str, int],
                                                     allocated: dict[str, int], occupied: dict[str, int]) -> None:
    """Missing types, zero and negative quantities, types used but not in the capacity."""
    node = _node(capacity, allocated, occupied)
    assert fits_node(request, node) == fits(request, node.available())


def _reference_reserved_step(part: PartitionState) -> Step | None:
    """``tryReservedAllocate`` with nothing remembered: every reserved ask's headroom and search."""
    def walk(queue: Any) -> Step | None:
        if queue.is_leaf:
            return leaf_step(queue)
        for child in sort_queues(queue.children, queue.sort_priority):
            found = walk(child)
            if found is not None:
                return found
        return None

    def leaf_step(leaf: Any) -> Step | None:
        for app in part.ordered_apps(leaf):
            reserved = [a for a in app.sorted_asks if a.reserved_node is not None]
            if not reserved or held_by_max_applications(app):
                continue
            limits = part.limits
            if limits is not None and app.state == "Accepted" and limits.blocking_apps(app) is not None:
                continue
            ok = [a for a in reserved if fits_queue_headroom(part, leaf, a.resources)
                  and (limits is None or limits.fits(app, a.resources))]
            for ask in ok:
                node = part.nodes[ask.reserved_node or ""]
                if ask.required_node is None and not node.schedulable:
                    continue
                if fits(ask.resources, node.available()):
                    return Step(app, ask, node)
                if ask.required_node is not None and not ask.preempt_triggered:
                    victims = required_node_victims(node, ask)
                    if victims:
                        return Step(app, ask, node, "required-node", victims=victims)
            for ask in ok:
                if ask.required_node is None:
                    node_id = part.index.first_fit(ask.resources)
                    if node_id is not None:
                        return Step(app, ask, part.nodes[node_id])
        return None

    return walk(part.root) if part.reservations else None


def _reference_node_to_reserve(part: PartitionState, request: dict[str, int]) -> str | None:
    """Lowest ``fit_in_score`` of ``available()`` over schedulable unreserved nodes in from-scratch order."""
    usable = {n.node_id: (n.capacity, n.available()) for n in part.nodes.values()
              if n.schedulable and n.reserved_for is None}
    best, best_score = None, float("inf")
    for node_id in sorted_node_ids(part.index.policy, part.index.weights, usable):
        capacity, available = usable[node_id]
        if fits(request, capacity) and fit_in_score(request, available) < best_score:
            best, best_score = node_id, fit_in_score(request, available)
    return best


def _summary(step: Step | None) -> tuple[object, ...] | None:
    if step is None:
        return None
    return (step.app.app_id, step.ask.ask_id, step.node.node_id, step.reserve, [v.ask_id for v in step.victims])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines)
def test_reservation_searches_equal_a_from_scratch_search(body: list[dict[str, Any]]) -> None:
    sim = Simulation(load_config(CONFIG))
    fill = [{"type": "ask.added", "data": {"app_id": a, "ask_id": "fill", "resources": {"vcore": 2500, "memory": 10}}}
            for a in APPS]  # more than the three nodes hold: later asks wait, reserve, and meet reserved nodes
    compared = 0
    small = [{"type": "node.added", "data": {"node_id": f"m{i}", "capacity": {"vcore": 1000 * (i + 1), "memory": 4000}}}
             for i in range(3)]  # unequal nodes: one shape fits where another does not
    for obj in _times([*SETUP, *small, *fill, *body]):  # one second apart: asks outlive the reservation delay
        sim.feed(orjson.dumps(obj))
        for part in sim.engine.state.partitions.values():
            found = reserved_step(part, fits_queue_headroom, held_by_max_applications)
            assert _summary(found) == _summary(_reference_reserved_step(part))
            for app in part.apps.values():
                for ask in app.sorted_asks:
                    expected = _reference_node_to_reserve(part, ask.resources)
                    shape = shape_of(ask.resources)
                    scanned = ReserveCandidates().best(part.index, part.nodes, shape, ask.resources)
                    kept = part.reserve_candidates.best(part.index, part.nodes, shape, ask.resources)  # across cycles
                    assert (scanned.node_id if scanned else None) == expected
                    assert (kept.node_id if kept else None) == expected
                    compared += 1
    assert compared > 0


def _touched(memo: CycleMemo, asks: Iterable[Ask]) -> tuple[object, ...]:
    """What a ``place`` that did something would leave changed: preemption attempts, asks' reservation marks."""
    return set(memo.preempt_tried), memo.attempts_left, [(a.reserved_node, a.fit_checked) for a in asks]


def _check_hopeless_apps(part: PartitionState, memo: CycleMemo, now_us: int) -> None:
    """Each app's shape counts equal a count of its asks, and where the walk would skip an
    app as hopeless, ``place`` fails every one of its asks (and so changes nothing)."""
    for app in part.apps.values():
        asks = app.sorted_asks
        shapes, not_plain = asks.shape_counts()  # counted once, then kept up to date by add and remove
        assert shapes == Counter(shape_of(a.resources) for a in asks)
        assert not_plain == sum(1 for a in asks if a.required_node is not None or a.preempt_other)
        if asks and not_plain == 0 and _hopeless(part, shapes, memo):
            before = _touched(memo, asks)
            assert all(place(part, app, ask, memo, now_us) is None for ask in asks)
            assert _touched(memo, asks) == before


def _checked_cycle(sim: Simulation, now_us: int, max_allocations: int | None) -> None:
    """``run_cycle``'s loop, checking every step's reserved search against a full one.

    The cycle searches only the reservations it has not tried since a node last came
    back (``CycleMemo.reservations_tried``). Before each step the full search (every
    reservation, nothing remembered) runs on the same state: when it finds a step, the
    cycle's step must be that one; when it finds none, the cycle's restricted search must
    have found none either. And for every pending ask the memo's reservation candidate
    (``ReserveCandidates``, kept by the partition across steps and cycles) must be the node a from-scratch scan picks.
    """
    state = sim.engine.state
    state.cycle += 1
    out: list[OutputData] = []
    state.fire_timers(now_us, out)
    prev_cycle_us, state.cycle_time_us = state.cycle_time_us, now_us
    decisions = 0
    for name in sorted(state.partitions):
        part = state.partitions[name]
        memo = cycle_memo(state, name, prev_cycle_us)
        while max_allocations is None or decisions < max_allocations:
            for app in part.apps.values():  # the memo's heaps against the scan, at every step
                for ask in app.sorted_asks:
                    node = part.reserve_candidates.best(part.index, part.nodes, shape_of(ask.resources), ask.resources)
                    assert (node.node_id if node else None) == _reference_node_to_reserve(part, ask.resources)
            _check_hopeless_apps(part, memo, now_us)
            full = reserved_step(part, fits_queue_headroom, held_by_max_applications)
            untried = len(part.reservations) - memo.reservations_tried
            found = next_step(part, memo, now_us)
            if full is not None:
                assert _summary(found) == _summary(full)
            elif untried:
                assert memo.reservations_tried == len(part.reservations)  # searched them, found nothing
            if found is None:
                break
            if found.reserve is None:
                decisions += 1
            memo = commit_step(state, part, found, decisions, now_us, out, memo)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines)
def test_a_cycle_searches_only_untried_reservations_and_finds_the_same_step(body: list[dict[str, Any]]) -> None:
    checked, engine = Simulation(load_config(CONFIG)), Simulation(load_config(CONFIG))
    fill = [{"type": "ask.added", "data": {"app_id": a, "ask_id": "fill", "resources": {"vcore": 2500, "memory": 10}}}
            for a in APPS]
    small = [{"type": "node.added", "data": {"node_id": f"m{i}", "capacity": {"vcore": 1000 * (i + 1), "memory": 4000}}}
             for i in range(3)]
    for obj in _times([*SETUP, *small, *fill, *body]):
        raw = orjson.dumps(obj)
        if obj["type"] == "schedule":
            now = checked.last_time_us = checked._next_time(obj)
            _checked_cycle(checked, now, (obj.get("data") or {}).get("max_allocations"))
            completed = engine.feed(raw)[-1].data
            assert isinstance(completed, CycleCompleted)
            assert checked.engine.digest() == completed.state_digest  # the checked loop is the engine's cycle
        else:
            checked.feed(raw)
            engine.feed(raw)


preempting_ask = st.builds(  # asks that may preempt are not judged by shape: the walk never skips their app
    lambda a, k, v: {"type": "ask.added", "data": {"app_id": a, "ask_id": k, "resources": {"vcore": v, "memory": 10},
                                                   "preempt_other": True, "priority": 50}},
    st.sampled_from(APPS), st.sampled_from(ASKS), st.sampled_from((1000, 2500, 4500)))


@pytest.mark.skipif(native.BUILD.compiled, reason="the compiled core calls _hopeless directly, past any patch; "
                    "`make test` runs this file on the pure-Python core too (tests/pure_selection.py)")
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(shaped_ask, shaped_ask, shaped_ask, preempting_ask, churn, node_change,
                          st.just({"type": "schedule"}), line), min_size=10, max_size=50))
def test_skipping_hopeless_apps_changes_no_output(body: list[dict[str, Any]]) -> None:
    """Cycles that skip the apps whose every shape is hopeless write what cycles that try
    every ask write (``_hopeless`` patched to say no), byte for byte, digests included."""
    fill = [{"type": "ask.added", "data": {"app_id": a, "ask_id": "fill", "resources": {"vcore": 2500, "memory": 10}}}
            for a in APPS]
    small = [{"type": "node.added", "data": {"node_id": f"m{i}", "capacity": {"vcore": 1000 * (i + 1), "memory": 4000}}}
             for i in range(3)]
    raws = [orjson.dumps(obj) for obj in _times([*SETUP, *small, *fill, *body])]
    skipping = Simulation(load_config(CONFIG))
    expected = [encode_output(o) for raw in raws for o in skipping.feed(raw)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cycle_module, "_hopeless", lambda part, shapes, memo: False)
        trying = Simulation(load_config(CONFIG))
        assert [encode_output(o) for raw in raws for o in trying.feed(raw)] == expected


def test_kept_heaps_stay_small_and_right_through_long_churn() -> None:
    """A shape asked once, then thousands of node changes: its heap never passes twice the
    node classes (plus 64), answers as a scan does all along, and is forgotten once its
    backlog outgrows the classes while nobody asks; any number of shapes is kept (no cap
    to fall off: 300 shapes asked round after round all stay kept)."""
    sim = Simulation(load_config(CONFIG))
    nodes = [{"type": "node.added", "data": {"node_id": f"c{i}", "capacity": {"vcore": 4000, "memory": 4000}}}
             for i in range(3)]
    for obj in _times([*SETUP, *nodes]):
        sim.feed(orjson.dumps(obj))
    part = sim.engine.state.partitions["default"]
    kept = part.reserve_candidates
    request = {"vcore": 3000, "memory": 10}
    limit = 2 * len(part.index) + 64  # every node its own class at most

    def answer(req: dict[str, int]) -> str | None:
        node = kept.best(part.index, part.nodes, shape_of(req), req)
        return node.node_id if node else None

    assert answer(request) == _reference_node_to_reserve(part, request)
    most = 0
    for i in range(300):
        small = {"vcore": 1000, "memory": 10}
        churn: list[dict[str, Any]] = [
            {"type": "ask.added", "data": {"app_id": APPS[0], "ask_id": f"k{i}", "resources": small}},
            {"type": "schedule"}, {"type": "allocation.released", "data": {"app_id": APPS[0], "ask_id": f"k{i}"}}]
        for obj in _times(churn):
            sim.feed(orjson.dumps(obj))
            most = max(most, kept.entries())
        if i < 100:  # asked: caught up, kept
            assert answer(request) == _reference_node_to_reserve(part, request)
    assert 0 < most <= limit + 1
    assert kept.entries() == 0 and kept.shapes_kept() == 0  # not asked for the last 200 rounds: forgotten
    assert answer(request) == _reference_node_to_reserve(part, request)  # and built again when asked
    others = [{"vcore": v, "memory": 10} for v in range(1, 300)]
    for round_ in range(3):  # far more shapes than the old cap of 64: all stay kept and right
        for other in others:
            assert answer(other) == _reference_node_to_reserve(part, other)
        assert kept.shapes_kept() == len(others) + 1
        churn = [{"type": "ask.added", "data": {"app_id": APPS[0], "ask_id": f"r{round_}", "resources": small}},
                 {"type": "schedule"}]
        for obj in _times(churn):
            sim.feed(orjson.dumps(obj))
    assert answer(request) == _reference_node_to_reserve(part, request)


def test_a_node_removed_and_added_again_leaves_no_current_entry_behind() -> None:
    """Its old entries must stay stale: the node that comes back is another (here too small to
    hold the request), whatever number of changes it has had itself."""
    sim = Simulation(load_config(CONFIG))

    def feed(*objs: dict[str, Any]) -> None:
        for obj in _times(list(objs)):
            sim.feed(orjson.dumps(obj))

    def added(node_id: str, vcore: int) -> dict[str, Any]:
        return {"type": "node.added", "data": {"node_id": node_id, "capacity": {"vcore": vcore, "memory": 4000}}}

    feed(added("c0", 4000), added("c1", 8000))
    part = sim.engine.state.partitions["default"]
    request = {"vcore": 3000, "memory": 10}

    def kept() -> str | None:
        node = part.reserve_candidates.best(part.index, part.nodes, shape_of(request), request)
        return node.node_id if node else None

    assert kept() == _reference_node_to_reserve(part, request) == "c0"  # the tighter fit
    feed({"type": "node.removed", "data": {"node_id": "c0"}}, added("c0", 1000))
    assert kept() == _reference_node_to_reserve(part, request) == "c1"


node_churn = st.one_of(  # nodes leave, come back with another capacity, or appear too small for most shapes
    st.builds(lambda n: {"type": "node.removed", "data": {"node_id": n}}, st.sampled_from([*NODES, "m0", "m1"])),
    st.builds(lambda n, v: {"type": "node.added", "data": {"node_id": n, "capacity": {"vcore": v, "memory": 4000}}},
              st.sampled_from([*NODES, "m0", "m1"]), st.sampled_from((500, 2500, 4000, 9000))),
)
probe_requests = [{"vcore": v, "memory": 10} for v in (1, 1000, 1500, 2500, 3500, 4500, 8000, 20000)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(shaped_ask, shaped_ask, churn, node_change, node_churn, st.just({"type": "schedule"}),
                          line), min_size=10, max_size=60),
       st.lists(st.sampled_from(range(len(probe_requests))), min_size=1, max_size=4))
def test_node_classes_and_lazy_heaps_equal_a_scan_after_every_event(
        body: list[dict[str, Any]], probes: list[int]) -> None:
    """The kept candidates (node classes, heaps that take in changes only when asked) give
    the from-scratch scan's node after every event, for shapes asked after each event, now
    and then (a heap that lags, is caught up or forgotten) or never until the end; shapes
    bigger than every node included."""
    sim = Simulation(load_config(CONFIG))
    small = [{"type": "node.added", "data": {"node_id": f"m{i}", "capacity": {"vcore": 1000 * (i + 1), "memory": 4000}}}
             for i in range(3)]
    fill = [{"type": "ask.added", "data": {"app_id": a, "ask_id": "fill", "resources": {"vcore": 2500, "memory": 10}}}
            for a in APPS]
    for step, obj in enumerate(_times([*SETUP, *small, *fill, *body])):
        sim.feed(orjson.dumps(obj))
        part = sim.engine.state.partitions["default"]
        for i, p in enumerate(probes):
            if step % (i + 1):
                continue  # the i-th probe looks every (i + 1)-th event: its heap lags in between
            request = probe_requests[p]
            node = part.reserve_candidates.best(part.index, part.nodes, shape_of(request), request)
            assert (node.node_id if node else None) == _reference_node_to_reserve(part, request)
            assert part.reserve_candidates.exhausted(shape_of(request), part.nodes) == (node is None)
    part = sim.engine.state.partitions["default"]
    for request in probe_requests:
        node = part.reserve_candidates.best(part.index, part.nodes, shape_of(request), request)
        assert (node.node_id if node else None) == _reference_node_to_reserve(part, request)
