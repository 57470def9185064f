"""A shard owner frozen past its session timeout never forks the shard's log (Tansu).

The probe's case: a cycle that held the event loop stopped Kafka's heartbeats, the group
expelled the owner mid-cycle, the standby restored the shard and ran the same cycle, and
both appended a ``cycle N``: ``replay verify`` failed for good. Now cycles run off the
event loop, and before each append the owner checks that the decisions topic ends where it
last wrote. Here the owner is frozen (SIGSTOP) until the standby has taken the shard over
and appended cycles of its own, then continued: it must not append its stale cycle.
Paced by observed progress only (assignments, cycles in the log).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.integration.test_kafka_shards import (
    FAST_GROUP,
    check_shard,
    runs,
    shard_done,
    stop_all,
    submit_to_shards,
    wait_for,
)
from tests.kafka_broker import KafkaTopics
from tests.kafka_run import kafka_args, read_all, shard_topics_of, spawn_run
from tests.procs import fixed_batch

pytestmark = [pytest.mark.faults, pytest.mark.kafka]


def cycles_written(bootstrap: str, topics: KafkaTopics) -> int:
    _, outs = read_all(bootstrap, shard_topics_of(topics, "default"))
    return sum(o["type"] == "cycle.completed" for o in outs)


def test_a_frozen_owner_does_not_append_after_the_standby_took_over(
    kafka_bootstrap: str, kafka_topics: KafkaTopics, tmp_path: Path
) -> None:
    inputs = submit_to_shards(kafka_bootstrap, kafka_topics, tmp_path)
    args = [*kafka_args(kafka_bootstrap, kafka_topics), "--partition", "default", *fixed_batch(8), *FAST_GROUP]
    errs = [tmp_path / "one.err", tmp_path / "two.err"]
    procs = [spawn_run(args, errs[0]), spawn_run(args, errs[1])]
    try:
        wait_for(lambda: sorted(str(runs(e)) for e in errs) == ["['default']", "[]"], "one owner, one standby",
                 procs, errs)
        owner = 0 if runs(errs[0]) == ["default"] else 1
        standby = 1 - owner
        wait_for(lambda: cycles_written(kafka_bootstrap, kafka_topics) >= 3, "the owner is mid-run", procs, errs)
        assert not shard_done(kafka_bootstrap, kafka_topics, "default", inputs["default"]), "finished too soon"
        procs[owner].send_signal(signal.SIGSTOP)
        frozen_at = cycles_written(kafka_bootstrap, kafka_topics)
        wait_for(lambda: runs(errs[standby]) == ["default"], "the standby took the shard over",
                 procs[standby:], errs[standby:], timeout=60)
        wait_for(lambda: cycles_written(kafka_bootstrap, kafka_topics) > frozen_at + 2,
                 "the standby appended cycles", procs[standby:], errs[standby:], timeout=60)
        procs[owner].send_signal(signal.SIGCONT)
        wait_for(lambda: shard_done(kafka_bootstrap, kafka_topics, "default", inputs["default"]),
                 "every input of the shard consumed", [procs[standby]], [errs[standby]], timeout=120)
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=60)
    finally:
        stop_all(procs)
    # Contiguous cycles, copies only identical, decisions equal simulate, replay verify ok.
    check_shard(kafka_bootstrap, kafka_topics, "default", inputs["default"])
