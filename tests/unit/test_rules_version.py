"""The rules version is bumped whenever the core's decisions change.

A digest of every output of a fixed set of scenarios (the golden scenarios, the upgrade
fixture's inputs, a seeded random mix over a queue tree using every sort policy, fences,
limits and timers, and a generated cluster workload) is stored per rules version in
``tests/golden/rules_versions.json``. When a change to the core makes any of these outputs
differ, this test fails until ``RULES_VERSION`` is bumped and the new version's digest is
added (``EVSCHED_UPDATE_RULES=1`` prints it). Entries of older versions are history: never
edit them. ``rules_version`` itself is left out of the digest, so a bump alone changes nothing.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from events.codec import encode_output
from events.times import format_time
from scheduler.config import load_config
from scheduler.core.rules_version import IMPLEMENTED, LEGACY_RULES_VERSION, RULES_VERSION
from scheduler.simulation.simulate import Simulation
from scheduler.simulation.workload import WorkloadSpec, config_yaml, events
from tests.unit.test_core_properties import APPS, CONFIG, LEAVES, NODES

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "tests" / "golden" / "rules_versions.json"
FIXTURE = ROOT / "tests" / "fixtures" / "upgrade-v0"
# A fixed set: a golden scenario added later would change the digest without any rule changing.
GOLDEN = ("binpacking_weights", "fence_and_offsets")


def _run(lines: Iterable[dict[str, Any] | bytes], config_text: str | None = None) -> Iterator[bytes]:
    sim = Simulation(load_config(config_text) if config_text is not None else None)
    for line in lines:
        for out in sim.feed(line if isinstance(line, bytes) else orjson.dumps(line)):
            yield encode_output(out)
    for out in sim.finish():
        yield encode_output(out)


def _random_mix(seed: int, n: int) -> Iterator[dict[str, Any]]:
    rnd = random.Random(seed)
    for node in NODES:
        yield {"type": "node.added", "data": {"node_id": node, "capacity": {"vcore": 4000, "memory": 4000}}}
    t = 0
    for i in range(n):
        t += rnd.choice([1, 1, 1, 1000, 20_000, 40_000, 150_000, 270_000])  # ms: timers fire now and then
        when = format_time(t * 1000)
        app, ask, node = rnd.choice(APPS), f"k{rnd.randrange(6)}", rnd.choice(NODES)
        kind = rnd.randrange(10)
        if kind == 0:
            tags = {"application.stateaware.disable": "true"} if rnd.random() < 0.2 else {}
            line = {"type": "app.added",
                    "data": {"app_id": app, "queue": rnd.choice(LEAVES), "user": "u", "tags": tags}}
        elif kind == 1:
            line = {"type": "app.removed", "data": {"app_id": app}}
        elif kind in (2, 3, 4):
            line = {"type": "ask.added", "data": {"app_id": app, "ask_id": ask, "priority": rnd.randint(-3, 3),
                                                  "resources": {"vcore": rnd.randint(1, 3000),
                                                                "memory": rnd.randint(1, 3000)}}}
        elif kind == 5:
            line = {"type": "ask.removed", "data": {"app_id": app, "ask_id": ask}}
        elif kind == 6:
            line = {"type": "allocation.released", "data": {"app_id": app, "ask_id": ask}}
        elif kind == 7:
            line = {"type": "node.updated", "data": {"node_id": node, "schedulable": rnd.random() < 0.7}}
        elif kind == 8:
            line = {"type": "node.removed", "data": {"node_id": node}} if rnd.random() < 0.2 else {
                "type": "node.added", "data": {"node_id": node, "capacity": {"vcore": 4000, "memory": 4000}}}
        else:
            limit = rnd.choice([None, 1, 2])
            line = {"type": "schedule", "data": {} if limit is None else {"max_allocations": limit}}
        yield {**line, "time": when, "id": f"r{i}"}


def _workload() -> Iterator[dict[str, Any]]:
    spec = WorkloadSpec(nodes=30, apps=10, asks=600, departments=3, leaves=6, department_max_cores=20,
                        unsorted_department=True, seed=11)
    yield {"type": "config.updated", "data": {"yaml": config_yaml(spec)}}
    for i, event in enumerate(events(spec)):
        yield event
        if i % 97 == 96:
            yield {"type": "schedule"}


def _fixture_inputs() -> Iterator[dict[str, Any]]:
    yield {"type": "config.updated", "data": {"yaml": (FIXTURE / "queues.yaml").read_text()}}
    for name in ("inputs-1.jsonl", "inputs-2.jsonl", "inputs-3.jsonl"):
        for raw in (FIXTURE / name).read_bytes().splitlines():
            yield orjson.loads(raw)
        yield {"type": "schedule"}


def scenario_outputs() -> Iterator[bytes]:
    """Every output of every scenario, ``rules_version`` left out."""
    streams: list[Iterator[bytes]] = []
    for name in GOLDEN:
        path = ROOT / "tests" / "golden" / "scenarios" / f"{name}.jsonl"
        streams.append(_run(path.read_bytes().splitlines()))
    streams += [_run(_fixture_inputs()), _run(_workload())]
    streams += [_run(_random_mix(seed, 400), CONFIG) for seed in range(6)]
    for stream in streams:
        for raw in stream:
            obj = orjson.loads(raw)
            obj["data"].pop("rules_version", None)
            yield orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


def outputs_digest() -> tuple[str, int, int]:
    """sha256 of the scenario outputs, their count and how many are decisions."""
    h = hashlib.sha256()
    count = decisions = 0
    for raw in scenario_outputs():
        h.update(raw)
        h.update(b"\n")
        count += 1
        decisions += b'"type":"allocation.decided"' in raw
    return "sha256:" + h.hexdigest(), count, decisions


def test_decisions_change_only_with_the_rules_version() -> None:
    digest, count, decisions = outputs_digest()
    if os.environ.get("EVSCHED_UPDATE_RULES"):
        print(f'"{RULES_VERSION}": "{digest}"')
    table = orjson.loads(TABLE.read_bytes())
    assert decisions > 300 and count > 3 * decisions  # the scenarios decide plenty
    known = {version for version, d in table.items() if d == digest}
    assert str(RULES_VERSION) in table, f"no golden digest for rules version {RULES_VERSION}: add {digest}"
    assert table[str(RULES_VERSION)] == digest, (
        f"the core's outputs changed under rules version {RULES_VERSION} (now {digest}, "
        f"same as version(s) {sorted(known) or 'none'}): bump RULES_VERSION in events/rules_version.py "
        "and add the new digest to tests/golden/rules_versions.json"
    )


def test_version_table_is_history() -> None:
    """Versions count up from the legacy one, the current one is the newest, and the build
    re-derives the current version."""
    table = orjson.loads(TABLE.read_bytes())
    versions = sorted(int(v) for v in table)
    assert versions == list(range(LEGACY_RULES_VERSION, RULES_VERSION + 1))
    assert RULES_VERSION in IMPLEMENTED
