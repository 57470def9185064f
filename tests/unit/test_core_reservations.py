"""Reservations (YuniKorn 1.5 ``reservation.go``, ``application.go:tryNodes``/``tryReservedAllocate``,
``partition.go:tryReservedAllocate``): when an ask reserves a node, what others do, when it ends."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.codec import output_to_dict
from events.models import AllocationDecided, AskReserved, AskUnreserved, CycleCompleted
from scheduler.config import load_config
from scheduler.core.reservations import fold
from scheduler.core.reserve_candidates import fit_in_score
from scheduler.core.snapshot import dump, load
from scheduler.simulation.simulate import Simulation
from tests.sim import SCHEDULE, app, ask, node, placements, run
from tests.unit.test_core_properties import APPS, CONFIG, NODES, SETUP, check_invariants, line


def at(seconds: float, obj: dict[str, Any]) -> dict[str, Any]:
    """The line with an event time ``seconds`` after the epoch."""
    whole, frac = divmod(round(seconds * 1_000_000), 1_000_000)
    return {**obj, "time": f"1970-01-01T00:00:{whole:02d}.{frac:06d}Z"}


def release(app_id: str, ask_id: str) -> dict[str, Any]:
    return {"type": "allocation.released", "data": {"app_id": app_id, "ask_id": ask_id}}


def reservations(outputs: list[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    return [(o["type"], o["data"]["ask_id"], o["data"]["node_id"], o["data"]["reason"])
            for o in outputs if o["type"] in ("ask.reserved", "ask.unreserved")]


# n1 keeps 2000 vcore free, n2 1000: a 3000-vcore ask fits neither and fits n1 best.
BUSY = [at(0, node("n1", vcore=4000, memory=8000)), at(0, node("n2", vcore=4000, memory=8000)),
        at(0, app("fill")), at(0, ask("fill", "f1", vcore=2000)), at(0, ask("fill", "f2", vcore=3000)),
        at(0, SCHEDULE), at(0.5, app("big")), at(0.5, ask("big", "b", vcore=3000))]


def test_an_ask_that_fits_nowhere_reserves_the_best_node_after_the_delay() -> None:
    """YuniKorn ``tryNodes``: no node fits and ``askAge > reservationDelay`` (2 s) → reserve the node
    with the lowest ``FitInScore``; younger asks do not reserve."""
    outputs, state = run([*BUSY, at(2.5, SCHEDULE), at(2.6, SCHEDULE)])
    assert reservations(outputs) == [("ask.reserved", "b", "n1", "no-fit")]
    assert state["nodes"]["n1"]["reserved_for"] == "big/b" and "reserved_for" not in state["nodes"]["n2"]


def test_the_reserved_node_is_the_one_the_ask_would_leave_least_free() -> None:
    """YuniKorn ``application.go:tryNodes`` scores each node with
    ``node.GetFitInScoreForAvailableResource(ask)`` = ``ask.FitInScore(node.available)``
    (``resources.go:FitInScore``): over the node's available types, (available - asked) /
    available where the node has more, 0 where it is short; lowest wins. n1 (2000 vcore,
    7000 memory free) scores 0 + 6/7; n2 (1000 vcore, 1500 memory free) 0 + 1/3: n2 is
    reserved, though it lacks more of the ask's vcore (a "fraction lacking" score picks n1)."""
    lines = [at(0, node("n1", vcore=4000, memory=8000)), at(0, node("n2", vcore=4000, memory=8000)),
             at(0, app("fill")), at(0, ask("fill", "f1", vcore=2000, memory=1000)),
             at(0, ask("fill", "f2", vcore=3000, memory=6500)), at(0, SCHEDULE),
             at(0.5, app("big")), at(0.5, ask("big", "b", vcore=3000, memory=1000)), at(2.6, SCHEDULE)]
    outputs, state = run(lines)
    assert placements(outputs) == [("f1", "n1"), ("f2", "n2")]
    assert reservations(outputs) == [("ask.reserved", "b", "n2", "no-fit")]
    assert state["nodes"]["n2"]["reserved_for"] == "big/b"


def test_the_fit_score_counts_an_unasked_type_as_one() -> None:
    """``resources.go:FitInScore``: a type the node has available but the ask does not request
    adds 1; a type the node has none of adds nothing."""
    assert fit_in_score({"vcore": 1000}, {"vcore": 4000, "gpu": 2, "pods": 0}) == 0.75 + 1
    assert fit_in_score({"vcore": 4000, "memory": 500}, {"vcore": 1000, "memory": 2000}) == 0.75


def test_other_asks_skip_a_reserved_node() -> None:
    """YuniKorn ``node_collection.go`` (the unreserved iterator) and ``node.go:preAllocateCheck``:
    a reserved node takes no other ask, though it has room."""
    lines = [*BUSY, at(3, SCHEDULE), at(3, app("small")), at(3, ask("small", "s1")), at(3, ask("small", "s2")),
             at(3.1, SCHEDULE)]
    outputs, _ = run(lines)
    assert placements(outputs)[-1:] == [("s1", "n2")]  # n1 has 2000 free but is held for b; s2 fits nowhere


def test_reserved_asks_go_first_and_the_reservation_ends_when_allocated() -> None:
    """YuniKorn ``partition.go:tryReservedAllocate`` runs before ``tryAllocate``: once n1 frees up,
    the reserved ask takes it before a higher-priority newcomer; ``allocate`` unreserves."""
    lines = [*BUSY, at(3, SCHEDULE), at(4, app("vip")), at(4, ask("vip", "v", vcore=3000, priority=100)),
             at(4, release("fill", "f1")), at(4.1, SCHEDULE)]
    outputs, state = run(lines)
    assert placements(outputs)[-1] == ("b", "n1")
    assert reservations(outputs)[-1] == ("ask.unreserved", "b", "n1", "allocated")
    assert "reserved_for" not in state["nodes"]["n1"]


def test_a_reserved_ask_may_be_allocated_on_another_node() -> None:
    """YuniKorn ``tryReservedAllocate`` second loop (``tryNodesNoReserve``): a reserved ask that fits
    another unreserved node goes there, and its reservation ends."""
    lines = [*BUSY, at(3, SCHEDULE), at(4, release("fill", "f2")), at(4.1, SCHEDULE)]
    outputs, _ = run(lines)
    assert placements(outputs)[-1] == ("b", "n2")
    assert reservations(outputs)[-1] == ("ask.unreserved", "b", "n1", "allocated")


def test_removing_the_ask_or_the_node_ends_the_reservation() -> None:
    """YuniKorn ``application.go:RemoveAllocationAsk`` (reservations of the ask are removed) and
    ``partition.go:removeNode`` (its reservations are removed): a reservation never outlives either."""
    removed_ask = {"type": "ask.removed", "data": {"app_id": "big", "ask_id": "b"}}
    outputs, _ = run([*BUSY, at(3, SCHEDULE), at(4, removed_ask), at(4, app("small")),
                          at(4, ask("small", "s", vcore=2000)), at(4.1, SCHEDULE)])
    assert reservations(outputs)[-1] == ("ask.unreserved", "b", "n1", "removed")
    assert placements(outputs)[-1] == ("s", "n1")  # the node is back
    outputs, _ = run([*BUSY, at(3, SCHEDULE), at(4, {"type": "node.removed", "data": {"node_id": "n1"}})])
    assert reservations(outputs)[-1] == ("ask.unreserved", "b", "n1", "node-removed")
    outputs, _ = run([*BUSY, at(3, SCHEDULE), at(4, {"type": "app.removed", "data": {"app_id": "big"}})])
    assert reservations(outputs)[-1] == ("ask.unreserved", "b", "n1", "removed")


def test_required_node_that_does_not_fit_is_reserved_and_ends_the_apps_turn() -> None:
    """YuniKorn 1.5 ``application.go:tryAllocate``: a required-node ask that does not fit returns
    ``newReservedAllocation`` at once (no delay); while it holds the node, ``cancelReservations``
    refuses and the app's turn ends, so its smaller ask does not take the space (audit s5)."""
    lines = [node("n1", vcore=4000), node("n2", vcore=4000), app("fill"), ask("fill", "f", vcore=3000),
             SCHEDULE, app("ds"), ask("ds", "pin", vcore=2000, required_node="n1", priority=10),
             ask("ds", "small", vcore=1000), SCHEDULE]
    outputs, _ = run(lines)
    assert reservations(outputs) == [("ask.reserved", "pin", "n1", "required-node")]
    assert ("small", "n1") not in placements(outputs)
    assert ("small", "n2") not in placements(outputs)  # the app's turn ends at its reserved ask


def test_required_node_ask_takes_a_node_held_for_an_ordinary_ask() -> None:
    """YuniKorn ``tryAllocate`` → ``cancelReservations``: reservations of asks without a required node
    on the required node are cancelled for it."""
    lines = [*BUSY, at(3, SCHEDULE), at(4, app("ds")),
             at(4, ask("ds", "pin", vcore=1000, required_node="n1", priority=10)), at(4.1, SCHEDULE)]
    outputs, _ = run(lines)
    assert reservations(outputs)[-1] == ("ask.unreserved", "b", "n1", "required-node")
    assert placements(outputs)[-1] == ("pin", "n1")


def test_an_app_with_a_required_node_ask_is_walked_though_its_shapes_are_hopeless() -> None:
    """Once both nodes are held, an app whose asks have only shapes no node can take or be
    reserved for is skipped by the walk (``cycle._hopeless``). Not so an app with a
    required-node ask of such a shape: ``pin`` still takes the node held for ``b1``."""
    lines = [at(0, node("n1", vcore=4000)), at(0, node("n2", vcore=4000)), at(0, app("fill")),
             at(0, ask("fill", "f", vcore=3000)), at(0, ask("fill", "g", vcore=3000)), at(0, SCHEDULE),
             at(0.5, app("big")), at(0.5, ask("big", "b1", vcore=1500)), at(0.5, ask("big", "b2", vcore=1500)),
             at(0.6, app("ds")), at(0.6, ask("ds", "pin", vcore=1500, required_node="n1")), at(3, SCHEDULE)]
    sim = Simulation()
    outputs = [output_to_dict(o) for line in lines for o in sim.feed(orjson.dumps(line))]  # no later cycle
    assert reservations(outputs) == [("ask.reserved", "b1", "n1", "no-fit"), ("ask.reserved", "b2", "n2", "no-fit"),
                                     ("ask.unreserved", "b1", "n1", "required-node"),
                                     ("ask.reserved", "pin", "n1", "required-node")]


def test_a_reserved_ask_gets_its_node_once_the_node_frees_up_though_its_shape_fits_nowhere_else() -> None:
    """The reserved step passes over a reserved ask that did not fit its node while that node is
    unchanged (``Ask.fit_checked``). Here ``a2`` failed on n2 in the cycle at 3.1 s; at 4 s n2
    frees up while ``a1``, of the same shape, still fails on n1 and no free node holds the shape:
    ``a2`` must be tried again, and takes n2."""
    lines = [at(0, node("n1", vcore=4000)), at(0, node("n2", vcore=4000)), at(0, app("fill")),
             at(0, ask("fill", "f1", vcore=3000)), at(0, ask("fill", "f2", vcore=3000)), at(0, SCHEDULE),
             at(0.5, app("x")), at(0.5, ask("x", "a1", vcore=1500)), at(0.6, app("y")),
             at(0.6, ask("y", "a2", vcore=1500)), at(3, SCHEDULE), at(3.1, SCHEDULE),
             at(4, release("fill", "f2")), at(4.1, SCHEDULE)]
    sim = Simulation()
    outputs = [output_to_dict(o) for line in lines for o in sim.feed(orjson.dumps(line))]
    assert reservations(outputs)[:2] == [("ask.reserved", "a1", "n1", "no-fit"), ("ask.reserved", "a2", "n2", "no-fit")]
    assert placements(outputs)[-2:] == [("a2", "n2"), ("a1", "n2")]  # then n2, unreserved, holds a1 too


def test_snapshots_include_reservations() -> None:
    """A restored engine holds the same reservations and decides the same afterwards."""
    def feed(sim: Simulation, lines: list[dict[str, Any]]) -> list[bytes]:
        outs = [o for line in lines for o in sim.feed(orjson.dumps(line))]
        # cycle.completed's inputs_through counts the simulation's own lines: compare the rest
        return [o.data.state_digest.encode() if isinstance(o.data, CycleCompleted) else o.model_dump_json().encode()
                for o in outs]

    sim = Simulation()
    feed(sim, [*BUSY, at(3, SCHEDULE)])
    assert sim.engine.state.partitions["default"].reservations == {("big", "b"): "n1"}
    restored = Simulation()
    restored.engine = load(orjson.loads(orjson.dumps(dump(sim.engine))))
    assert restored.engine.digest() == sim.engine.digest()
    later = [{**line, "id": f"later-{i}"} for i, line in enumerate(
        [at(4, app("small")), at(4, ask("small", "s", vcore=2000)), at(4, release("fill", "f1")), at(5, SCHEDULE)])]
    assert feed(restored, later) == feed(sim, later)


# -- property: a reserved node is never given to another ask; no reservation outlives its ask --

ASKS = [f"r{i}" for i in range(8)]
big_ask = st.builds(
    lambda a, k, v, n: {"type": "ask.added", "data": {"app_id": a, "ask_id": k, "resources": {"vcore": v, "memory": 10},
                                                      **({"required_node": n} if n else {})}},
    st.sampled_from(APPS), st.sampled_from(ASKS), st.integers(1500, 4000), st.one_of(st.none(), st.sampled_from(NODES)))
churn = st.one_of(
    st.builds(lambda a, k: {"type": "allocation.released", "data": {"app_id": a, "ask_id": k}},
              st.sampled_from(APPS), st.sampled_from(ASKS)),
    st.builds(lambda a, k: {"type": "ask.removed", "data": {"app_id": a, "ask_id": k}},
              st.sampled_from(APPS), st.sampled_from(ASKS)),
)
# Dense in asks and cycles (so nodes fill up and asks wait past the delay), plus the generic lines.
reserving_line = st.one_of(big_ask, big_ask, big_ask, churn, st.just({"type": "schedule"}), line)


def _times(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for i, obj in enumerate(lines):  # one second apart, so asks outlive the reservation delay
        obj = {k: v for k, v in obj.items() if k != "time"}
        out.append(at(min(i, 59), obj) if i < 60 else obj)
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(reserving_line, min_size=10, max_size=50))
def test_reserved_nodes_are_never_given_to_other_asks(lines: list[dict[str, Any]]) -> None:
    sim = Simulation(load_config(CONFIG))
    held: dict[str, tuple[str, str]] = {}  # node → (app, ask), from the outputs as they come
    fill = [{"type": "ask.added", "data": {"app_id": a, "ask_id": "fill", "resources": {"vcore": 2500, "memory": 10}}}
            for a in APPS]  # more than the three nodes hold, so later asks wait and reserve
    for obj in _times([*SETUP, *fill, *lines]):
        for out in sim.feed(orjson.dumps(obj)):
            d = out.data
            if isinstance(d, AskReserved):
                assert d.node_id not in held, "a node reserved twice"
                held[d.node_id] = (d.app_id, d.ask_id)
            elif isinstance(d, AskUnreserved):
                assert held.pop(d.node_id) == (d.app_id, d.ask_id)
            elif isinstance(d, AllocationDecided):
                assert held.get(d.node_id, (d.app_id, d.ask_id)) == (d.app_id, d.ask_id), "reserved node taken"
        check_invariants(sim.engine)
        flushed = not sim.engine.pending_outputs  # outputs of applied inputs come out with the next cycle
        for part in sim.engine.state.partitions.values():
            for (app_id, ask_id), node_id in part.reservations.items():
                pending = part.apps[app_id].asks[ask_id]  # the ask still exists and is pending
                assert pending.reserved_node == node_id and part.nodes[node_id].reserved_for == (app_id, ask_id)
                assert not flushed or held[node_id] == (app_id, ask_id)
            assert not flushed or len(held) == len(part.reservations)
            assert all(n.reserved_for is None or n.reserved_for in part.reservations for n in part.nodes.values())


def test_folding_the_recorded_reservations_rebuilds_the_state() -> None:
    """Recovery folds recorded outputs as facts: ``reservations.fold`` of a cycle's ask.reserved
    outputs gives the state (digest included) that running the cycle gave."""
    sim = Simulation()
    for obj in [*BUSY, at(0.6, SCHEDULE)]:
        sim.feed(orjson.dumps(obj))
    before = dump(sim.engine)
    outputs = sim.feed(orjson.dumps(at(3, SCHEDULE)))
    reserved = [o.data for o in outputs if o.type in ("ask.reserved", "ask.unreserved")]
    assert [o.type for o in outputs] == ["ask.reserved", "cycle.completed"]
    folded = load(before)
    folded.state.cycle += 1
    for data in reserved:
        assert isinstance(data, AskReserved | AskUnreserved)
        fold(folded.state.partitions, data, folded.state.cycle)
    assert folded.digest() == sim.engine.digest()
    assert dump(folded)["partitions"] == dump(sim.engine)["partitions"]


def test_a_shape_that_fits_no_node_does_not_stop_the_next_shape_in_the_same_search() -> None:
    """YuniKorn ``tryReservedAllocate``'s second loop tries every reserved ask: the reserved
    search remembers that b1's shape fits no free node (and skips it for the rest of the
    call), then finds the node b2's shape fits. n1 and n3 keep 1,500 vcore free each (the
    cluster has room for b1, no node has); n2 joins after both reserved and holds 2,500:
    b2 (2,000), not b1 (3,000). Reserved asks go first: rival's ask, of higher priority (so
    ahead of big in the walk) and as large as b2, gets nothing."""
    lines = [at(0, node("n1", vcore=4000, memory=8000)), at(0, node("n3", vcore=4000, memory=8000)),
             at(0, app("fill")), at(0, ask("fill", "f1", vcore=2500)), at(0, ask("fill", "f3", vcore=2500)),
             at(0, SCHEDULE), at(0.5, app("big")), at(0.5, ask("big", "b1", vcore=3000, priority=10)),
             at(0.5, ask("big", "b2", vcore=2000, priority=5)), at(3, SCHEDULE),
             at(3.5, app("rival")), at(3.5, ask("rival", "r", vcore=2000, priority=20)),
             at(4, node("n2", vcore=2500, memory=8000)), at(4.1, SCHEDULE)]
    outputs, state = run(lines)
    assert reservations(outputs)[:2] == [("ask.reserved", "b1", "n1", "no-fit"), ("ask.reserved", "b2", "n3", "no-fit")]
    assert placements(outputs) == [("f1", "n1"), ("f3", "n3"), ("b2", "n2")]
    assert reservations(outputs)[2:] == [("ask.unreserved", "b2", "n3", "allocated")]
    assert state["nodes"]["n1"]["reserved_for"] == "big/b1"
