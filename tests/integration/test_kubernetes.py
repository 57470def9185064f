"""`evsched k8s` against a real kube-apiserver with KWOK's fake nodes (tests/kube_cluster.py).

One control plane for the module; every test makes its own nodes and namespace, and a scheduler
name of its own, so the pods of other tests are another scheduler's to it. Pods reach Running
because KWOK runs what is bound to its nodes: nothing here is mocked.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from scheduler.kubernetes.api import ApiError, KubeApi, load_kubeconfig
from tests.cli import evsched, evsched_env
from tests.kube_cluster import KubeCluster, session_cluster
from tests.procs import start_logged, stop_group, stopping
from tests.sim import root_queues

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 240.0  # a bound on hangs only: progress is polled, never timed
CONFIG = root_queues("""
    - name: default
    - name: low
      resources: {guaranteed: {vcore: 100m}}
      properties: {preemption.delay: 1s}
    - name: high
      resources: {guaranteed: {vcore: 4}}
      properties: {preemption.delay: 1s}
""", rules="""
    - name: provided
    - name: tag
      value: namespace
      create: true
""")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    with stopping(session_cluster(tmp_path_factory.mktemp("k8s"))) as cluster:
        yield cluster


class Scenario:
    """One test's scheduler name, namespace, nodes and `evsched k8s` process."""

    def __init__(self, cluster: KubeCluster, workdir: Path) -> None:
        self.cluster = cluster
        self.workdir = workdir
        self.name = "evsched-" + uuid.uuid4().hex[:8]
        self.namespace = self.name
        self.log = workdir / "log"
        self.config = workdir / "queues.yaml"
        self.config.write_text(CONFIG)
        self.proc: subprocess.Popen[bytes] | None = None
        self.nodes: list[str] = []
        self.priority_classes: list[str] = []

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        """``python -m scheduler ARGS`` in its own process group, its output in ``<workdir>/<name>.log``."""
        return start_logged([sys.executable, "-m", "scheduler", *args], self.workdir / f"{name}.log", ROOT,
                            evsched_env())

    def start(self) -> None:
        self.proc = self._spawn("evsched", ["k8s", "--kubeconfig", str(self.cluster.kubeconfig),
                                            "--scheduler-name", self.name, "--log", str(self.log),
                                            "--config", str(self.config)])

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            if sig == signal.SIGKILL:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
            else:
                stop_group(self.proc, grace_s=20.0)
        self.proc = None

    def output(self) -> str:
        return (self.workdir / "evsched.log").read_text(errors="replace")[-4000:]

    async def setup(self, api: KubeApi) -> None:
        await api.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                         "metadata": {"name": self.namespace}})

    async def node(self, api: KubeApi, cpu: str = "4", memory: str = "8Gi", labels: dict[str, str] | None = None
                   ) -> str:
        name = f"{self.name}-n{len(self.nodes)}"
        self.nodes.append(name)
        await api.request("POST", "/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                         "labels": {"type": "kwok", **(labels or {})}},
            "spec": {"taints": []},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
                       "capacity": {"cpu": cpu, "memory": memory, "pods": "110"}},
        })
        return name

    async def pod(self, api: KubeApi, name: str, cpu: str = "1", *, app: str | None = None, queue: str | None = None,
                  priority_class: str | None = None, scheduler: str | None = None, node_name: str | None = None,
                  spec: dict[str, Any] | None = None) -> None:
        labels = {k: v for k, v in (("applicationId", app), ("queue", queue)) if v}
        body_spec: dict[str, Any] = {
            "schedulerName": scheduler or self.name,
            "containers": [{"name": "c", "image": "fake", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}],
            "tolerations": [{"operator": "Exists"}], **(spec or {}),
        }
        if priority_class is not None:  # the API server's Priority admission resolves it into spec.priority
            body_spec["priorityClassName"] = priority_class
        if node_name:
            body_spec["nodeName"] = node_name
        await api.request("POST", f"/api/v1/namespaces/{self.namespace}/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": body_spec})

    async def pods(self, api: KubeApi) -> dict[str, dict[str, Any]]:
        listed = await api.list(f"/api/v1/namespaces/{self.namespace}/pods")
        return {p["metadata"]["name"]: p for p in listed["items"]}

    async def events(self, api: KubeApi, reason: str) -> list[dict[str, Any]]:
        listed = await api.list(f"/api/v1/namespaces/{self.namespace}/events")
        return [e for e in listed["items"] if e.get("reason") == reason]

    async def until(self, what: str, check: Callable[[], Awaitable[bool]]) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT_S
        while not await check():
            if self.proc is not None and self.proc.poll() is not None:
                pytest.fail(f"evsched k8s exited ({self.proc.returncode}) waiting for {what}:\n{self.output()}")
            if loop.time() > deadline:
                pytest.fail(f"not reached: {what}\n{self.output()}")
            await asyncio.sleep(0.2)

    async def running(self, api: KubeApi, names: list[str]) -> dict[str, dict[str, Any]]:
        async def check() -> bool:
            pods = await self.pods(api)
            return all(pods.get(n, {}).get("status", {}).get("phase") == "Running" for n in names)

        await self.until(f"pods {names} Running", check)
        return await self.pods(api)

    def tear_down(self) -> None:
        """``cleanup`` with an API client of its own: the end of a test's fixture."""
        async def body() -> None:
            api = KubeApi(load_kubeconfig(self.cluster.kubeconfig))
            try:
                await self.cleanup(api)
            finally:
                await api.close()

        asyncio.run(body())

    async def cleanup(self, api: KubeApi) -> None:
        self.stop()
        for node in self.nodes:
            with contextlib.suppress(ApiError):
                await api.request("DELETE", f"/api/v1/nodes/{node}")
        with contextlib.suppress(ApiError):
            await api.request("DELETE", f"/api/v1/namespaces/{self.namespace}")
        for name in self.priority_classes:
            with contextlib.suppress(ApiError):
                await api.request("DELETE", f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")

    def decisions(self) -> list[dict[str, Any]]:
        done = subprocess.run([sys.executable, "-m", "scheduler", "log", "cat", "--log", str(self.log), "--outputs"],
                              cwd=ROOT, capture_output=True, check=False)
        records = [orjson.loads(line) for line in done.stdout.splitlines() if line.startswith(b"{")]
        return [r for r in records if r.get("type") == "allocation.decided"]


@pytest.fixture
def scenario(cluster: KubeCluster, tmp_path: Path) -> Iterator[Scenario]:
    yield from scenario_in(cluster, tmp_path)


def scenario_in(cluster: KubeCluster, tmp_path: Path) -> Iterator[Scenario]:
    """A test's scenario, cleaned up after it (nodes, namespace, priority classes, the process)."""
    scenario = Scenario(cluster, tmp_path)
    try:
        yield scenario
    finally:
        scenario.tear_down()


def run(body: Callable[[KubeApi], Awaitable[None]], scenario: Scenario) -> None:
    async def main() -> None:
        api = KubeApi(load_kubeconfig(scenario.cluster.kubeconfig))
        try:
            await scenario.setup(api)
            await body(api)
        finally:
            await api.close()

    asyncio.run(main())


def verify(scenario: Scenario) -> None:
    scenario.stop()
    done = evsched("replay", "verify", "--log", str(scenario.log), check=False, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_pods_of_several_apps_and_queues_run(scenario: Scenario) -> None:
    async def body(api: KubeApi) -> None:
        nodes = [await scenario.node(api) for _ in range(3)]
        # another scheduler's pod, bound by hand: it occupies its node (3 of 4 cores)
        await scenario.pod(api, "foreign", cpu="3", scheduler="default-scheduler", node_name=nodes[0])
        scenario.start()
        for i in range(3):
            await scenario.pod(api, f"a-{i}", app="app-a", queue="root.low")
        for i in range(2):
            await scenario.pod(api, f"b-{i}", app="app-b", queue="root.high")
        await scenario.pod(api, "plain")  # no labels: app yunikorn-<ns>-autogen, placed by its namespace tag
        daemon = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                    "values": [nodes[2]]}]}]}}}}
        await scenario.pod(api, "daemon", cpu="100m", app="ds", spec=daemon)
        names = ["a-0", "a-1", "a-2", "b-0", "b-1", "plain", "daemon"]
        pods = await scenario.running(api, names)
        assert pods["daemon"]["spec"]["nodeName"] == nodes[2]
        on_first = [n for n in names if pods[n]["spec"]["nodeName"] == nodes[0]]
        assert len(on_first) <= 1, f"{on_first} share {nodes[0]} with the foreign pod's 3 cores"
        # a finished pod releases its resources: delete every pod, the apps complete
        for name in names:
            await api.request("DELETE", f"/api/v1/namespaces/{scenario.namespace}/pods/{name}",
                              params={"gracePeriodSeconds": "0"})

    run(body, scenario)
    decided = scenario.decisions()
    assert sorted(d["data"]["ask_id"].split(".", 1)[1] for d in decided) == sorted(
        ["a-0", "a-1", "a-2", "b-0", "b-1", "plain", "daemon"])
    queues = {d["data"]["ask_id"].split(".", 1)[1]: d["data"]["queue"] for d in decided}
    assert (queues["a-0"], queues["b-0"], queues["plain"]) == ("root.low", "root.high", f"root.{scenario.namespace}")
    apps = {d["data"]["ask_id"].split(".", 1)[1]: d["data"]["app_id"] for d in decided}
    assert apps["plain"] == f"yunikorn-{scenario.namespace}-autogen"
    verify(scenario)


def test_priority_preemption_deletes_a_victim_and_binds_the_preemptor(scenario: Scenario) -> None:
    async def body(api: KubeApi) -> None:
        await scenario.node(api, cpu="2")
        scenario.start()
        urgent = scenario.name + "-urgent"
        await api.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": urgent},
            "value": 1000})
        # YuniKorn's opt-out on a PriorityClass (mirrored by the shim): its pods are never victims
        protected = scenario.name + "-protected"
        await api.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "value": 0,
            "metadata": {"name": protected, "annotations": {"yunikorn.apache.org/allow-preemption": "false"}}})
        scenario.priority_classes += [urgent, protected]
        await scenario.pod(api, "low-0", app="batch", queue="root.low", priority_class=protected)
        await scenario.pod(api, "low-1", app="batch", queue="root.low")
        await scenario.running(api, ["low-0", "low-1"])
        await scenario.pod(api, "urgent", app="online", queue="root.high", priority_class=urgent)
        pods = await scenario.running(api, ["urgent"])
        assert [n for n in pods if n.startswith("low-")] == ["low-0"], "low-1 the victim, low-0's class protects it"
        preempted = await scenario.events(api, "Preempted")
        assert len(preempted) == 1 and "urgent" in preempted[0]["message"], preempted

    run(body, scenario)
    verify(scenario)


def test_a_pod_that_fits_nowhere_says_why(scenario: Scenario) -> None:
    async def body(api: KubeApi) -> None:
        await scenario.node(api, cpu="2")
        scenario.start()
        await scenario.pod(api, "huge", cpu="16", app="big", queue="root.low")

        async def reported() -> bool:
            return bool(await scenario.events(api, "FailedScheduling"))

        await scenario.until("a FailedScheduling event", reported)
        event = (await scenario.events(api, "FailedScheduling"))[0]
        assert event["source"]["component"] == scenario.name
        assert "huge" in event["message"] and "vcore" in event["message"], event["message"]
        pod = (await scenario.pods(api))["huge"]
        condition = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
        assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")

    run(body, scenario)


async def bind_across_a_restart(scenario: Scenario, api: KubeApi, pods: int) -> None:
    """Two nodes; pods ``p-0``… created; the shim SIGKILLed once ``p-0`` runs (decisions may be in
    the log and not yet bound), pods up to ``p-<pods-1>`` created while it is down and ``p-5``
    deleted; the shim started again: every pod left runs on the node its decision named."""
    for _ in range(2):
        await scenario.node(api, cpu="8")
    scenario.start()
    for i in range(6):
        await scenario.pod(api, f"p-{i}", app="app", queue="root.low", cpu="500m")
    await scenario.running(api, ["p-0"])
    scenario.stop(signal.SIGKILL)
    for i in range(6, pods):
        await scenario.pod(api, f"p-{i}", app="app", queue="root.low", cpu="500m")
    await api.request("DELETE", f"/api/v1/namespaces/{scenario.namespace}/pods/p-5",
                      params={"gracePeriodSeconds": "0"})
    scenario.start()
    names = [f"p-{i}" for i in range(pods) if i != 5]
    running = await scenario.running(api, names)
    outputs = await asyncio.to_thread(scenario.decisions)  # a Kafka log's reader runs an event loop of its own
    decided = {d["data"]["ask_id"].split(".", 1)[1]: d["data"]["node_id"] for d in outputs}
    for name in names:
        assert decided[name] == running[name]["spec"]["nodeName"], name


def assert_each_ask_decided_once(scenario: Scenario) -> None:
    decided = [d["data"]["ask_id"] for d in scenario.decisions()]
    assert len(decided) == len(set(decided)), "an ask decided twice"
    assert "already bound" not in scenario.output()


def test_a_restart_mid_stream_binds_every_pod_once(scenario: Scenario) -> None:
    run(lambda api: bind_across_a_restart(scenario, api, pods=10), scenario)
    assert_each_ask_decided_once(scenario)
    verify(scenario)
