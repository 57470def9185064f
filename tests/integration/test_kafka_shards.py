"""Scale-out on Kafka (real Tansu broker): instances of one group split the scheduler partitions.

Two scheduler partitions (``default`` and ``beta``) are two shards, each with its own
input, decisions and dead-letter topics. Two ``evsched run --partition default,beta``
instances in one consumer group get one shard each; when one stops (SIGKILL, or SIGTERM
after handing a shard over on a rebalance) the survivor restores the other shard from its
decisions topic and finishes it. Afterwards each shard's decision log must be continuous,
re-derive to its recorded digests, and equal what ``simulate`` gives for that shard's
inputs and recorded cycle boundaries: no decision lost or changed, copies identical.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from scheduler.simulation.workload import WorkloadSpec, config_yaml, events, numbered
from tests.cli import evsched, submit_as_cluster
from tests.contracts.log_contract import run
from tests.kafka_broker import KafkaTopics
from tests.kafka_run import (
    channel_ends,
    decisions,
    kafka_args,
    read_all,
    recover_check,
    shard_topics_of,
    simulate_with_recorded_boundaries,
    spawn_run,
    unique,
)
from tests.procs import fixed_batch
from tests.progress import HANG_S, ServiceWatch

pytestmark = pytest.mark.kafka
SHARDS = ("default", "beta")
SPEC = WorkloadSpec(nodes=200, apps=30, asks=6000, leaves=6, seed=13)  # long enough to act mid-run
FAST_GROUP = ["--session-timeout-ms", "6000"]  # a dead member's shards move after ~6 s
VERBOSE = ["-v"]  # a line per cycle, for tests.progress


def two_partition_workload() -> list[dict[str, Any]]:
    """A config with partitions default and beta, then the same cluster and asks in each."""
    one = config_yaml(SPEC)
    assert one.startswith("partitions:\n  - name: default\n")
    block = one.removeprefix("partitions:\n")
    yaml = "partitions:\n" + block + block.replace("  - name: default\n", "  - name: beta\n", 1)

    def evs() -> Any:
        yield {"type": "config.updated", "data": {"yaml": yaml}}
        for shard in SHARDS:
            for event in events(SPEC):
                if event["type"].startswith("priorityclass."):
                    if shard == SHARDS[0]:
                        yield event  # broadcast by submit to every shard
                    continue
                yield {**event, "data": {**event["data"], "partition": shard}}

    return list(numbered(evs()))


def submit_to_shards(bootstrap: str, topics: KafkaTopics, tmp: Path, part: int | None = None) -> dict[str, int]:
    """``evsched submit --partition default,beta`` of the workload, or of ``part`` 0 (the broadcast
    config and the first quarter of each shard's events) or 1 (the rest); returns each shard's
    number of inputs in the whole workload."""
    evts = two_partition_workload()
    if part is not None:
        split = {s: [e for e in evts if e["data"].get("partition") == s] for s in SHARDS}
        cut = {s: len(split[s]) // 4 for s in SHARDS}
        evts = ([e for e in evts if "partition" not in e["data"]] + [e for s in SHARDS for e in split[s][:cut[s]]]
                if part == 0 else [e for s in SHARDS for e in split[s][cut[s]:]])
    path = tmp / f"in-{part}.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(e) for e in evts) + b"\n")
    submit_as_cluster([*kafka_args(bootstrap, topics), "--partition", ",".join(SHARDS)], path)
    every = two_partition_workload()
    broadcast = sum(e["type"] in ("config.updated", "priorityclass.upserted") for e in every)
    per_shard = {s: broadcast + sum(e["data"].get("partition") == s for e in every) for s in SHARDS}
    assert sum(per_shard.values()) == len(every) + broadcast * (len(SHARDS) - 1)
    return per_shard


def runs(path: Path) -> list[str] | None:
    """The shards the instance says it runs in its latest assignment (None: none yet)."""
    found = re.findall(r"this instance runs (.+)", path.read_text(errors="replace"))
    if not found:
        return None
    return [] if found[-1].strip() == "no shard" else sorted(found[-1].strip().split(", "))


def wait_for(condition: Any, what: str, procs: list[subprocess.Popen[bytes]], errs: list[Path],
             timeout: float = HANG_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {e.name}\n{e.read_text(errors='replace')[-2500:]}" for e in errs)
            raise AssertionError(f"{what}: not within {timeout} s\n{logs}")
        for p, e in zip(procs, errs, strict=True):
            assert p.poll() in (None, 0), f"{e.name} exited {p.returncode}:\n{e.read_text(errors='replace')[-3000:]}"
        time.sleep(0.05)


def consumed(bootstrap: str, topics: KafkaTopics, shard: str) -> int:
    """How many of the shard's inputs its last ``cycle.completed`` has consumed (0: none yet)."""
    _, outs = read_all(bootstrap, shard_topics_of(topics, shard))
    completed = [o["data"] for o in outs if o["type"] == "cycle.completed"]
    return sum(completed[-1]["inputs_through"].values()) if completed else 0


def shard_done(bootstrap: str, topics: KafkaTopics, shard: str, inputs: int) -> bool:
    """The shard's last ``cycle.completed`` has consumed all of its inputs."""
    return consumed(bootstrap, topics, shard) == inputs


def caught_up(proc: subprocess.Popen[bytes], err: Path, inputs: dict[str, int]) -> None:
    """Wait until the instance's cycle lines (``-v``) show every input of both shards consumed
    (cheap to watch; ``check_shard`` then checks the logs themselves)."""
    for shard in SHARDS:
        assert ServiceWatch(proc, err, shard).wait_consumed(inputs[shard]), (
            f"{err.name} exited {proc.returncode}:\n{err.read_text(errors='replace')[-3000:]}")


def check_shard(bootstrap: str, topics: KafkaTopics, shard: str, inputs: int) -> int:
    """Continuous, re-derivable, equal to simulate; returns the shard's number of decisions."""
    named = shard_topics_of(topics, shard)
    records, outs = read_all(bootstrap, named)
    assert len(records) == inputs
    source = "evsched" if shard == "default" else f"evsched/{shard}"
    assert {o["source"] for o in outs} == {source}
    completed = unique([o["data"] for o in outs if o["type"] == "cycle.completed"], "cycle")
    assert [c["cycle"] for c in completed] == list(range(1, len(completed) + 1)), f"{shard}: cycles not contiguous"
    assert completed[-1]["inputs_through"] == channel_ends(records)  # the inputs and the admin (rules) topics
    got = unique(decisions(outs), "decision_id")  # copies only as identical repeats
    assert got, f"{shard}: nothing was scheduled"
    assert {d["partition"] for d in got} == {shard}
    assert got == simulate_with_recorded_boundaries(records, outs), f"{shard}: a decision was lost or changed"
    cycles, mismatches, final = recover_check(bootstrap, named, source=source)
    assert (cycles, mismatches, final) == (len(completed), [], completed[-1]["state_digest"])
    # The replay tool reads one shard by naming its partition (its own consumer group).
    verify = evsched("replay", "verify", "--kafka", bootstrap, "--input-topic", topics.inputs, "--decisions-topic",
                     topics.decisions, "--deadletter-topic", topics.deadletter, "--admin-topic", topics.admin,
                     "--partition", shard, check=False)
    assert verify.returncode == 0, f"replay verify of {shard}:\n{verify.stdout.decode()}{verify.stderr.decode()}"
    # The group member that ran the shard committed its offsets after the outputs: lag 0.
    assert committed(bootstrap, topics.group, f"{named.inputs}/0") == channel_ends(records)[f"{named.inputs}/0"]
    return len(got)


def committed(bootstrap: str, group: str, channel: str) -> int | None:
    """The group's committed offset of an input channel (read without joining the group)."""
    from aiokafka import AIOKafkaConsumer

    from events.log.kafka import parse_channel

    async def body() -> int | None:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        await consumer.start()
        try:
            offset: int | None = await consumer.committed(parse_channel(channel))
            return offset
        finally:
            await consumer.stop()

    return run(body())


def stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_two_instances_split_the_shards_and_the_survivor_takes_over_a_killed_ones(
    kafka_bootstrap: str, kafka_topics: KafkaTopics, tmp_path: Path
) -> None:
    inputs = submit_to_shards(kafka_bootstrap, kafka_topics, tmp_path)
    args = [*kafka_args(kafka_bootstrap, kafka_topics), "--partition", "default", "--partition", "beta",
            *fixed_batch(8), *FAST_GROUP, *VERBOSE]
    errs = [tmp_path / "one.err", tmp_path / "two.err"]
    procs = [spawn_run(args, errs[0]), spawn_run(args, errs[1])]
    try:
        # Both joined and the group split the shards: one each.
        wait_for(lambda: all(runs(e) and len(runs(e) or []) == 1 for e in errs), "one shard each", procs, errs)
        mine = [runs(e) for e in errs]
        assert sorted(s for m in mine for s in m or []) == sorted(SHARDS), mine
        victim = 0
        victim_shard = (mine[victim] or [""])[0]
        # Killed mid-run: after a few of its shard's cycles are written (tests.progress), not
        # after a fixed time; ~780 cycles of 8 inputs are left for the survivor.
        assert ServiceWatch(procs[victim], errs[victim], victim_shard).wait_cycles(3), "the victim exited"
        procs[victim].send_signal(signal.SIGKILL)
        procs[victim].wait()
        assert not shard_done(kafka_bootstrap, kafka_topics, victim_shard, inputs[victim_shard]), "finished too soon"
        survivor = 1 - victim
        wait_for(lambda: runs(errs[survivor]) == sorted(SHARDS), "the survivor runs both shards",
                 procs[survivor:], errs[survivor:])
        caught_up(procs[survivor], errs[survivor], inputs)
        procs[survivor].send_signal(signal.SIGTERM)
        assert procs[survivor].wait(timeout=HANG_S) == 0
    finally:
        stop_all(procs)
    log = errs[survivor].read_text()
    assert f"shard {victim_shard}: assigned to this instance; restoring it" in log
    # (from the log, after any snapshot the survivor wrote while it ran both shards at the start)
    restored = re.search(rf"evsched\.service\.{victim_shard}: (?:snapshot of cycle \d+ \+ )?recovered (\d+) cycles",
                         log)
    assert restored and int(restored.group(1)) > 0, "the survivor did not restore the victim's cycles"
    assert sum(check_shard(kafka_bootstrap, kafka_topics, s, inputs[s]) for s in SHARDS) > SPEC.asks


def test_a_joining_instance_gets_a_shard_handed_over_and_a_stopping_one_hands_over_the_rest(
    kafka_bootstrap: str, kafka_topics: KafkaTopics, tmp_path: Path
) -> None:
    # The rest of the events is submitted only once a shard was handed over: whatever the
    # machine's speed, the moved shard still has work when its new owner restores it.
    inputs = submit_to_shards(kafka_bootstrap, kafka_topics, tmp_path, part=0)
    # At-least-once (the path brokers without transactions run): 2-input cycles, thousands of
    # them, each its own transaction would make this test crawl on a shared machine; the
    # exactly-once handover is what test_kafka_zombie.py and the test above exercise.
    args = [*kafka_args(kafka_bootstrap, kafka_topics), "--partition", "default,beta", *fixed_batch(2), *FAST_GROUP,
            *VERBOSE, "--no-transactions"]
    errs = [tmp_path / "first.err", tmp_path / "second.err"]
    procs = [spawn_run(args, errs[0])]
    try:
        wait_for(lambda: runs(errs[0]) == sorted(SHARDS), "the first instance runs both shards", procs, errs[:1])
        for shard in SHARDS:  # mid-run: both shards have written cycles (tests.progress), no fixed wait
            assert ServiceWatch(procs[0], errs[0], shard).wait_cycles(3), "the first instance exited"
        procs.append(spawn_run(args, errs[1]))
        # The sticky assignor moves exactly one shard; the first instance finishes the cycle
        # in hand of the shard it gives up, and the second restores it from the log.
        wait_for(lambda: runs(errs[1]) is not None and len(runs(errs[1]) or []) == 1, "a shard for the second",
                 procs, errs)
        moved = (runs(errs[1]) or [""])[0]
        assert runs(errs[0]) == [s for s in SHARDS if s != moved]
        submit_to_shards(kafka_bootstrap, kafka_topics, tmp_path, part=1)
        procs[0].send_signal(signal.SIGTERM)  # leaves the group: its shard moves at once
        assert procs[0].wait(timeout=HANG_S) == 0
        wait_for(lambda: runs(errs[1]) == sorted(SHARDS), "the second instance runs both", procs[1:], errs[1:])
        caught_up(procs[1], errs[1], inputs)
        procs[1].send_signal(signal.SIGTERM)
        assert procs[1].wait(timeout=HANG_S) == 0
    finally:
        stop_all(procs)
    first, second = errs[0].read_text(), errs[1].read_text()
    assert f"shard {moved}: handed over to another instance" in first
    assert f"shard {moved}: assigned to this instance; restoring it" in second
    assert re.search(rf"evsched\.service\.{moved}: recovered [1-9]\d* cycles", second), second[-3000:]
    for shard in SHARDS:
        check_shard(kafka_bootstrap, kafka_topics, shard, inputs[shard])


def test_once_runs_every_assigned_shard_until_it_is_caught_up(
    kafka_bootstrap: str, kafka_topics: KafkaTopics, tmp_path: Path
) -> None:
    inputs = submit_to_shards(kafka_bootstrap, kafka_topics, tmp_path)
    proc = evsched("run", *kafka_args(kafka_bootstrap, kafka_topics), "--partition", "default,beta", "--once",
                   "--batch", "500", "--snapshot-dir", str(tmp_path / "snap"), timeout=HANG_S)
    assert b"every assigned shard is caught up" in proc.stderr
    assert all(shard_done(kafka_bootstrap, kafka_topics, s, inputs[s]) for s in SHARDS)
    assert sorted(p.name for p in (tmp_path / "snap").iterdir()) == sorted(SHARDS)  # one snapshot dir per shard
    # Run again: each shard is restored from its own snapshot and finds nothing to do.
    again = evsched("run", *kafka_args(kafka_bootstrap, kafka_topics), "--partition", "default,beta", "--once",
                    "--snapshot-dir", str(tmp_path / "snap"), timeout=HANG_S)
    for shard in SHARDS:
        assert re.search(rf"evsched\.service\.{shard}: snapshot of cycle \d+ \+ recovered 0 cycles".encode(),
                         again.stderr), again.stderr.decode()[-2000:]
