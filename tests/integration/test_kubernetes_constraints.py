"""Where a pod may run, on a real kube-apiserver with KWOK's nodes: evsched and kube-scheduler (built
from the same module) side by side, the same pods each, nodes with labels and a taint.

Every pod has the nodes Kubernetes' own filters allow it (worked out here from the pod and the
nodes); evsched's pod must land on one of them, as kube-scheduler's twin does, on the same node
where only one is allowed; a pod no node allows stays Pending under both, and evsched's
FailedScheduling event names the constraint. ``replay verify`` passes on evsched's log.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler.kubernetes.api import KubeApi
from tests.integration.test_kubernetes import Scenario, run, scenario_in, verify
from tests.kube_cluster import KubeCluster, session_cluster
from tests.procs import free_port, stop_group, stopping


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    with stopping(session_cluster(tmp_path_factory.mktemp("k8s-constraints"))) as cluster:
        yield cluster


@pytest.fixture
def scenario(cluster: KubeCluster, tmp_path: Path) -> Iterator[Scenario]:
    yield from scenario_in(cluster, tmp_path)


GPU_TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def selector(**labels: str) -> dict[str, Any]:
    return {"nodeSelector": labels}


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}}


def host_port(port: int) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "fake", "ports": [{"containerPort": 80, "hostPort": port}],
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}


def reporter(event: dict[str, Any]) -> str:
    """Who reported an event (kube-scheduler writes events.k8s.io events: no ``source``)."""
    return str((event.get("source") or {}).get("component") or event.get("reportingComponent") or "")


def start_kube_scheduler(cluster: KubeCluster, workdir: Path) -> subprocess.Popen[bytes]:
    out = open(workdir / "kube-scheduler.log", "ab")  # noqa: SIM115
    try:
        return subprocess.Popen(
            [str(cluster.binaries / "kube-scheduler"), f"--kubeconfig={cluster.kubeconfig}",
             f"--authentication-kubeconfig={cluster.kubeconfig}", f"--authorization-kubeconfig={cluster.kubeconfig}",
             "--leader-elect=false", f"--secure-port={free_port()}", "--bind-address=127.0.0.1", "-v=0"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    finally:
        out.close()


def test_pods_land_where_kubernetes_would_put_them(scenario: Scenario, tmp_path: Path) -> None:
    kube_scheduler = start_kube_scheduler(scenario.cluster, tmp_path)

    async def body(api: KubeApi) -> None:
        async def node(suffix: str, labels: dict[str, str], taints: list[dict[str, str]]) -> str:
            name = f"{scenario.name}-{suffix}"
            scenario.nodes.append(name)
            await api.request("POST", "/api/v1/nodes", {
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                             "labels": {"type": "kwok", **labels}},
                "spec": {"taints": taints},
                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                           "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
            })
            return name

        zone_a = await node("a", {"zone": "a"}, [])
        zone_b = await node("b", {"zone": "b"}, [])
        gpu = await node("gpu", {"zone": "b", "cores": "16"}, [GPU_TAINT])
        scenario.start()
        no_tolerations: dict[str, Any] = {"tolerations": []}
        tolerate_gpu = {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu",
                                         "effect": "NoSchedule"}]}
        # name → (pod spec additions, the nodes Kubernetes' filters allow)
        cases: dict[str, tuple[dict[str, Any], set[str]]] = {
            "sel-a": ({**selector(zone="a"), **no_tolerations}, {zone_a}),
            "sel-b": ({**selector(zone="b"), **no_tolerations}, {zone_b}),  # the tainted zone-b node is out
            "gpu-ok": ({**affinity({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}),
                        **tolerate_gpu}, {zone_b, gpu}),
            "big": ({**affinity({"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["8"]}]}),
                     **tolerate_gpu}, {gpu}),
            "not-b": ({**affinity({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["b"]}]}),
                       **no_tolerations}, {zone_a}),
            "fields": ({**affinity({"matchExpressions": [{"key": "zone", "operator": "Exists"}],
                                    "matchFields": [{"key": "metadata.name", "operator": "NotIn",
                                                     "values": [zone_b]}]},
                                   {"matchFields": [{"key": "metadata.name", "operator": "In",
                                                     "values": ["no-such-node"]}]}),
                        **no_tolerations}, {zone_a}),
            "nowhere": ({**selector(zone="c")}, set()),
        }
        for prefix, scheduler in (("e", scenario.name), ("k", "default-scheduler")):
            for name, (spec, _) in cases.items():
                await scenario.pod(api, f"{prefix}-{name}", cpu="100m", app="place", queue="root.low",
                                   scheduler=scheduler, spec=spec)
        # host ports: two pods of each scheduler want one port on zone a (each scheduler its own port:
        # neither sees the other's pods' ports); one of each runs, the other waits
        for prefix, scheduler, port in (("e", scenario.name, 8080), ("k", "default-scheduler", 9090)):
            for i in range(2):
                await scenario.pod(api, f"{prefix}-port-{i}", app="place", queue="root.low", scheduler=scheduler,
                                   spec={**host_port(port), **selector(zone="a")})
        running = [f"{p}-{n}" for p in "ek" for n in cases if n != "nowhere"]
        pods = await scenario.running(api, running)
        for name, (_, allowed) in cases.items():
            if not allowed:
                continue
            ours, theirs = pods[f"e-{name}"]["spec"]["nodeName"], pods[f"k-{name}"]["spec"]["nodeName"]
            assert ours in allowed and theirs in allowed, (name, ours, theirs, allowed)
            if len(allowed) == 1:
                assert ours == theirs, name

        async def ports_settled() -> bool:
            pods = await scenario.pods(api)
            return all(sum(pods[f"{p}-port-{i}"].get("status", {}).get("phase") == "Running" for i in range(2)) == 1
                       for p in "ek")

        await scenario.until("one pod of each host-port pair Running", ports_settled)
        pods = await scenario.pods(api)
        waiting = {p: next(f"{p}-port-{i}" for i in range(2) if pods[f"{p}-port-{i}"]["status"]["phase"] != "Running")
                   for p in "ek"}
        for p in "ek":
            winner = next(f"{p}-port-{i}" for i in range(2) if f"{p}-port-{i}" != waiting[p])
            assert pods[winner]["spec"]["nodeName"] == zone_a

        async def reported() -> bool:
            events = await scenario.events(api, "FailedScheduling")
            about = {e["involvedObject"]["name"] for e in events if reporter(e) == scenario.name}
            kube = {e["involvedObject"]["name"] for e in events if reporter(e) == "default-scheduler"}
            return {"e-nowhere", waiting["e"]} <= about and {"k-nowhere", waiting["k"]} <= kube

        await scenario.until("FailedScheduling of the pods no node takes, from both schedulers", reported)
        events = await scenario.events(api, "FailedScheduling")
        ours = {e["involvedObject"]["name"]: e["message"] for e in events if reporter(e) == scenario.name}
        assert "0/3 nodes are available: 3 node selector mismatch" in ours["e-nowhere"], ours["e-nowhere"]
        assert "1 host port TCP/8080 in use" in ours[waiting["e"]], ours[waiting["e"]]
        assert "2 node selector mismatch" in ours[waiting["e"]], ours[waiting["e"]]
        pods = await scenario.pods(api)
        assert pods["e-nowhere"]["status"]["phase"] == "Pending" and pods["k-nowhere"]["status"]["phase"] == "Pending"

    try:
        run(body, scenario)
    finally:
        stop_group(kube_scheduler, grace_s=10.0)
    verify(scenario)
