"""A 3-node Apache Kafka cluster (KRaft, replication 3, min.insync.replicas 2) loses brokers under load.

The service runs with exactly-once cycles on its own 3-node cluster. (a) The leader of the
input partition is SIGKILLed while the service works, the service goes on once leadership
has moved, the node is restarted; then the same for the leader of the decisions partition.
(b) The whole cluster is stopped and restarted under the running service, which waits and
goes on (its in-process restart, ``--kafka-outage-s``). Afterwards: every cycle exactly once,
every input consumed, the decisions equal ``simulate`` over the recorded cycles (same ids,
none lost, none changed), and ``replay verify`` re-derives every cycle. Progress is judged by
the group's committed input offset (committed in each cycle's transaction), never by time; the
inputs go in in parts, the later ones only while a leader is down (a) or after the restart (b),
so the service has work left after each fault however fast it ran before.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from events.models import ADMIN_TYPES
from scheduler.simulation.workload import WorkloadSpec
from tests.apache_kafka import KafkaCluster, KafkaNode, session_cluster
from tests.contracts.log_contract import run
from tests.faults.harness import ROOT, judge, verify_log
from tests.integration.test_kafka_topics import describe
from tests.kafka_broker import KafkaTopics, fresh_topics
from tests.kafka_run import kafka_args, produce, read_all, simulate_with_recorded_boundaries, submit_file, workload
from tests.procs import fixed_batch, stopping

pytestmark = [pytest.mark.faults, pytest.mark.kafka, pytest.mark.slow]
SPEC = WorkloadSpec(nodes=300, apps=40, asks=6000, leaves=8, seed=41)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with stopping(session_cluster(tmp_path_factory.mktemp("kafka-3"), size=3)) as three:
        yield three


def leader(bootstrap: str, topic: str) -> int:
    """The node id leading partition 0 of ``topic`` (asked until the cluster names one)."""
    from aiokafka.admin import AIOKafkaAdminClient

    async def body() -> int:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
        await admin.start()
        try:
            (described,) = await admin.describe_topics([topic])
            return int(described["partitions"][0]["leader"])
        finally:
            await admin.close()

    deadline = time.monotonic() + 60
    while True:
        try:
            found = run(body())
            if found >= 0:
                return found
        except Exception:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def committed(bootstrap: str, topics: KafkaTopics) -> int:
    """The group's committed offset of the input partition (0: none yet, or not answerable now)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def body() -> int:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=topics.group, enable_auto_commit=False,
                                    request_timeout_ms=5000)
        await consumer.start()
        try:
            return int(await consumer.committed(TopicPartition(topics.inputs, 0)) or 0)
        finally:
            await consumer.stop()

    try:
        return run(body())
    except Exception:  # a broker of the cluster is down right now: no answer is no progress
        return 0


def wait_progress(cluster: KafkaCluster, topics: KafkaTopics, at_least: int, service: subprocess.Popen[bytes],
                  err: Path, timeout: float = 240) -> int:
    deadline = time.monotonic() + timeout
    while (now := committed(cluster.bootstrap, topics)) < at_least:
        assert service.poll() is None, f"the service exited {service.returncode}:\n{err.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"{now} of {at_least} inputs committed:\n{err.read_text()[-3000:]}"
        time.sleep(0.3)
    return now


def _fresh_dir(parent: Path, name: str) -> Path:
    (parent / name).mkdir()
    return parent / name


def start_service(args: list[str], err: Path) -> subprocess.Popen[bytes]:
    with open(err, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "scheduler", "run", *args], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=out)


def check_log(bootstrap: str, topics: KafkaTopics, total: int) -> Any:
    inputs, outs = read_all(bootstrap, topics)
    assert len(inputs) == total
    cycles = [o["data"]["cycle"] for o in outs if o["type"] == "cycle.completed"]
    assert cycles == list(range(1, len(cycles) + 1)), "a cycle is missing or written twice"
    got = judge(outs, {f"{topics.inputs}/0": total})
    assert got.copies == 0, "exactly-once: no decision is written twice"
    assert got.decisions == simulate_with_recorded_boundaries(inputs, outs), "a decision was lost or changed"
    report = verify_log(kafka_args(bootstrap, topics))
    assert report["ok"] and report["unconsumed_inputs"] == 0 and report["incomplete_cycle"] is None, report
    return got


def finish(service: subprocess.Popen[bytes], cluster: KafkaCluster, topics: KafkaTopics, total: int,
           err: Path) -> None:
    wait_progress(cluster, topics, total, service, err)
    service.send_signal(signal.SIGTERM)
    assert service.wait(timeout=60) == 0, err.read_text()[-3000:]


def on_input_partition(evts: list[dict[str, Any]]) -> int:
    """How many of ``evts`` go to the input partition (``committed`` counts those; the rules changes
    travel on the admin topic)."""
    return sum(e["type"] not in ADMIN_TYPES for e in evts)


def test_killing_the_input_then_the_decisions_leader_loses_and_changes_nothing(
    cluster: KafkaCluster, tmp_path: Path
) -> None:
    topics = fresh_topics("leaders")
    evts = workload(SPEC)
    total = len(evts)
    # In thirds: the second and the third are submitted only once a leader is down, so the progress
    # the test then waits for is on inputs that arrived after the kill, however fast the service is.
    parts = [evts[: total // 3], evts[total // 3 : 2 * total // 3], evts[2 * total // 3 :]]
    submit_file(cluster.bootstrap, topics, parts[0], _fresh_dir(tmp_path, "part-0"))
    submitted = on_input_partition(parts[0])
    configs, replication, _ = describe(cluster.bootstrap, [topics.inputs])
    assert (replication[topics.inputs], configs[topics.inputs]["min.insync.replicas"]) == (3, "2")
    err = tmp_path / "run.err"
    service = start_service([*kafka_args(cluster.bootstrap, topics), *fixed_batch(8),
                             "--snapshot-dir", str(tmp_path / "snap")], err)
    try:
        wait_progress(cluster, topics, submitted // 3, service, err)
        for step, topic in enumerate((topics.inputs, topics.decisions), start=1):
            victim: KafkaNode = cluster.node(leader(cluster.bootstrap, topic))
            cluster.kill(victim)
            produce(cluster.bootstrap, topics, parts[step])  # a producer rides out the failover
            before, submitted = submitted, submitted + on_input_partition(parts[step])
            # The service keeps deciding once leadership has moved to a surviving replica.
            wait_progress(cluster, topics, before + (submitted - before) // 2, service, err)
            cluster.restart(victim)
        finish(service, cluster, topics, submitted, err)
    finally:
        if service.poll() is None:
            service.kill()
            service.wait()
    got = check_log(cluster.bootstrap, topics, total)
    print(f"\nFAULTS Kafka 3-node leader kills: {total} inputs, {got.cycles} cycles, {len(got.decisions)} decisions "
          "equal simulate; replay verify ok")


def test_the_whole_cluster_stopped_and_restarted_under_load(cluster: KafkaCluster, tmp_path: Path) -> None:
    topics = fresh_topics("restart")
    evts = workload(SPEC)
    total = len(evts)
    first, second = evts[: total // 2], evts[total // 2 :]
    submit_file(cluster.bootstrap, topics, first, _fresh_dir(tmp_path, "first"))
    err = tmp_path / "run.err"
    service = start_service([*kafka_args(cluster.bootstrap, topics), *fixed_batch(8), "--request-timeout-ms",
                             "10000", "--snapshot-dir", str(tmp_path / "snap")], err)
    try:
        wait_progress(cluster, topics, on_input_partition(first) // 3, service, err)
        cluster.stop()
        for node in cluster.nodes:
            cluster.start_node(node)
        cluster.wait_ready()
        # Submitted after the restart: the service, still the same process, must decide these too.
        produce(cluster.bootstrap, topics, second)
        finish(service, cluster, topics, on_input_partition(evts), err)
    finally:
        if service.poll() is None:
            service.kill()
            service.wait()
    got = check_log(cluster.bootstrap, topics, total)
    print(f"\nFAULTS Kafka 3-node cluster restart: {total} inputs, {got.cycles} cycles, {len(got.decisions)} "
          "decisions equal simulate; replay verify ok")
