"""The service on Kafka (real Tansu broker): run --once equals simulate, SIGKILL recovery,
dead-lettering of poison records, and a stopped instance's successor taking over.

Mirrors tests/integration/test_service.py (the embedded log). Every test has its own
topics and consumer group (``kafka_topics``), passed to the CLI as flags.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from scheduler.simulation.workload import WorkloadSpec
from tests.cli import evsched
from tests.contracts.log_contract import run
from tests.faults.harness import kill_campaign
from tests.kafka_broker import KafkaTopics, kafka_broker_kind
from tests.kafka_run import (
    channel_ends,
    create_topics,
    decisions,
    kafka_args,
    produce,
    read_all,
    recover_check,
    simulate_with_recorded_boundaries,
    spawn_run,
    submit_file,
    unique,
    workload,
)
from tests.procs import fixed_batch
from tests.progress import HANG_S, ServiceWatch

pytestmark = pytest.mark.kafka


# ---------------------------------------------------------------------------- (a) run --once == simulate


def test_run_once_gives_the_decisions_simulate_gives(
    kafka_bootstrap: str, kafka_topics: KafkaTopics, tmp_path: Path
) -> None:
    spec = WorkloadSpec(nodes=30, apps=8, asks=400, leaves=4, seed=11)
    submit_file(kafka_bootstrap, kafka_topics, workload(spec), tmp_path)
    snapshots = ["--snapshot-dir", str(tmp_path / "snapshots")]
    proc = evsched("run", *kafka_args(kafka_bootstrap, kafka_topics), "--once", "--batch", "97", *snapshots)
    assert b"stopped after cycle" in proc.stderr
    inputs, outs = read_all(kafka_bootstrap, kafka_topics)
    recorded = decisions(outs)
    assert len(recorded) == spec.asks
    assert recorded == simulate_with_recorded_boundaries(inputs, outs)
    completed = [o["data"] for o in outs if o["type"] == "cycle.completed"]
    assert completed[-1]["inputs_through"] == channel_ends(inputs)
    # A second run restores the snapshot the first wrote on its clean stop (snapshots are on by
    # default with Kafka), checks it against the decisions topic, and finds nothing to do.
    again = evsched("run", *kafka_args(kafka_bootstrap, kafka_topics), "--once", *snapshots)
    assert f"snapshot of cycle {len(completed)} + recovered 0 cycles".encode() in again.stderr
    # Without a snapshot it re-derives every cycle from the decisions topic.
    third = evsched("run", *kafka_args(kafka_bootstrap, kafka_topics), "--once", "--snapshot-dir",
                    str(tmp_path / "none"))
    assert f"recovered {len(completed)} cycles".encode() in third.stderr
    assert read_all(kafka_bootstrap, kafka_topics)[1] == outs


def test_three_partitions_rederive_to_the_recorded_digests(
    kafka_bootstrap: str, kafka_topics: KafkaTopics
) -> None:
    spec = WorkloadSpec(nodes=30, apps=12, asks=600, leaves=4, seed=3)
    create_topics(kafka_bootstrap, kafka_topics, partitions=3)
    produce(kafka_bootstrap, kafka_topics, workload(spec))
    evsched("run", *kafka_args(kafka_bootstrap, kafka_topics), "--once", "--batch", "50")
    inputs, outs = read_all(kafka_bootstrap, kafka_topics)
    assert len({r.channel for r in inputs if r.channel.startswith(kafka_topics.inputs)}) == 3
    completed = [o["data"] for o in outs if o["type"] == "cycle.completed"]
    assert sum(completed[-1]["inputs_through"].values()) == len(inputs) == len(workload(spec))
    assert decisions(outs), "nothing was scheduled"
    # The merge across partitions is part of what is re-derived; simulate sees the same order.
    assert decisions(outs) == simulate_with_recorded_boundaries(inputs, outs)
    cycles, mismatches, final = recover_check(kafka_bootstrap, kafka_topics, partitions=3)
    assert (cycles, mismatches, final) == (len(completed), [], completed[-1]["state_digest"])


# ---------------------------------------------------------------------------- (b) SIGKILL mid-stream


def test_sigkill_mid_stream_loses_and_changes_nothing(
    kafka_bootstrap: str, kafka_topics: KafkaTopics, tmp_path: Path
) -> None:
    spec = WorkloadSpec(nodes=300, apps=40, asks=4000, leaves=8, seed=5)
    records = workload(spec)
    # The last 1,000 asks are submitted only after the kills: however far a life overshoots
    # its planned share (a fast service, a busy machine), the work cannot run out before the
    # campaign has made them; lives that find nothing submitted left are killed in start-up.
    held_back = 1000
    submit_file(kafka_bootstrap, kafka_topics, records[:-held_back], tmp_path)
    args = [*kafka_args(kafka_bootstrap, kafka_topics), "--once", *fixed_batch(40)]
    # Paced by the service's own cycle lines (tests.progress), never by a fixed time; a share
    # of the kills land in start-up and recovery (torn-cycle repair).
    campaign = kill_campaign(args, tmp_path, kills=12, seed=2024, tail_held_back=True)
    assert campaign.kills == 12 and not campaign.finished, campaign.line()
    submit_file(kafka_bootstrap, kafka_topics, records[-held_back:], tmp_path)
    final = evsched("run", *args)
    assert b"stopped after cycle" in final.stderr

    inputs, outs = read_all(kafka_bootstrap, kafka_topics)
    assert len(inputs) == len(records)  # the tail too, and the last life decided it (inputs_through below)
    completed = unique([o["data"] for o in outs if o["type"] == "cycle.completed"], "cycle")
    assert [c["cycle"] for c in completed] == list(range(1, len(completed) + 1))
    assert completed[-1]["inputs_through"] == channel_ends(inputs)
    got = unique(decisions(outs), "decision_id")  # copies only as identical repeats
    expected = simulate_with_recorded_boundaries(inputs, outs)
    assert len(expected) > spec.asks // 2
    assert got == expected, "a decision was lost or changed"
    cycles, mismatches, _ = recover_check(kafka_bootstrap, kafka_topics)
    assert (cycles, mismatches) == (len(completed), []), campaign.line()


# ---------------------------------------------------------------------------- (c) poison records


def append_raw(bootstrap: str, topics: KafkaTopics, values: list[bytes], *, max_request_size: int = 1 << 20) -> None:
    """Raw bytes onto the input topic (``submit`` would refuse them); one partition."""
    from aiokafka import AIOKafkaProducer

    create_topics(bootstrap, topics, 1)

    async def body() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", max_request_size=max_request_size)
        await producer.start()
        try:
            for value in values:  # one at a time: a refused record fails alone
                await producer.send_and_wait(topics.inputs, value, key=b"poison", partition=0)
        finally:
            await producer.stop()

    run(body())


def allow_large_inputs(bootstrap: str, topic: str, max_bytes: int) -> None:
    """Raise one topic's ``max.message.bytes`` (an operator's per-topic setting)."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    async def body() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            resource = ConfigResource(ConfigResourceType.TOPIC, topic, {"max.message.bytes": str(max_bytes)})
            await admin.alter_configs([resource])
        finally:
            await admin.close()

    run(body())


def dead_letters(bootstrap: str, topic: str) -> list[Any]:
    """Every record of the dead-letter topic, read up to its end offset (the run has exited)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def body() -> list[Any]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            end = (await consumer.end_offsets([tp]))[tp]
            got: list[Any] = []
            deadline = time.monotonic() + HANG_S
            while await consumer.position(tp) < end:
                assert time.monotonic() < deadline, f"dead letters stuck before offset {end}"
                batch = await consumer.getmany(tp, timeout_ms=300)
                got.extend(batch.get(tp, ()))
            return got
        finally:
            await consumer.stop()

    return run(body())


GOOD = [
    {"id": "n1", "source": "t", "type": "node.added", "data": {"node_id": "n1", "capacity": {"vcore": 4000}}},
    {"id": "a1", "source": "t", "type": "app.added", "data": {"app_id": "a", "queue": "root.default", "user": "u"}},
    {"id": "k1", "source": "t", "type": "ask.added",
     "data": {"app_id": "a", "ask_id": "k", "resources": {"vcore": 1000}}},
]


def test_poison_records_are_dead_lettered_and_rejected_once(
    kafka_bootstrap: str, kafka_topics: KafkaTopics
) -> None:
    unreadable = [b"garbage {{{", orjson.dumps([1, 2, 3]), b"\xff\xfe not utf8"]
    typed_but_bad = orjson.dumps({"id": "u1", "source": "t", "type": "pod.created", "data": {}})
    values = [orjson.dumps(GOOD[0]), unreadable[0], orjson.dumps(GOOD[1]), unreadable[1], typed_but_bad,
              unreadable[2], orjson.dumps(GOOD[2])]
    append_raw(kafka_bootstrap, kafka_topics, values)
    for _ in range(2):  # the second run recovers past them: nothing is parked or rejected twice
        evsched("run", *kafka_args(kafka_bootstrap, kafka_topics), "--once")
    _, outs = read_all(kafka_bootstrap, kafka_topics)
    rejected = [o["data"] for o in outs if o["type"] == "input.rejected"]
    assert sorted((r["input_type"] or "", r["reason"]) for r in rejected) == [
        ("", "invalid"), ("", "invalid"), ("", "invalid"), ("pod.created", "unknown-type")]
    assert [d["ask_id"] for d in decisions(outs)] == ["k"]  # the valid records around them
    parked = dead_letters(kafka_bootstrap, kafka_topics.deadletter)
    assert [r.value for r in parked] == unreadable  # once each, raw bytes, in input order
    offsets = [values.index(v) for v in unreadable]
    for record, offset in zip(parked, offsets, strict=True):
        headers = dict(record.headers)
        assert headers["evsched.source.topic"] == kafka_topics.inputs.encode()
        assert headers["evsched.source.partition"] == b"0"
        assert headers["evsched.source.offset"] == str(offset).encode()
        assert headers["evsched.error"].startswith(b"invalid: ")


def test_oversize_record_is_dead_lettered_without_its_bytes(
    kafka_bootstrap: str, kafka_topics: KafkaTopics
) -> None:
    big = b'{"id": "big", "source": "t", "type": "node.added", "data": {"pad": "' + b"x" * (1 << 20) + b'"}}'
    create_topics(kafka_bootstrap, kafka_topics, 1)
    allow_large_inputs(kafka_bootstrap, kafka_topics.inputs, 4 << 20)  # the broker's default is ~1 MB
    try:
        append_raw(kafka_bootstrap, kafka_topics, [big, orjson.dumps(GOOD[0])], max_request_size=4 << 20)
    except Exception as exc:
        if kafka_broker_kind() != "tansu" or os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
            raise
        pytest.skip(f"Tansu does not accept a {len(big)}-byte record: {exc!r}")
    evsched("run", *kafka_args(kafka_bootstrap, kafka_topics), "--once")
    _, outs = read_all(kafka_bootstrap, kafka_topics)
    rejected = [o["data"] for o in outs if o["type"] == "input.rejected"]
    assert [(r["input_type"], r["reason"]) for r in rejected] == [(None, "too-large")]
    (parked,) = dead_letters(kafka_bootstrap, kafka_topics.deadletter)
    headers = dict(parked.headers)
    # Over the producer's 1 MiB request limit: the origin is parked, the bytes stay at their offset.
    assert (parked.value, headers["evsched.source.offset"]) == (b"", b"0")
    assert headers["evsched.error"].startswith(b"too-large: ")
    assert b"not copied" in headers["evsched.value-dropped"]
    assert any(o["type"] == "cycle.completed" and o["data"]["inputs_through"].get(f"{kafka_topics.inputs}/0") == 2
               for o in outs)


# ---------------------------------------------------------------------------- (d) active/standby takeover


def test_standby_takes_over_from_a_stopped_active_instance(
    kafka_bootstrap: str, kafka_topics: KafkaTopics, tmp_path: Path
) -> None:
    # What is tested: two `run --standby` instances share the topics; the one holding the
    # lease (consumer group GROUP.active) schedules, the other waits. SIGTERM stops the
    # active one after the cycle in hand; the standby gets the lease, restores the state
    # from the decisions topic and finishes the run. (Not a partition split: one instance
    # reads every input partition, because the decisions log has one writer.)
    spec = WorkloadSpec(nodes=300, apps=40, asks=4000, leaves=8, seed=7)
    submit_file(kafka_bootstrap, kafka_topics, workload(spec), tmp_path)
    args = [*kafka_args(kafka_bootstrap, kafka_topics), "--standby", "--once", "-v", *fixed_batch(10)]
    errs = [tmp_path / "one.err", tmp_path / "two.err"]
    procs = [spawn_run(args, errs[0]), spawn_run(args, errs[1])]
    try:
        deadline = time.monotonic() + HANG_S
        while not any(b"holding the active lease" in e.read_bytes() for e in errs):
            assert time.monotonic() < deadline, "nobody got the lease"
            assert all(p.poll() is None for p in procs), [e.read_text() for e in errs]
            time.sleep(0.02)
        active = next(i for i, e in enumerate(errs) if b"holding the active lease" in e.read_bytes())
        standby = 1 - active
        # Stopped mid-run: after a few cycles the active instance wrote (tests.progress), not
        # after a fixed time; the rest of the ~430 cycles are left for the standby.
        assert ServiceWatch(procs[active], errs[active]).wait_cycles(3), "the active instance exited"
        procs[active].send_signal(signal.SIGTERM)
        assert procs[active].wait(timeout=HANG_S) == 0
        assert procs[standby].wait(timeout=HANG_S) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    first, second = errs[active].read_text(), errs[standby].read_text()
    assert "lost the active lease" not in first + second
    stopped_at = int(first.split("stopped after cycle ")[1].split(":")[0])
    assert stopped_at > 0
    assert f"recovered {stopped_at} cycles" in second, second  # continued from the active's last cycle
    assert " 0 events" not in second.split("stopped after cycle ")[1], "the standby had nothing left to do"

    inputs, outs = read_all(kafka_bootstrap, kafka_topics)
    completed = unique([o["data"] for o in outs if o["type"] == "cycle.completed"], "cycle")
    assert [c["cycle"] for c in completed] == list(range(1, len(completed) + 1))
    assert completed[-1]["inputs_through"] == channel_ends(inputs)
    got = unique(decisions(outs), "decision_id")
    assert got == simulate_with_recorded_boundaries(inputs, outs), "a decision was lost or changed"
    cycles, mismatches, _ = recover_check(kafka_bootstrap, kafka_topics)
    assert (cycles, mismatches) == (len(completed), [])
