"""Dynamic queues and user/group usage in the state form, its digest and engine snapshots."""

from __future__ import annotations

from typing import Any

import orjson

from events.codec import encode_output
from projections.digest import digest
from scheduler.config import load_config
from scheduler.core import snapshot
from scheduler.simulation.simulate import Simulation
from tests.sim import SCHEDULE, ask, node
from tests.unit.test_user_limits import PROPERTY_CONFIG


def _app(app_id: str, user: str, groups: list[str]) -> dict[str, Any]:
    return {"type": "app.added", "data": {"app_id": app_id, "user": user, "groups": groups}}


FIRST = [
    node("n1", vcore=20_000, memory=20_000),
    _app("a1", "alice", ["devs"]), _app("a2", "alice", []), _app("b1", "bob", ["ops"]), _app("c1", "carol", []),
    *[ask(a, f"{a}-{i}", vcore=1000, memory=1) for a in ("a1", "a2", "b1", "c1") for i in range(3)],
    SCHEDULE,
]
REST = [
    {"type": "allocation.released", "data": {"app_id": "a1", "ask_id": "a1-0"}},
    {"type": "app.removed", "data": {"app_id": "c1"}},
    _app("c2", "carol", ["ops"]), ask("c2", "c2-0", vcore=1000, memory=1),
    SCHEDULE,
]


def _feed(sim: Simulation, lines: list[dict[str, Any]]) -> list[bytes]:
    out = []
    for line in lines:
        out.extend(sim.feed(orjson.dumps(line)))
    return [encode_output(o) for o in out]


def test_state_form_has_dynamic_queues_and_usage_and_the_digest_covers_them() -> None:
    sim = Simulation(load_config(PROPERTY_CONFIG))
    _feed(sim, FIRST)
    form: dict[str, Any] = sim.engine.state_form()
    assert {"root.users.alice", "root.users.bob", "root.users.carol"} <= set(form["queues"])
    usage = form["usage"]
    assert usage["users"]["alice"]["root.users"] == {"allocated": {"memory": 2, "vcore": 2000}, "running_apps": 1}
    assert usage["groups"]["ops"]["root"]["allocated"]["vcore"] == 3000  # bob: the user wildcard caps 3 vcore
    assert sim.engine.digest() == digest(form)


def test_state_form_without_limits_has_no_usage_key() -> None:
    sim = Simulation()
    _feed(sim, [node("n1"), {"type": "app.added", "data": {"app_id": "x", "user": "u"}}])
    form: dict[str, Any] = sim.engine.state_form()
    assert "usage" not in form and form["apps"]["x"]["queue"] == "root.default"
    assert sim.engine.digest() == digest(form)


def test_snapshot_restores_dynamic_queues_and_usage_and_continues_identically() -> None:
    original = Simulation(load_config(PROPERTY_CONFIG))
    _feed(original, FIRST)
    saved = orjson.loads(orjson.dumps(snapshot.dump(original.engine)))
    restored = Simulation()
    restored.engine = snapshot.load(saved)
    restored.last_time_us, restored.inputs_consumed = original.last_time_us, original.inputs_consumed
    restored.line_number = original.line_number
    assert restored.engine.state_form() == original.engine.state_form()
    assert restored.engine.digest() == original.engine.digest()
    assert _feed(restored, REST) == _feed(original, REST)
    assert restored.engine.state_form() == original.engine.state_form()
    final: dict[str, Any] = restored.engine.state_form()
    assert "root.users.carol" in final["queues"]
