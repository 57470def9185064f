"""Decisions fit a Kafka message: an ask whose ``allocation.decided`` could not be written
(Apache Kafka's default limit is 1 MiB) is rejected up front, ``too-large``."""

from __future__ import annotations

import orjson

from events.codec import encode_output
from events.models import AllocationDecided, InputRejected
from scheduler.config import load_config
from scheduler.simulation.simulate import Simulation

LIMIT = 1 << 20
# Thousands of resource types (long names make the map big): past the default bound on types
# per partition (docs/reliability.md), so this partition raises it to reach the size bound.
MANY_TYPES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        properties: {evsched.resource.types.max: "100000"}
        queues:
          - name: default
"""


def resources_of_size(size: int) -> dict[str, int]:
    """A resource map that serialises to about ``size`` bytes (long names, then short ones)."""
    out: dict[str, int] = {}
    i = 0
    while len(orjson.dumps(out)) < size - 300:
        out[f"r{i:05d}" + "x" * 240] = 1
        i += 1
    while len(orjson.dumps(out)) < size:
        out[f"s{i:05d}"] = 1
        i += 1
    return out


def test_an_ask_whose_decision_would_pass_1_mib_is_rejected_and_the_rest_scheduled() -> None:
    resources = resources_of_size(LIMIT - 400)
    node_id = "n" * 250  # echoed by the decision, not by the ask
    lines = [
        {"type": "node.added", "data": {"node_id": node_id, "capacity": {**resources, "vcore": 10}}},
        {"type": "app.added", "data": {"app_id": "a", "queue": "root.default", "user": "u"}},
        {"id": "big", "type": "ask.added", "data": {"app_id": "a", "ask_id": "big", "resources": resources}},
        {"type": "ask.added", "data": {"app_id": "a", "ask_id": "small", "resources": {"vcore": 1}}},
    ]
    assert all(len(orjson.dumps(line)) < LIMIT for line in lines)
    sim = Simulation(load_config(MANY_TYPES))
    outputs = [o for line in lines for o in sim.feed(orjson.dumps(line))] + sim.finish()
    assert all(len(encode_output(o)) < LIMIT for o in outputs)
    rejected = [o.data for o in outputs if isinstance(o.data, InputRejected)]
    assert [(r.input_id, r.reason) for r in rejected] == [("big", "too-large")]
    assert [o.data.ask_id for o in outputs if isinstance(o.data, AllocationDecided)] == ["small"]
