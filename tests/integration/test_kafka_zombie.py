"""The zombie: an instance frozen past its session timeout, taken over, then resumed with work to do.

Instance A runs the one shard over the first half of the inputs; once it has consumed all of
them it is frozen (SIGSTOP) and the second half is submitted, so A is certain to have inputs it
has not read when it runs again. A is frozen until the group expels it; B takes the shard over
(restoring it from the decisions topic) and goes on; then A is resumed while it still believes
it owns the shard, reads the inputs that arrived while it was frozen and decides a cycle over
them. With transactions (one stable transactional id per shard) B's producer fenced A's: A's
commit fails, and A says so and drops the shard. Afterwards a read_committed reader sees every
cycle exactly once — not even an identical copy — and the decisions equal an undisturbed run
(``simulate`` over the recorded cycles). Every step waits on what the test observes (A's and
B's progress in the decisions topic, their log lines), never on the machine's speed. With
``--no-transactions`` nothing fences A at the broker and this test fails (A's own output-end
check refuses the cycle and the shard fails instead of being fenced; ``EVSCHED_ZOMBIE_NO_TXN=1``
runs it that way, to see it fail).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from scheduler.simulation.workload import WorkloadSpec
from tests.integration.test_kafka_shards import check_shard, consumed, runs, stop_all, wait_for
from tests.integration.test_kafka_transactions import transactions_or_skip
from tests.kafka_broker import KafkaTopics
from tests.kafka_run import kafka_args, read_all, spawn_run, submit_file, workload
from tests.procs import fixed_batch

pytestmark = pytest.mark.kafka
SPEC = WorkloadSpec(nodes=200, apps=30, asks=2500, leaves=6, seed=29)
SESSION = ["--session-timeout-ms", "3000"]  # A is expelled ~3 s after it freezes


def test_a_frozen_instance_taken_over_is_fenced_and_changes_nothing(
    kafka_bootstrap: str, kafka_topics: KafkaTopics, tmp_path: Path
) -> None:
    transactions_or_skip(kafka_bootstrap, kafka_topics)
    evts = workload(SPEC)
    total = len(evts)
    first, second = evts[: total // 2], evts[total // 2 :]
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    submit_file(kafka_bootstrap, kafka_topics, first, tmp_path / "first")
    txn = ["--no-transactions"] if os.environ.get("EVSCHED_ZOMBIE_NO_TXN") == "1" else []
    args = [*kafka_args(kafka_bootstrap, kafka_topics), "--partition", "default", *fixed_batch(8), *SESSION, *txn]
    errs = [tmp_path / "a.err", tmp_path / "b.err"]
    a = spawn_run(args, errs[0])
    procs = [a]
    try:
        wait_for(lambda: runs(errs[0]) == ["default"], "A runs the shard", procs, errs[:1])
        wait_for(lambda: consumed(kafka_bootstrap, kafka_topics, "default") == len(first),
                 "A consumed the first half", procs, errs[:1])
        a.send_signal(signal.SIGSTOP)
        # Submitted while A is frozen: inputs A has certainly not read when it runs again.
        submit_file(kafka_bootstrap, kafka_topics, second, tmp_path / "second")
        b = spawn_run(args, errs[1])
        procs.append(b)
        # B gets the shard only once the group has expelled A (session timeout), then goes on.
        wait_for(lambda: runs(errs[1]) == ["default"], "B took the shard over", [b], errs[1:])
        wait_for(lambda: consumed(kafka_bootstrap, kafka_topics, "default") > len(first),
                 "B's cycles after the takeover", [b], errs[1:])
        a.send_signal(signal.SIGCONT)
        wait_for(lambda: b"fenced" in errs[0].read_bytes() or b"failed" in errs[0].read_bytes(),
                 "A tried to write after the takeover", procs, errs)
        wait_for(lambda: consumed(kafka_bootstrap, kafka_topics, "default") == total,
                 "every input consumed", procs, errs, timeout=120)
        for p in procs:
            p.send_signal(signal.SIGTERM)
        assert [p.wait(timeout=30) for p in procs] == [0, 0], [e.read_text()[-2000:] for e in errs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
        stop_all(procs)
    # Every cycle exactly once in the committed log: nothing A wrote after B took over is visible.
    _, outs = read_all(kafka_bootstrap, kafka_topics)
    cycles = [o["data"]["cycle"] for o in outs if o["type"] == "cycle.completed"]
    assert cycles == list(range(1, len(cycles) + 1)), "a cycle was written twice (the zombie's) or is missing"
    assert check_shard(kafka_bootstrap, kafka_topics, "default", total) > 0
    a_log = errs[0].read_text()
    assert "shard default: fenced: another instance took over" in a_log, a_log[-3000:]
    assert "evsched.shards: shard default failed" not in a_log
