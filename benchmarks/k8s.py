"""Pods per second through a real API server: evsched (`evsched k8s`) beside kube-scheduler and YuniKorn, on KWOK nodes.

The field's measure (YuniKorn's KWOK figures, kube-scheduler's scheduler_perf): pods bound and
Running through a real API server, seen through a watch. One control plane
(tests/kube_cluster.py: etcd, kube-apiserver v1.34.2, KWOK v0.7.0, built once from the Go module
proxy), ``--nodes`` KWOK nodes of 32 cores, 256 GiB and 110 pods each, and for each shape (apps
× pods per app; ``full``: pods of 8 cores, 4 per node, filling every node) each scheduler in
turn on the same cluster:

- ``evsched``: ``evsched k8s`` over a fresh embedded log, then ``replay verify`` of that log (its
  decisions are what the core re-derives);
- ``kube-scheduler`` v1.34.2 built from the same Kubernetes module (client QPS and burst raised
  to 5,000, as its scheduler_perf runs; at its default 50 QPS it binds 50 pods/s);
- ``yunikorn``: YuniKorn 1.9's standalone scheduler (k8shim v1.9.0 with yunikorn-core v1.9.0, one
  binary, built once by tests/brokers/k8s/build-yunikorn.sh), its queues from the
  ``yunikorn-configs`` ConfigMap, its shipped client QPS and burst (1,000; at 5,000 some of its
  Bindings failed with "unexpected EOF" here, and it does not retry a failed bind). Pods name ``schedulerName:
  yunikorn`` and carry the ``applicationId`` and ``queue`` labels, so the admission controller
  is not needed. A build that fails is reported (its error) and the column left out.

Timing. By default every pod of a shape is created first (by ``--creators`` client processes,
32 requests in flight each) and the scheduler started after: the clock starts with the
scheduler's process, so start-up, listing and sync are in the figure and the creating client is
not (on this machine one client creates ~100 pods/s, slower than every scheduler binds: timed
from creation, the client set the figure). ``--live`` instead starts the scheduler first and
times from the first creation while the clients create. Both report seconds to the last pod
bound (the scheduler's work) and to the last pod Running (KWOK's, after it). Pods are deleted
between runs. A run in which no pod is bound or Running for ``STALL_S`` is cut short and reported
as stalled (how many were bound).

    python benchmarks/k8s.py [--nodes 1000] [--shapes 1x5000,5x1000,25x200,full]
        [--schedulers evsched,kube-scheduler,yunikorn] [--creators 4] [--live] [--no-build-yunikorn]

Prints one row per shape and scheduler (with the CPU seconds the scheduler's process used: on a
shared machine the one figure that says how much work each did), a table, and TARGET lines: evsched's pods/s (to bound,
and to Running) against each other scheduler's per shape, and replay verify.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scheduler.kubernetes.api import ApiError, KubeApi, load_kubeconfig  # noqa: E402
from tests.kube_cluster import (  # noqa: E402
    K8S_VERSION,
    YUNIKORN_BINARY,
    YUNIKORN_VERSION,
    KubeCluster,
    build,
    build_yunikorn,
    yunikorn_cache_dir,
)
from tests.procs import die_with_parent, free_port, stop_group  # noqa: E402

NAMESPACE = "bench"
YUNIKORN_NAMESPACE = "yunikorn"  # where YuniKorn reads its ConfigMaps ($NAMESPACE)
NODE_CPU, NODE_MEMORY, NODE_PODS = 32, "256Gi", 110
IN_FLIGHT = 32  # creating requests in flight per client process
SCHEDULERS = ("evsched", "kube-scheduler", "yunikorn")
SCHEDULER_NAME = {"evsched": "evsched", "kube-scheduler": "default-scheduler", "yunikorn": "yunikorn"}
CLIENT_QPS = "5000"  # kube-scheduler's, as its scheduler_perf runs (its default 50 binds 50 pods/s)
YUNIKORN_QPS = "1000"  # YuniKorn's shipped kubernetes.qps/burst (5,000 lost binds to "unexpected EOF" here)
STALL_S = 120.0  # no pod bound or Running for this long: the run is cut short and reported as stalled
QUEUES = """partitions:
- name: default
  placementrules:
  - name: provided
    create: true
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: default
"""


@dataclass
class Row:
    shape: str
    scheduler: str
    pods: int
    to_bound: float
    to_running: float
    created: float  # seconds creating
    verify: str  # "ok", "-" (not evsched) or why it failed
    stalled: str = ""  # why the run was cut short ("" when every pod ran)
    cpu_s: float = 0.0  # CPU seconds the scheduler's process used (user + system), start to the last pod Running


async def gather_limited(count: int, make: Any, limit: int = IN_FLIGHT) -> None:
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


def pod_body(index: int, app: str, cpu: str, scheduler_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"p-{index:06d}", "labels": {"applicationId": app, "queue": "root.default"}},
        "spec": {"schedulerName": scheduler_name, "tolerations": [{"operator": "Exists"}],
                 "containers": [{"name": "c", "image": "fake",
                                 "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}}


async def create_slice(kubeconfig: str, scheduler_name: str, shape: str, nodes: int, first: int, stop: int) -> None:
    """One client process's share: pods ``first``..``stop - 1`` of the shape."""
    pods = shape_pods(shape, nodes)
    api = KubeApi(load_kubeconfig(kubeconfig))
    try:
        async def pod(i: int) -> None:
            app, cpu = pods[first + i]
            await api.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods",
                              pod_body(first + i, app, cpu, scheduler_name))

        await gather_limited(stop - first, pod)
    finally:
        await api.close()


async def create_pods(kubeconfig: Path, scheduler_name: str, shape: str, nodes: int, creators: int) -> None:
    """Create every pod of the shape with ``creators`` client processes (this script's ``--create-slice``)."""
    count = len(shape_pods(shape, nodes))
    bounds = [count * k // creators for k in range(creators + 1)]
    procs = [await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--create-slice", f"{bounds[k]}:{bounds[k + 1]}", "--kubeconfig", str(kubeconfig),
        "--scheduler-name", scheduler_name, "--shape", shape, "--nodes", str(nodes), cwd=ROOT)
        for k in range(creators) if bounds[k + 1] > bounds[k]]
    codes = [await proc.wait() for proc in procs]
    if any(codes):
        raise RuntimeError(f"a creating client failed (exit codes {codes})")


async def run_shape(api: KubeApi, count: int, create: Callable[[], Any], start: Callable[[], None],
                    live: bool) -> tuple[float, float, float, str]:
    """Seconds until every pod is bound, until every one is Running, creating them, and why the run was
    cut short ("": it was not; a scheduler that leaves pods pending for ``STALL_S`` is). ``live``: the
    scheduler first, timed from the first creation; else the pods first, timed from the scheduler's start."""
    start_version = (await api.list(f"/api/v1/namespaces/{NAMESPACE}/pods"))["resourceVersion"]
    bound: set[str] = set()
    running: set[str] = set()
    times = {"bound": 0.0, "running": 0.0, "began": time.perf_counter()}

    async def watch() -> None:
        version = start_version
        while len(running) < count:
            async for event in api.watch(f"/api/v1/namespaces/{NAMESPACE}/pods", version):
                obj = event.get("object") or {}
                meta = obj.get("metadata") or {}
                version = str(meta.get("resourceVersion") or version)
                name = str(meta.get("name"))
                if (obj.get("spec") or {}).get("nodeName") and name not in bound:
                    bound.add(name)
                    if len(bound) == count:
                        times["bound"] = time.perf_counter() - times["began"]
                if (obj.get("status") or {}).get("phase") == "Running" and name not in running:
                    running.add(name)
                    if len(running) == count:
                        times["running"] = time.perf_counter() - times["began"]
                        return

    began = time.perf_counter()
    if live:
        start()
        watcher = asyncio.create_task(watch())
    await create()
    created = time.perf_counter() - began
    if not live:
        times["began"] = time.perf_counter()
        watcher = asyncio.create_task(watch())
        start()
    seen = (0, 0)
    last_progress = time.perf_counter()
    while not watcher.done():  # a stall is judged by progress, not by how long a run takes
        await asyncio.wait([watcher], timeout=5.0)
        if (len(bound), len(running)) != seen:
            seen, last_progress = (len(bound), len(running)), time.perf_counter()
        elif time.perf_counter() - last_progress > STALL_S:
            watcher.cancel()
            elapsed = time.perf_counter() - times["began"]
            return (times["bound"] or elapsed, elapsed, created,
                    f"stalled: {len(bound)}/{count} bound, {len(running)} Running, none for {STALL_S:.0f} s")
    await watcher
    return times["bound"], times["running"], created, ""


async def clear_pods(api: KubeApi) -> None:
    try:
        await api.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods", params={"gracePeriodSeconds": "0"},
                          timeout_s=600)
    except ApiError as exc:
        print(f"  (deleting pods: {exc})")
    while (await api.list(f"/api/v1/namespaces/{NAMESPACE}/pods", {"limit": "1"}))["items"]:
        await asyncio.sleep(0.5)


async def setup_yunikorn(api: KubeApi) -> None:
    """YuniKorn's namespace and ConfigMaps: the queues, its shipped client QPS, warnings only in its log."""
    await api.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": YUNIKORN_NAMESPACE}})
    for name, data in (("yunikorn-defaults", {"kubernetes.qps": YUNIKORN_QPS, "kubernetes.burst": YUNIKORN_QPS,
                                              "log.level": "WARN"}),
                       ("yunikorn-configs", {"queues.yaml": QUEUES})):
        await api.request("POST", f"/api/v1/namespaces/{YUNIKORN_NAMESPACE}/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})


def start_scheduler(which: str, cluster: KubeCluster, workdir: Path, yunikorn: Path | None
                    ) -> subprocess.Popen[bytes]:
    out = open(workdir / f"{which}.log", "ab")  # noqa: SIM115
    env = None
    if which == "evsched":
        cmd = [sys.executable, "-m", "scheduler", "k8s", "--kubeconfig", str(cluster.kubeconfig),
               "--log", str(workdir / "evsched-log")]
    elif which == "kube-scheduler":
        cmd = [str(cluster.binaries / "kube-scheduler"), f"--kubeconfig={cluster.kubeconfig}",
               f"--authentication-kubeconfig={cluster.kubeconfig}", f"--authorization-kubeconfig={cluster.kubeconfig}",
               "--leader-elect=false", f"--kube-api-qps={CLIENT_QPS}", f"--kube-api-burst={CLIENT_QPS}",
               f"--secure-port={free_port()}", "--bind-address=127.0.0.1", "-v=0"]
    else:
        assert yunikorn is not None
        cmd = [str(yunikorn)]
        env = dict(os.environ, KUBECONFIG=str(cluster.kubeconfig), NAMESPACE=YUNIKORN_NAMESPACE)
    try:
        return subprocess.Popen(cmd, cwd=workdir if which == "yunikorn" else ROOT, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, env=env,
                                preexec_fn=die_with_parent)
    finally:
        out.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process and its waited-for children (/proc; 0 where there is none)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def verify_log(log: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "scheduler", "replay", "verify", "--log", str(log)], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    return "ok" if done.returncode == 0 else f"FAILED: {(done.stdout + done.stderr)[-500:]}"


def yunikorn_binary(wanted: list[str], may_build: bool) -> tuple[Path | None, str]:
    """YuniKorn's binary when it is asked for and builds (or is built already); else None and why not."""
    if "yunikorn" not in wanted:
        return None, "not asked for (--schedulers)"
    if not may_build and not (yunikorn_cache_dir() / YUNIKORN_BINARY).is_file():
        return None, f"not built in {yunikorn_cache_dir()} and --no-build-yunikorn"
    try:
        return build_yunikorn(), ""
    except RuntimeError as exc:
        return None, str(exc)


async def main_async(args: argparse.Namespace) -> int:
    wanted = args.schedulers.split(",")
    unknown = sorted(set(wanted) - set(SCHEDULERS))
    if unknown:
        print(f"unknown scheduler(s) {unknown}: choose from {','.join(SCHEDULERS)}", file=sys.stderr)
        return 2
    yunikorn, no_yunikorn = yunikorn_binary(wanted, not args.no_build_yunikorn)
    if "yunikorn" in wanted and yunikorn is None:
        print(f"YuniKorn {YUNIKORN_VERSION} left out: {no_yunikorn}", flush=True)
        wanted.remove("yunikorn")
    workdir = Path(tempfile.mkdtemp(prefix="evsched-k8s-bench-"))
    cluster = KubeCluster(workdir / "cluster", build())
    cluster.start()
    api = KubeApi(load_kubeconfig(cluster.kubeconfig))
    rows: list[Row] = []
    mode = "live: timed from the first creation" if args.live else "backlog: timed from the scheduler's start"
    try:
        await api.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                         "metadata": {"name": NAMESPACE}})
        if yunikorn is not None:
            await setup_yunikorn(api)
        began = time.perf_counter()
        await make_nodes(api, args.nodes)
        print(f"{args.nodes} KWOK nodes Ready in {time.perf_counter() - began:.1f} s (Kubernetes {K8S_VERSION}, "
              f"YuniKorn {YUNIKORN_VERSION if yunikorn else '-'}; {mode}; {args.creators} creating clients; "
              f"CPU: {cpu_name()} x {os.cpu_count()}; load {os.getloadavg()[0]:.1f})", flush=True)
        for shape in args.shapes.split(","):
            count = len(shape_pods(shape, args.nodes))
            for which in wanted:
                run_dir = workdir / f"{which}-{shape}"
                run_dir.mkdir()
                procs: list[subprocess.Popen[bytes]] = []

                def start(which: str = which, run_dir: Path = run_dir,
                          procs: list[subprocess.Popen[bytes]] = procs) -> None:
                    procs.append(start_scheduler(which, cluster, run_dir, yunikorn))

                def create(which: str = which, shape: str = shape) -> Any:
                    return create_pods(cluster.kubeconfig, SCHEDULER_NAME[which], shape, args.nodes, args.creators)

                try:
                    to_bound, to_running, created, stalled = await run_shape(api, count, create, start, args.live)
                finally:
                    cpu = sum(cpu_seconds(proc.pid) for proc in procs)
                    for proc in procs:
                        stop_group(proc, grace_s=30.0)
                checked = verify_log(run_dir / "evsched-log") if which == "evsched" else "-"
                row = Row(shape, which, count, to_bound, to_running, created, checked, stalled, cpu)
                rows.append(row)
                print(f"{shape:<8} {which:<15} {count:>6} pods bound in {to_bound:7.2f} s ({count / to_bound:7.1f}/s),"
                      f" Running in {to_running:7.2f} s ({count / to_running:7.1f}/s); created in {created:.2f} s;"
                      f" scheduler CPU {cpu:.1f} s; verify {checked}; load {os.getloadavg()[0]:.1f} {stalled}",
                      flush=True)
                await clear_pods(api)
    finally:
        await api.close()
        cluster.stop()
    report(rows, args, no_yunikorn if yunikorn is None and "yunikorn" in args.schedulers.split(",") else "")
    ok = all(row.verify in ("ok", "-") for row in rows)
    if ok:
        shutil.rmtree(workdir, ignore_errors=True)  # logs and etcd of ~100 MB a run; kept when a check failed
    else:
        print(f"logs kept in {workdir}")
    return 0 if ok else 1


def report(rows: list[Row], args: argparse.Namespace, no_yunikorn: str) -> None:
    print()
    print(f"| shape | scheduler | pods | s to all bound | pods/s bound | s to all Running | pods/s Running "
          f"| scheduler CPU s | creation pods/s | replay verify |  ({args.nodes} nodes, "
          f"{'live' if args.live else 'backlog'})")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        if r.stalled:
            print(f"| {r.shape} | {r.scheduler} | {r.pods} | {r.stalled} | - | - | - | {r.cpu_s:.1f} "
                  f"| {r.pods / r.created:.1f} | {r.verify} |")
            continue
        print(f"| {r.shape} | {r.scheduler} | {r.pods} | {r.to_bound:.2f} | {r.pods / r.to_bound:.1f} "
              f"| {r.to_running:.2f} | {r.pods / r.to_running:.1f} | {r.cpu_s:.1f} | {r.pods / r.created:.1f} "
              f"| {r.verify} |")
    by = {(r.shape, r.scheduler): r for r in rows}
    met = True
    for shape in args.shapes.split(","):
        ours = by.get((shape, "evsched"))
        for other in ("kube-scheduler", "yunikorn"):
            theirs = by.get((shape, other))
            if ours is None or theirs is None:
                continue
            if ours.stalled or theirs.stalled:
                verdict = "MISSED" if ours.stalled else "met"
                met = met and not ours.stalled
                print(f"TARGET {shape}: evsched {ours.stalled or 'ran every pod'}; {other} "
                      f"{theirs.stalled or 'ran every pod'} ({verdict})")
                continue
            for what, mine, their in (("bound", ours.to_bound, theirs.to_bound),
                                      ("Running", ours.to_running, theirs.to_running)):
                ratio = their / mine  # the same pods: a rate ratio is the inverse time ratio
                verdict = "met" if ratio >= 1.0 else "MISSED"
                met = met and ratio >= 1.0
                print(f"TARGET {shape} to {what}: evsched {ours.pods / mine:.1f} pods/s vs {other} "
                      f"{theirs.pods / their:.1f}: {ratio:.2f}x ({verdict})")
    if no_yunikorn:
        print(f"TARGET vs YuniKorn: not measured ({no_yunikorn[:300]})")
    verified = [r for r in rows if r.scheduler == "evsched"]
    bad = [r for r in verified if r.verify != "ok" or r.stalled]
    print(f"TARGET replay verify: {len(verified) - len(bad)}/{len(verified)} evsched logs verified "
          f"({'met' if not bad else 'MISSED'})")
    decided = sum(r.pods for r in verified if r.verify == "ok" and not r.stalled)
    print(f"evsched: {decided} pods bound and Running, logs verified")
    print(f"TARGET all: {'met' if met and not bad and not no_yunikorn else 'MISSED'}")


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
    parser.add_argument("--schedulers", default=",".join(SCHEDULERS))
    parser.add_argument("--creators", type=int, default=4, help="client processes creating the pods (default 4)")
    parser.add_argument("--live", action="store_true",
                        help="start the scheduler first and time from the first creation while the clients create "
                        "(default: create every pod, then start the scheduler and time from its start)")
    parser.add_argument("--no-build-yunikorn", action="store_true",
                        help="run YuniKorn only if its binary is built already (make test's smoke run: its build "
                        "takes minutes and ~2 GB)")
    parser.add_argument("--create-slice", metavar="FIRST:STOP", help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    parser.add_argument("--scheduler-name", help=argparse.SUPPRESS)
    parser.add_argument("--shape", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.create_slice:  # one creating client (create_pods runs several)
        first, stop = (int(x) for x in args.create_slice.split(":"))
        asyncio.run(create_slice(args.kubeconfig, args.scheduler_name, args.shape, args.nodes, first, stop))
        return 0
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    raise SystemExit(main())
