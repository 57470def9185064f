"""Helpers of the Kafka service tests: run ``evsched`` against the test broker, read a log
back, and check it against ``simulate`` with the recorded cycle boundaries.

A ``KafkaTopics`` names one log (one shard's input, decisions and dead-letter topics);
``shard_topics_of`` gives a scheduler partition's topics under a test's base names.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import orjson

from events.log.kafka import KafkaLog, shard_topics
from events.log.names import DEFAULT_ADMIN_TOPIC
from events.log.port import LogRecord
from events.models import ADMIN_TYPES
from events.producer import EventBuilder, EvschedProducer
from scheduler.core.logged_cycle import decode_records, merge
from scheduler.service.recovery import recover
from scheduler.simulation.simulate import Simulation
from scheduler.simulation.workload import WorkloadSpec, config_yaml, events, numbered
from tests.cli import evsched_argv, submit_as_cluster
from tests.contracts.log_contract import run
from tests.kafka_broker import KafkaTopics
from tests.progress import HANG_S

ROOT = Path(__file__).resolve().parents[1]


def shard_topics_of(topics: KafkaTopics, shard: str) -> KafkaTopics:
    """The topics of scheduler partition ``shard`` when ``topics`` are the base names."""
    named = shard_topics(shard, input_topics=[topics.inputs], decisions_topic=topics.decisions,
                         deadletter_topic=topics.deadletter, admin_topic=topics.admin or DEFAULT_ADMIN_TOPIC)
    return KafkaTopics(named.inputs[0], named.decisions, named.deadletter, topics.group, named.admin)


def workload(spec: WorkloadSpec) -> list[dict[str, Any]]:
    def evs() -> Any:
        yield {"type": "config.updated", "data": {"yaml": config_yaml(spec)}}
        yield from events(spec)

    return list(numbered(evs()))


def kafka_args(bootstrap: str, topics: KafkaTopics) -> list[str]:
    return [
        "--kafka", bootstrap, "--input-topic", topics.inputs, "--decisions-topic", topics.decisions,
        "--deadletter-topic", topics.deadletter, "--group", topics.group,
        *(["--admin-topic", topics.admin] if topics.admin else []),
    ]


def open_log(bootstrap: str, topics: KafkaTopics, partitions: int = 1) -> KafkaLog:
    # A different group from the service's: reading here must not move its offsets.
    return KafkaLog(
        bootstrap, input_topics=[topics.inputs], decisions_topic=topics.decisions,
        deadletter_topic=topics.deadletter, admin_topic=topics.admin or None, group_id=f"{topics.group}-test",
        partitions=partitions,
    )


def create_topics(bootstrap: str, topics: KafkaTopics, partitions: int) -> None:
    """Create the test's topics up front (the service would create a one-partition input topic)."""

    async def body() -> None:
        async with open_log(bootstrap, topics, partitions):
            pass

    run(body())


def read_all(bootstrap: str, topics: KafkaTopics) -> tuple[list[LogRecord], list[dict[str, Any]]]:
    """Every input record (all partitions) and every output (decoded) of the test's topics."""

    async def body() -> tuple[list[LogRecord], list[dict[str, Any]]]:
        async with open_log(bootstrap, topics) as log:
            end = await log.input_end()
            positions = dict.fromkeys(end, 0)
            inputs: list[LogRecord] = []
            deadline = time.monotonic() + HANG_S
            while any(positions[ch] < stop for ch, stop in end.items()):
                assert time.monotonic() < deadline, f"inputs stuck at {positions} of {end}"
                for rec in await log.read_inputs(positions, 10_000):
                    inputs.append(rec)
                    positions[rec.channel] = rec.offset + 1
            outs = [orjson.loads(r.value) for r in await log.read_outputs(0)]
        return inputs, outs

    return run(body())


def channel_ends(inputs: list[LogRecord]) -> dict[str, int]:
    """Each channel of ``inputs`` → one past its last offset (what a caught-up cycle records)."""
    ends: dict[str, int] = {}
    for rec in inputs:
        ends[rec.channel] = max(ends.get(rec.channel, 0), rec.offset + 1)
    return ends


def decisions(outs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o["data"] for o in outs if o["type"] == "allocation.decided"]


def unique(items: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """First copy of each ``key``; asserts every later copy is identical (docs/contract.md §3)."""
    first: dict[str, dict[str, Any]] = {}
    out = []
    for item in items:
        seen = first.setdefault(item[key], item)
        if seen is item:
            out.append(item)
        else:
            assert seen == item, f"{key} {item[key]!r} written twice with different contents"
    return out


def cycle_boundaries(outs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``cycle.started`` data of each cycle once, asserting cycles are 1, 2, 3, …"""
    started = unique([o["data"] for o in outs if o["type"] == "cycle.started"], "cycle")
    assert [c["cycle"] for c in started] == list(range(1, len(started) + 1)), "cycles not contiguous"
    return started


def simulate_with_recorded_boundaries(inputs: list[LogRecord], outs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Feed ``Simulation`` the inputs of each recorded cycle in the service's merge order,
    then a schedule line at the cycle's recorded time (as test_service.py does)."""
    by_position = {(r.channel, r.offset): r for r in inputs}
    channels = sorted({r.channel for r in inputs}, key=lambda ch: int(ch.rpartition("/")[2]))
    sim = Simulation(None)
    produced = []
    for cycle in cycle_boundaries(outs):
        frm, through = cycle["inputs_from"], cycle["inputs_through"]
        batch = [by_position[(ch, off)] for ch, stop in through.items() for off in range(frm.get(ch, 0), stop)]
        for d in merge(decode_records(batch), channels):
            produced.extend(sim.feed(d.record.value))
        produced.extend(sim.feed(orjson.dumps({"type": "schedule", "time": cycle["time"]})))
    produced.extend(sim.finish())
    return [o.data.model_dump(by_alias=True) for o in produced if o.type == "allocation.decided"]


def submit_file(bootstrap: str, topics: KafkaTopics, evts: list[dict[str, Any]], tmp: Path) -> None:
    path = tmp / "in.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(e) for e in evts) + b"\n")
    submit_as_cluster(kafka_args(bootstrap, topics), path)


def produce(bootstrap: str, topics: KafkaTopics, evts: list[dict[str, Any]]) -> None:
    """Send through the producer API: keys per docs/contract.md §1 spread events over partitions; the
    rules changes go first, by the operator, to the admin topic."""
    builder = EventBuilder("workload")
    produced = [builder.event(e["type"], e["data"], id=e["id"], time=e["time"]) for e in evts]
    admin = [p for p, e in zip(produced, evts, strict=True) if e["type"] in ADMIN_TYPES]
    rest = [p for p, e in zip(produced, evts, strict=True) if e["type"] not in ADMIN_TYPES]

    async def body() -> None:
        if admin:
            async with EvschedProducer(bootstrap, topic=topics.admin) as operator:
                await operator.send_all(admin)
        async with EvschedProducer(bootstrap, topic=topics.inputs) as producer:
            await producer.send_all(rest)

    run(body())


def recover_check(
    bootstrap: str, topics: KafkaTopics, partitions: int = 1, source: str = "evsched"
) -> tuple[int, list[int], str]:
    """Re-derive every cycle from the Kafka inputs: (cycles, digest mismatches, final digest)."""

    async def body() -> tuple[int, list[int], str]:
        async with open_log(bootstrap, topics, partitions) as log:
            rec = await recover(log, source=source)
        assert rec.repaired_outputs == 0, "the log had a torn cycle after a clean run"
        return rec.cycles, rec.digest_mismatches, rec.engine.digest()

    return run(body())


def spawn_run(args: list[str], stderr_path: Path) -> subprocess.Popen[bytes]:
    """``evsched run ARGS`` as a child, its stderr in ``stderr_path``. Without ``--snapshot-dir``
    each process gets its own (beside its stderr file), as instances on separate machines
    would: what it restores from comes from the log, or from snapshots it wrote itself."""
    if "--snapshot-dir" not in args:
        args = [*args, "--snapshot-dir", str(stderr_path.parent / f"{stderr_path.stem}.snapshots")]
    with open(stderr_path, "wb") as err:
        return subprocess.Popen(
            evsched_argv("run", *args), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err
        )
