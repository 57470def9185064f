"""Poison pills on Kafka shards: one bad input never stops the instance's other shards.

Two scheduler partitions (``default`` and ``beta``) are two shards served by one
``evsched run --partition default,beta``. Into ``default`` go inputs that used to crash a
cycle for good (asks and an occupied whose sums leave 64 bits: every restart crashed on the
same batch, and the instance that took the shard over stopped its healthy shards too).
Each must be rejected with its reason, the rest of both shards scheduled, and each shard's
log re-derive (``replay verify``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.cli import evsched
from tests.kafka_broker import KafkaTopics
from tests.kafka_run import decisions, kafka_args, read_all, shard_topics_of

pytestmark = [pytest.mark.faults, pytest.mark.kafka]
SHARDS = ("default", "beta")
BIG = 2**63 - 1
YAML = "partitions:\n" + "".join(
    f"  - name: {s}\n    queues:\n      - name: root\n        submitacl: '*'\n        queues:\n          - name: a\n"
    for s in SHARDS)


def shard_events(shard: str, poison: bool, phase: int) -> list[dict[str, Any]]:
    def ev(rid: str, kind: str, **data: Any) -> dict[str, Any]:
        return {"id": f"{shard}-{rid}", "source": "rm", "type": kind, "data": {**data, "partition": shard}}

    def asks(numbers: range) -> list[dict[str, Any]]:
        return [ev(f"k{i}", "ask.added", app_id="x", ask_id=f"k{i}", resources={"vcore": 10, "memory": 1})
                for i in numbers]

    if phase == 1:
        out = [ev("n1", "node.added", node_id="n1", capacity={"vcore": BIG, "memory": 100}),
               ev("app", "app.added", app_id="x", queue="root.a", user="u"), *asks(range(1))]
        if poison:  # the first fits; each of the others would push pending + allocated past 2^63−1
            out += [ev(f"big{i}", "ask.added", app_id="x", ask_id=f"big{i}", resources={"vcore": BIG - 1000})
                    for i in range(3)]
        return out + asks(range(1, 3))
    # After allocations: an occupied that would take the node's available below −2^63.
    occupied = [ev("occ", "node.updated", node_id="n1", capacity={}, occupied={"vcore": BIG})] if poison else []
    return occupied + asks(range(3, 6))


def test_sums_past_64_bits_on_one_shard_are_rejected_and_both_shards_go_on(
    kafka_bootstrap: str, kafka_topics: KafkaTopics, tmp_path: Path
) -> None:
    log_args = kafka_args(kafka_bootstrap, kafka_topics)
    for phase in (1, 2):  # two runs: the second restores both shards, poison and all, from the log
        evts = [*shard_events("default", True, phase), *shard_events("beta", False, phase)]
        if phase == 1:  # the queue configuration comes from the operator, on the admin channel
            cfg = tmp_path / "cfg.jsonl"
            cfg.write_bytes(orjson.dumps({"id": "cfg", "source": "admin", "type": "config.updated",
                                          "data": {"yaml": YAML}}) + b"\n")
            evsched("submit", *log_args, "--partition", ",".join(SHARDS), "--admin", str(cfg))
        path = tmp_path / f"in{phase}.jsonl"
        path.write_bytes(b"\n".join(orjson.dumps(e) for e in evts) + b"\n")
        evsched("submit", *log_args, "--partition", ",".join(SHARDS), str(path))
        proc = evsched("run", *log_args, "--partition", ",".join(SHARDS), "--once", timeout=120)
        assert b"every assigned shard is caught up" in proc.stderr
    found = {}
    for shard in SHARDS:
        _, outs = read_all(kafka_bootstrap, shard_topics_of(kafka_topics, shard))
        rejected = sorted((o["data"]["input_id"], o["data"]["reason"]) for o in outs if o["type"] == "input.rejected")
        found[shard] = (rejected, sorted(d["ask_id"] for d in decisions(outs)))
        verify = evsched("replay", "verify", *log_args, "--partition", shard, check=False)
        assert verify.returncode == 0, verify.stdout.decode() + verify.stderr.decode()
    assert found["beta"] == ([], [f"k{i}" for i in range(6)])
    assert found["default"] == (
        [("default-big1", "overflow"), ("default-big2", "overflow"), ("default-occ", "overflow")],
        sorted(["big0", *[f"k{i}" for i in range(6)]]),
    )
