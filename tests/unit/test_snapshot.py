"""Snapshots: a restored engine has the same digest and makes the same decisions afterwards."""

from __future__ import annotations

import orjson

from events.codec import encode_output
from scheduler.config import load_config
from scheduler.core import snapshot
from scheduler.simulation.simulate import Simulation
from scheduler.simulation.workload import WorkloadSpec, config_yaml, events, numbered


def test_restored_engine_continues_identically() -> None:
    spec = WorkloadSpec(nodes=20, apps=10, asks=300, leaves=4, seed=9)
    lines = [orjson.dumps(e) for e in numbered(events(spec))]
    first, rest = lines[: len(lines) * 2 // 3], lines[len(lines) * 2 // 3 :]
    removals = [orjson.dumps({"type": "allocation.released", "data": {"app_id": "app-0001", "ask_id": "ask-000001"}}),
                orjson.dumps({"type": "node.removed", "data": {"node_id": "node-00003"}})]

    original = Simulation(load_config(config_yaml(spec)))
    for line in first:
        original.feed(line)
    original.feed(b'{"type": "schedule", "data": {"max_allocations": 120}}')
    saved = orjson.loads(orjson.dumps(snapshot.dump(original.engine)))  # through JSON, as on disk
    restored = Simulation()
    restored.engine = snapshot.load(saved)
    restored.last_time_us, restored.inputs_consumed = original.last_time_us, original.inputs_consumed
    restored.line_number = original.line_number
    assert restored.engine.digest() == original.engine.digest()
    assert snapshot.dump(restored.engine) == saved

    def finish(sim: Simulation) -> list[bytes]:
        out = []
        for line in [*removals, *rest, b'{"type": "schedule", "time": "1970-01-01T01:00:00Z"}']:
            out.extend(sim.feed(line))
        out.extend(sim.finish())
        return [encode_output(o) for o in out]

    assert finish(restored) == finish(original)
    assert restored.engine.digest() == original.engine.digest()
