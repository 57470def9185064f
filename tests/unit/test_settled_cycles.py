"""A settled cycle (``scheduler.core.cycle.settled``) skips its walks: the outputs are those of the walks.

Two simulations are fed the same lines; the second forgets before every line that its last
cycle settled, so it walks every cycle. Their outputs must be byte-identical, over random
inputs with runs of idle cycles between them whose spacing crosses the reservation delay
(2 s), preemption's attempt ticks (15 s) and the app timers (30 s, 5 min), under both rules
profiles and with asks that may preempt. Then the skip itself: when it applies and when not.
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.times import format_time
from scheduler.config import load_config
from scheduler.core.cycle import settled
from scheduler.simulation.simulate import Simulation
from tests.sim import SCHEDULE, app, ask, node
from tests.unit.test_core_properties import APPS, CONFIG, SETUP, line

CONFIG_19 = CONFIG.replace("  - name: default\n", "  - name: default\n    rules: yunikorn-1.9\n", 1)
CONFIG_NO_PREEMPTION = CONFIG.replace("  - name: default\n", "  - name: default\n    preemption: {enabled: false}\n", 1)

preempting_ask = st.builds(
    lambda a, k, v: {"type": "ask.added", "data": {"app_id": a, "ask_id": k, "preempt_other": True,
                                                   "resources": {"vcore": v, "memory": 10}}},
    st.sampled_from(APPS), st.sampled_from(["k0", "k1", "k2", "k3"]), st.integers(500, 3000))
idle = st.builds(lambda n: [SCHEDULE] * n, st.integers(1, 4))
step = st.one_of(line.map(lambda obj: [obj]), preempting_ask.map(lambda obj: [obj]), idle)
gap_us = st.sampled_from([1, 1_000, 500_000, 1_999_999, 2_000_001, 15_000_000, 31_000_000, 301_000_000])


def _timed(steps: list[list[dict[str, Any]]], gaps: list[int]) -> list[dict[str, Any]]:
    """The lines with increasing times, ``gaps`` apart in turn (a line's own time is dropped)."""
    out, now = [], 0
    for i, obj in enumerate(obj for group in steps for obj in group):
        now += gaps[i % len(gaps)]
        out.append({**obj, "time": format_time(now)})
    return out


def _outputs(config: str, lines: list[dict[str, Any]], *, walk_always: bool) -> list[bytes]:
    sim = Simulation(load_config(config))
    out: list[bytes] = []
    for obj in lines:
        if walk_always:
            sim.engine.state.settled_cycle = None
        out.extend(o.model_dump_json().encode() for o in sim.feed(orjson.dumps(obj)))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([CONFIG, CONFIG_19, CONFIG_NO_PREEMPTION]), st.lists(step, min_size=5, max_size=30),
       st.lists(gap_us, min_size=1, max_size=5))
def test_skipping_settled_cycles_decides_exactly_as_walking_them(
    config: str, steps: list[list[dict[str, Any]]], gaps: list[int],
) -> None:
    fill = [ask(a, "fill", vcore=2500, memory=10) for a in APPS]  # more than the nodes hold: asks wait
    lines = _timed([SETUP, fill, *steps, [SCHEDULE] * 3], gaps)
    assert _outputs(config, lines, walk_always=False) == _outputs(config, lines, walk_always=True)


def _full_cluster() -> Simulation:
    """Two nodes of 2 cores, 1.5 cores of each taken after a cycle at 1 s; an ask of 1 core made at
    0.5 s fits no node but the cluster's headroom: it waits, too young to reserve until 2.5 s."""
    sim = Simulation()
    for obj in [node("n1", vcore=2000), node("n2", vcore=2000), app("a"), ask("a", "f1", vcore=1500),
                ask("a", "f2", vcore=1500), ask("a", "waits", vcore=1000)]:
        sim.feed(orjson.dumps({"time": "1970-01-01T00:00:00.500000Z", **obj}))
    sim.feed(orjson.dumps({"time": "1970-01-01T00:00:01Z", **SCHEDULE}))
    return sim


def test_an_idle_cycle_is_settled_until_an_input_or_an_ask_coming_of_age() -> None:
    sim = _full_cluster()
    state = sim.engine.state
    state.cycle += 1  # as ``begin_cycle`` opens the next cycle
    assert settled(state, 1_500_000, 1_000_000)
    assert not settled(state, 2_500_001, 1_000_000), "'waits' may reserve a node from 2.5 s on"
    state.cycle -= 1
    sim.feed(orjson.dumps({"time": "1970-01-01T00:00:01.100000Z", **node("n2", vcore=500)}))
    state.cycle += 1
    assert not settled(state, 1_500_000, 1_000_000), "an input was applied since"


def test_a_skipped_cycle_still_reserves_when_the_ask_comes_of_age() -> None:
    sim = _full_cluster()
    kinds = []
    for t in ("1.2", "1.9", "2.4", "2.6", "2.7"):
        kinds.append([o.type for o in sim.feed(orjson.dumps({"time": f"1970-01-01T00:00:0{t}00000Z", **SCHEDULE}))])
    assert ["ask.reserved" in k for k in kinds] == [False, False, False, True, False]
