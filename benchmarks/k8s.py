"""Pods per second through a real API server: evsched (`evsched k8s`) beside kube-scheduler, on KWOK nodes.

The field's measure (YuniKorn's KWOK figures, kube-scheduler's scheduler_perf): a backlog of
pods created as fast as one client can, timed from the first creation to the last pod Running
(and to the last pod bound), seen through a watch.
One control plane (tests/kube_cluster.py: etcd, kube-apiserver v1.34.2, KWOK v0.7.0, built once
from the Go module proxy), ``--nodes`` KWOK nodes of 32 cores, 256 GiB and 110 pods each, and for
each shape (apps × pods per app; ``full``: pods of 8 cores, 4 per node, filling every node) each
scheduler in turn on the same cluster: ``evsched k8s`` over a fresh embedded log (then ``replay
verify`` of that log: its decisions are what the core re-derives), and kube-scheduler built from
the same Kubernetes module (client QPS raised to 5,000, as its scheduler_perf runs; at its
default 50 QPS it binds 50 pods/s). Pods are deleted between runs.

    python benchmarks/k8s.py [--nodes 1000] [--shapes 1x5000,5x1000,25x200,full] [--schedulers evsched,kube-scheduler]
        [--backlog]

``--backlog`` creates every pod first and starts the scheduler after, timing from its start:
the scheduler's own rate (start-up included), where the default is bounded by the creating client.

Prints one table row per shape and scheduler (pods/s, seconds, creation rate) and the ratio
evsched / kube-scheduler per shape. YuniKorn 1.9 (k8shim v1.9.0) is not run: see
benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scheduler.kubernetes.api import ApiError, KubeApi, load_kubeconfig  # noqa: E402
from tests.kube_cluster import K8S_VERSION, KubeCluster, build  # noqa: E402
from tests.procs import free_port, stop_group  # noqa: E402

NAMESPACE = "bench"
NODE_CPU, NODE_MEMORY, NODE_PODS = 32, "256Gi", 110
CREATORS = 32  # concurrent creating requests (one client, as YuniKorn's and kube-scheduler's benchmarks use)


async def gather_limited(count: int, make: Any, limit: int = CREATORS) -> None:
    gate = asyncio.Semaphore(limit)

    async def one(i: int) -> None:
        async with gate:
            await make(i)

    await asyncio.gather(*(one(i) for i in range(count)))


async def make_nodes(api: KubeApi, count: int) -> None:
    async def node(i: int) -> None:
        resources = {"cpu": str(NODE_CPU), "memory": NODE_MEMORY, "pods": str(NODE_PODS)}
        await api.request("POST", "/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"kwok-{i:05d}", "annotations": {"kwok.x-k8s.io/node": "fake"},
                         "labels": {"type": "kwok"}},
            "status": {"allocatable": resources, "capacity": resources}})

    await gather_limited(count, node)
    while True:  # KWOK marks them Ready
        listed = await api.list("/api/v1/nodes")
        ready = sum(1 for n in listed["items"] for c in n.get("status", {}).get("conditions") or []
                    if c.get("type") == "Ready" and c.get("status") == "True")
        if ready >= count:
            return
        await asyncio.sleep(0.5)


def shape_pods(shape: str, nodes: int) -> list[tuple[str, str]]:
    """(app id, cpu request) per pod of a shape: ``AxP`` (A apps of P pods, 10m each) or ``full``."""
    if shape == "full":
        per_node = 4  # 4 × 8 cores fill a 32-core node
        return [(f"full-{i // 100}", str(NODE_CPU // per_node)) for i in range(nodes * per_node)]
    apps, per_app = (int(x) for x in shape.split("x"))
    return [(f"app-{a}", "10m") for a in range(apps) for _ in range(per_app)]


async def run_shape(api: KubeApi, scheduler_name: str, pods: list[tuple[str, str]], start: Any,
                    backlog: bool) -> tuple[float, float, float]:
    """Start the scheduler (``start()``), create the pods and watch them: (seconds until every one is bound, until
    every one is Running, creating). ``backlog``: the pods are created first, the clock starts with the scheduler."""
    start_version = (await api.list(f"/api/v1/namespaces/{NAMESPACE}/pods"))["resourceVersion"]
    bound: set[str] = set()
    running: set[str] = set()
    times = {"bound": 0.0, "running": 0.0}
    began = time.perf_counter()

    async def watch() -> None:
        version = start_version
        while len(running) < len(pods):
            async for event in api.watch(f"/api/v1/namespaces/{NAMESPACE}/pods", version):
                obj = event.get("object") or {}
                version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                name = str((obj.get("metadata") or {}).get("name"))
                if (obj.get("spec") or {}).get("nodeName") and name not in bound:
                    bound.add(name)
                    if len(bound) == len(pods):
                        times["bound"] = time.perf_counter() - began
                if (obj.get("status") or {}).get("phase") == "Running" and name not in running:
                    running.add(name)
                    if len(running) == len(pods):
                        times["running"] = time.perf_counter() - began
                        return

    async def pod(i: int) -> None:
        app, cpu = pods[i]
        await api.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p-{i:06d}", "labels": {"applicationId": app, "queue": "root.default"}},
            "spec": {"schedulerName": scheduler_name, "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "c", "image": "fake",
                                     "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}})

    if not backlog:
        start()
        watcher = asyncio.create_task(watch())
    await gather_limited(len(pods), pod)
    created = time.perf_counter() - began
    if backlog:
        began = time.perf_counter()
        watcher = asyncio.create_task(watch())
        start()
    await watcher
    return times["bound"], times["running"], created


async def clear_pods(api: KubeApi) -> None:
    try:
        await api.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods", params={"gracePeriodSeconds": "0"},
                          timeout_s=600)
    except ApiError as exc:
        print(f"  (deleting pods: {exc})")
    while (await api.list(f"/api/v1/namespaces/{NAMESPACE}/pods"))["items"]:
        await asyncio.sleep(0.5)


def start_scheduler(which: str, cluster: KubeCluster, workdir: Path) -> subprocess.Popen[bytes]:
    out = open(workdir / f"{which}.log", "ab")  # noqa: SIM115
    if which == "evsched":
        cmd = [sys.executable, "-m", "scheduler", "k8s", "--kubeconfig", str(cluster.kubeconfig),
               "--log", str(workdir / "evsched-log")]
    else:
        cmd = [str(cluster.binaries / "kube-scheduler"), f"--kubeconfig={cluster.kubeconfig}",
               f"--authentication-kubeconfig={cluster.kubeconfig}", f"--authorization-kubeconfig={cluster.kubeconfig}",
               "--leader-elect=false", "--kube-api-qps=5000", "--kube-api-burst=5000",
               f"--secure-port={free_port()}", "--bind-address=127.0.0.1", "-v=0"]
    try:
        return subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    finally:
        out.close()


def verify_log(log: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "scheduler", "replay", "verify", "--log", str(log)], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    return "ok" if done.returncode == 0 else f"FAILED: {(done.stdout + done.stderr)[-500:]}"


async def main_async(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="evsched-k8s-bench-"))
    cluster = KubeCluster(workdir / "cluster", build())
    cluster.start()
    api = KubeApi(load_kubeconfig(cluster.kubeconfig))
    rows: list[tuple[str, str, int, float, float, float, str]] = []
    try:
        await api.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                         "metadata": {"name": NAMESPACE}})
        began = time.perf_counter()
        await make_nodes(api, args.nodes)
        print(f"{args.nodes} KWOK nodes Ready in {time.perf_counter() - began:.1f} s "
              f"(Kubernetes {K8S_VERSION}; CPU: {cpu_name()}; load {os.getloadavg()[0]:.1f})", flush=True)
        for shape in args.shapes.split(","):
            pods = shape_pods(shape, args.nodes)
            for which in args.schedulers.split(","):
                run_dir = workdir / f"{which}-{shape}"
                run_dir.mkdir()
                procs: list[subprocess.Popen[bytes]] = []
                launch = functools.partial(start_scheduler, which, cluster, run_dir)
                try:
                    to_bound, seconds, created = await run_shape(
                        api, "evsched" if which == "evsched" else "default-scheduler", pods,
                        lambda: procs.append(launch()), args.backlog)  # noqa: B023  # called before the loop moves on
                finally:
                    for proc in procs:
                        stop_group(proc, grace_s=30.0)
                checked = verify_log(run_dir / "evsched-log") if which == "evsched" else "-"
                rows.append((shape, which, len(pods), to_bound, seconds, created, checked))
                print(f"{shape:<8} {which:<15} {len(pods):>6} pods bound in {to_bound:7.2f} s, Running in "
                      f"{seconds:7.2f} s: {len(pods) / seconds:8.1f} pods/s (created in {created:.2f} s) "
                      f"verify {checked}", flush=True)
                await clear_pods(api)
    finally:
        await api.close()
        cluster.stop()
    print()
    print(f"| shape | scheduler | pods | s to all bound | s to all Running | pods/s (Running) | creation pods/s "
          f"| replay verify |  ({args.nodes} nodes)")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for shape, which, count, to_bound, seconds, created, checked in rows:
        print(f"| {shape} | {which} | {count} | {to_bound:.2f} | {seconds:.2f} | {count / seconds:.1f} "
              f"| {count / created:.1f} | {checked} |")
    rates = {(shape, which): count / seconds for shape, which, count, _, seconds, _, _ in rows}
    for shape in args.shapes.split(","):
        ours, theirs = rates.get((shape, "evsched")), rates.get((shape, "kube-scheduler"))
        if ours and theirs:
            verdict = "met" if ours >= theirs else "MISSED"
            print(f"TARGET {shape}: evsched {ours:.1f} pods/s vs kube-scheduler {theirs:.1f}: "
                  f"{ours / theirs:.2f}x ({verdict})")
    decided = sum(count for _, which, count, _, _, _, checked in rows if which == "evsched" and checked == "ok")
    print(f"evsched: {decided} pods bound and Running, logs verified")
    return 0 if all(checked in ("ok", "-") for *_, checked in rows) else 1


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--shapes", default="1x5000,5x1000,25x200,full")
    parser.add_argument("--schedulers", default="evsched,kube-scheduler")
    parser.add_argument("--backlog", action="store_true",
                        help="create every pod first, then start the scheduler and time from its start (the "
                        "scheduler's own rate, not the creating client's)")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
