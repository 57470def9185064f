"""Recovery by fact fold (inputs + recorded outputs, no search) gives exactly the state that
re-running every cycle gives, under the same code; and it follows the record, not the code."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.codec import encode_output
from events.log.memory import MemoryLog
from events.log.port import LogError
from events.times import format_time
from scheduler.config import load_config
from scheduler.core import snapshot
from scheduler.core.engine import Engine
from scheduler.core.fact_fold import FOLDS
from scheduler.service.recovery import recover
from scheduler.simulation.workload import WorkloadSpec
from tests.logdrive import drive, workload_records, write_inputs
from tests.unit.test_core_properties import APPS, CONFIG, LEAVES, NODES, line

START_US = 1_000_000_000_000


# Every generated log starts with its nodes and apps, so most of its lines act on something.
SETUP = [{"type": "node.added", "data": {"node_id": n, "capacity": {"vcore": 4000, "memory": 4000}}} for n in NODES] + [
    {"type": "app.added", "data": {"app_id": a, "queue": LEAVES[i % len(LEAVES)], "user": "u",
                                   "tags": {"application.stateaware.disable": "true"} if i == 4 else {}}}
    for i, a in enumerate(APPS)]


ASK = st.builds(lambda a, k, v, p: {"type": "ask.added", "data": {"app_id": a, "ask_id": k, "priority": p,
                                                                  "resources": {"vcore": v, "memory": v}}},
                st.sampled_from(APPS), st.sampled_from(["k0", "k1", "k2", "k3"]), st.integers(1, 3000),
                st.integers(-3, 3))
RELEASE = st.builds(lambda a, k: {"type": "allocation.released", "data": {"app_id": a, "ask_id": k}},
                    st.sampled_from(APPS), st.sampled_from(["k0", "k1", "k2", "k3"]))
LINE = st.one_of(line, ASK, ASK, RELEASE)
TICK = {"type": "node.updated", "data": {"node_id": NODES[0], "schedulable": True}}  # a later cycle: timers fire


def _records(lines: list[dict[str, Any]], batch: int, step_us: int, lag_us: int) -> list[dict[str, Any]]:
    """Input records of the setup and the property lines (``schedule`` lines dropped: ``drive``
    cuts the batches). An event's time is near its cycle's time, ``lag_us`` earlier (timers
    armed by inputs may already be due when their cycle runs)."""
    out: list[dict[str, Any]] = []
    for line_ in SETUP + lines + [TICK] * (3 * batch):
        if line_["type"] == "schedule":
            continue
        n = len(out)
        time_us = START_US + (n // batch + 1) * step_us - lag_us + n
        out.append({"id": f"i{n}", "source": "rm", "type": line_["type"], "time": format_time(max(time_us, 0)),
                    "data": line_["data"]})
    return out


def _live_and_recovered(records: list[dict[str, Any]], batch: int, step_us: int, config_yaml: str | None) -> tuple[
        Engine, Any, MemoryLog]:
    config = load_config(config_yaml) if config_yaml is not None else None
    log = MemoryLog(now_us=lambda: START_US)
    write_inputs(log, records)
    live: dict[str, Engine] = {}

    def keep(engine: Engine) -> None:
        live.setdefault("e", engine)

    drive(log, batch, start_us=START_US, step_us=step_us, config=config, on_cycle=keep)
    recovered = asyncio.run(recover(log, source="evsched", engine=Engine(config)))
    return live["e"], recovered, log


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(LINE, min_size=15, max_size=80),
    batch=st.integers(1, 8),
    step_us=st.sampled_from([1_000, 20_000_000, 40_000_000, 400_000_000]),
    lag_us=st.sampled_from([0, 35_000_000, 600_000_000]),
)
def test_fact_fold_equals_rederived_state(lines: list[dict[str, Any]], batch: int, step_us: int, lag_us: int) -> None:
    """After any generated log, the folded engine equals the live one: same digest at every
    cycle (no mismatch), and the same whole engine dump (timers, counters, seen ids) at the end."""
    records = _records(lines, batch, step_us, lag_us)
    if not records:
        return
    live, recovered, _ = _live_and_recovered(records, batch, step_us, CONFIG)
    assert recovered.digest_mismatches == []
    assert recovered.engine.cycle_number == live.cycle_number
    assert snapshot.dump(recovered.engine) == snapshot.dump(live)
    assert _next_cycle(recovered.engine) == _next_cycle(live)


def _next_cycle(engine: Engine) -> list[bytes]:
    """The outputs of one more cycle after room is made: decided by the caches (node index,
    sorted apps and asks) the fold left behind, which the engine dump does not show."""
    room = {"id": "room", "source": "rm", "type": "node.added", "time": format_time(START_US),
            "data": {"node_id": "zz-room", "capacity": {"vcore": 6000, "memory": 6000}}}
    engine.ingest(orjson.dumps(room), append_time_us=START_US, position="inputs@-1")
    return [encode_output(o) for o in engine.cycle(START_US + 10**12, {})]


@pytest.mark.parametrize("batch", [7, 500])
def test_fact_fold_equals_rederived_state_on_a_workload(batch: int) -> None:
    """The same on a generated cluster workload (thousands of decisions over many cycles)."""
    records = workload_records(WorkloadSpec(nodes=40, apps=12, asks=900, seed=3))
    live, recovered, _ = _live_and_recovered(records, batch, 1_000_000, None)
    assert recovered.digest_mismatches == []
    assert snapshot.dump(recovered.engine) == snapshot.dump(live)
    assert _next_cycle(recovered.engine) == _next_cycle(live)


def _swap_nodes(log: MemoryLog, a: str, b: str) -> MemoryLog:
    """A copy of the log whose recorded decisions put on ``b`` what went to ``a`` and back:
    what another version of the rules could have decided, and the state digests to match."""
    out = MemoryLog(now_us=lambda: START_US)
    asyncio.run(out.append_inputs([(rec.key, rec.value) for rec in log.iter_inputs()]))
    values = []
    for rec in log.iter_outputs():
        obj = orjson.loads(rec.value)
        if obj["type"] == "allocation.decided" and obj["data"]["node_id"] in (a, b):
            obj["data"]["node_id"] = b if obj["data"]["node_id"] == a else a
        values.append(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS))
    asyncio.run(out.append_outputs(values))
    return out


def test_recovery_follows_the_record_not_the_code() -> None:
    """Decisions the current code would not make (placed on the other node) are recovered as
    recorded: the nodes' allocations are the record's, and only the digests disagree."""
    nodes = [{"id": f"n{i}", "source": "rm", "type": "node.added",
              "data": {"node_id": f"n{i}", "capacity": {"vcore": 4000, "memory": 4000}}} for i in (1, 2)]
    app = [{"id": "a", "source": "rm", "type": "app.added", "data": {"app_id": "a", "queue": "root.default",
                                                                       "user": "u"}}]
    asks = [{"id": f"k{i}", "source": "rm", "type": "ask.added",
             "data": {"app_id": "a", "ask_id": f"k{i}", "resources": {"vcore": 1000 * (i + 1), "memory": 100}}}
            for i in range(3)]
    log = MemoryLog(now_us=lambda: START_US)
    write_inputs(log, nodes + app + asks)
    drive(log, 100)
    swapped = _swap_nodes(log, "n1", "n2")
    engine = asyncio.run(recover(swapped, source="evsched")).engine
    recorded = {(o["data"]["ask_id"], o["data"]["node_id"]) for o in map(orjson.loads, (r.value for r in
                swapped.iter_outputs())) if o["type"] == "allocation.decided"}
    held = {(al.ask_id, al.node_id) for al in engine.state.partitions["default"].apps["a"].allocations.values()}
    assert held == recorded
    assert {node for _, node in recorded} == {"n1", "n2"}  # the swap changed something to follow


def test_an_output_type_this_build_does_not_know_stops_recovery() -> None:
    """A record of a newer evsched's output type is not skipped: recovery refuses, naming it."""
    log = MemoryLog(now_us=lambda: START_US)
    write_inputs(log, [{"id": "n", "source": "rm", "type": "node.added",
                        "data": {"node_id": "n", "capacity": {"vcore": 1}}}])
    drive(log, 10)
    values = [r.value for r in log.iter_outputs()]
    extra = orjson.dumps({"data": {"app_id": "a", "ask_id": "k", "node_id": "n", "reason": "no-fit"}, "id": "1-0",
                          "source": "evsched", "specversion": "1.0", "time": "x", "type": "ask.parked"})
    other = MemoryLog(now_us=lambda: START_US)
    asyncio.run(other.append_inputs([(rec.key, rec.value) for rec in log.iter_inputs()]))
    asyncio.run(other.append_outputs([values[0], extra, *values[1:]]))
    assert "ask.parked" not in FOLDS
    with pytest.raises(LogError, match=r"ask\.parked"):
        asyncio.run(recover(other, source="evsched"))


def test_every_output_type_says_how_it_folds() -> None:
    """A new output type must declare whether a cycle's steps make it and how it enters the
    state (``fact_fold.FOLDS``); otherwise recovery would refuse every log that holds one."""
    from events.models import OUTPUT_DATA

    assert set(FOLDS) == set(OUTPUT_DATA) - {"cycle.started", "cycle.completed"}
