"""The shim and the service apart over Apache Kafka: `evsched k8s --kafka` beside `evsched run --kafka`.

A real kube-apiserver with KWOK nodes (tests/kube_cluster.py) and the project's Apache Kafka
broker (tests/kafka_broker.py): the shim produces the cluster's pods and nodes to the input topic
and binds what the service decides on the decisions topic. The shim is killed mid-stream and
started again while pods come and go: every pod is decided once and bound where the log says,
and `replay verify` re-derives the Kafka log's decisions.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli import evsched
from tests.integration.test_kubernetes import Scenario, assert_each_ask_decided_once, bind_across_a_restart, run
from tests.kafka_broker import KafkaTopics
from tests.kafka_run import decisions, kafka_args, read_all
from tests.kube_cluster import KubeCluster, session_cluster
from tests.procs import stop_group, stopping

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    with stopping(session_cluster(tmp_path_factory.mktemp("k8s-kafka"))) as cluster:
        yield cluster


class ApartScenario(Scenario):
    """`evsched run --kafka` (the service) and `evsched k8s --kafka` (the shim) as two processes."""

    def __init__(self, cluster: KubeCluster, workdir: Path, bootstrap: str, topics: KafkaTopics) -> None:
        super().__init__(cluster, workdir)
        self.kafka = kafka_args(bootstrap, topics)
        self.bootstrap, self.topics = bootstrap, topics
        self.service: subprocess.Popen[bytes] | None = None

    def start_service(self) -> None:
        # the queues first, on the admin topic, so that no input of the shim's is read before them
        evsched("config", "apply", str(self.config), *self.kafka)
        self.service = self._spawn("service", ["run", *self.kafka])

    def start(self) -> None:
        self.proc = self._spawn("evsched", ["k8s", "--kubeconfig", str(self.cluster.kubeconfig),
                                            "--scheduler-name", self.name, *self.kafka])

    def stop_all(self) -> None:
        self.stop()
        if self.service is not None and self.service.poll() is None:
            stop_group(self.service, grace_s=20.0)

    def output(self) -> str:
        service = (self.workdir / "service.log").read_text(errors="replace")[-2000:]
        return f"{super().output()}\n--- service:\n{service}"

    def decisions(self) -> list[dict[str, Any]]:
        return [{"data": d} for d in decisions(read_all(self.bootstrap, self.topics)[1])]


@pytest.fixture
def apart(cluster: KubeCluster, tmp_path: Path, kafka_bootstrap: str, kafka_topics: KafkaTopics
          ) -> Iterator[ApartScenario]:
    scenario = ApartScenario(cluster, tmp_path, kafka_bootstrap, kafka_topics)
    try:
        yield scenario
    finally:
        scenario.stop_all()
        scenario.tear_down()


def test_shim_and_service_apart_over_kafka_bind_every_pod_once_across_a_shim_restart(apart: ApartScenario) -> None:
    apart.start_service()
    run(lambda api: bind_across_a_restart(apart, api, pods=9), apart)  # the shim alone restarts
    assert_each_ask_decided_once(apart)
    shim_log = (apart.workdir / "evsched.log").read_text(errors="replace")
    assert "differs from the recorded digest" not in shim_log, "the shim's folded state is not the service's"
    folded = [int(n) for n in re.findall(r"\((\d+) cycles folded", shim_log)]
    assert len(folded) == 2 and folded[1] > 0, folded  # the restarted shim reconciled with the state folded
    apart.stop_all()
    done = evsched("replay", "verify", *apart.kafka, check=False, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
