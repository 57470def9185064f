"""A real Kubernetes control plane for the tests and benchmarks: etcd + kube-apiserver + KWOK on loopback.

``build()`` compiles etcd, kube-apiserver, kube-scheduler and kwok from the Go module proxy
(tests/brokers/k8s/build.sh, the versions below) into a cache directory outside the repository
(``$EVSCHED_K8S_CACHE``, else ``~/.cache/evsched/k8s-<versions>``) once: about 5 minutes and 2 GB
of memory on 2 cores, run under ``nice``; later runs find the binaries there. ``KubeCluster``
writes a throw-away PKI (openssl), starts the three processes on free loopback ports, each in its
own process group with its log in a file, and waits until the API server is ready and KWOK
answers. KWOK fakes the kubelets: a Node annotated ``kwok.x-k8s.io/node: fake`` is Ready, and a
pod bound to it is Running a moment later. ``python -m tests.kube_cluster build`` builds,
``... run`` starts one by hand and prints its kubeconfig's path. ``build_yunikorn()`` (``...
build-yunikorn``) builds YuniKorn's standalone scheduler for benchmarks/k8s.py the same way.
"""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.procs import (
    broker_unavailable,
    free_port,
    log_tail,
    run_tool,
    run_until_stopped,
    start_logged,
    started,
    stop_groups,
    tool_cache,
    tool_main,
    wait_until,
)

K8S_VERSION = "v1.34.2"
ETCD_VERSION = "v3.6.5"  # Debian's 3.4 lacks RequestWatchProgress: KWOK's watches fail on it
KWOK_VERSION = "v0.7.0"
BUILD_SCRIPT = Path(__file__).resolve().parent / "brokers" / "k8s" / "build.sh"
YUNIKORN_VERSION = "v1.9.0"  # k8shim, core and scheduler-interface at the same release
YUNIKORN_BUILD_SCRIPT = BUILD_SCRIPT.with_name("build-yunikorn.sh")
YUNIKORN_BINARY = "yunikorn-scheduler"
BINARIES = ("etcd", "kube-apiserver", "kube-scheduler", "kwok")
BUILD_TIMEOUT_S = 3600.0  # ~5 minutes alone on 2 cores; a loaded shared machine takes several times that
READY_TIMEOUT_S = 120.0
TOKEN = "evsched-test-admin-token"
KWOK_CONFIG = """apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: 32
  nodePlayStageParallelism: 8
"""


def cache_dir() -> Path:
    """Where the binaries live: ``$EVSCHED_K8S_CACHE`` or ``~/.cache/evsched/k8s-<versions>``."""
    return tool_cache("EVSCHED_K8S_CACHE", f"k8s-{K8S_VERSION}-etcd-{ETCD_VERSION}-kwok-{KWOK_VERSION}")


def _complete(directory: Path) -> bool:
    return all((directory / name).is_file() for name in BINARIES)


def build() -> Path:
    """The cache directory, built first when a binary is missing (into a sibling, then renamed: a
    build cut short leaves nothing that looks complete). Raises ``RuntimeError`` with the build's
    output when Go is missing or the build fails."""
    target = cache_dir()
    if _complete(target):
        return target
    partial = target.with_name(target.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, K8S_VERSION=K8S_VERSION, ETCD_VERSION=ETCD_VERSION, KWOK_VERSION=KWOK_VERSION)
    cmd = ["nice", "-n", "10", "sh", str(BUILD_SCRIPT), str(partial)]
    print(f"building Kubernetes {K8S_VERSION}, etcd {ETCD_VERSION}, KWOK {KWOK_VERSION} into {target} "
          "(once; ~5 minutes on 2 cores)", file=sys.stderr, flush=True)
    run_tool(cmd, "build the Kubernetes test binaries", BUILD_TIMEOUT_S, env)
    if not _complete(partial):
        raise RuntimeError(f"building the Kubernetes test binaries left some of {BINARIES} out of {partial}")
    if target.exists():
        for name in BINARIES:
            os.replace(partial / name, target / name)
    else:
        partial.rename(target)
    return target


def yunikorn_cache_dir() -> Path:
    """Where YuniKorn's binary lives: ``$EVSCHED_YUNIKORN_CACHE`` or ``~/.cache/evsched/yunikorn-k8shim-<v>``."""
    return tool_cache("EVSCHED_YUNIKORN_CACHE", f"yunikorn-k8shim-{YUNIKORN_VERSION}")


def build_yunikorn() -> Path:
    """YuniKorn's scheduler binary (k8shim + core, ``pkg/cmd/shim``), built first when missing
    (tests/brokers/k8s/build-yunikorn.sh under ``nice``: a few minutes, ~2 GB). Raises
    ``RuntimeError`` with the build's output when it fails."""
    target = yunikorn_cache_dir()
    binary = target / YUNIKORN_BINARY
    if binary.is_file():
        return binary
    partial = target.with_name(target.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    cmd = ["nice", "-n", "10", "sh", str(YUNIKORN_BUILD_SCRIPT), str(partial)]
    print(f"building YuniKorn {YUNIKORN_VERSION} (k8shim + core) into {target} (once)", file=sys.stderr, flush=True)
    run_tool(cmd, f"build YuniKorn {YUNIKORN_VERSION}", BUILD_TIMEOUT_S,
             dict(os.environ, YUNIKORN_VERSION=YUNIKORN_VERSION))
    if not (partial / YUNIKORN_BINARY).is_file():
        raise RuntimeError(f"building YuniKorn left no {YUNIKORN_BINARY} in {partial}")
    target.mkdir(parents=True, exist_ok=True)
    os.replace(partial / YUNIKORN_BINARY, binary)
    partial.rmdir()
    return binary


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed: {done.stderr[-2000:]}")


def write_pki(directory: Path) -> None:
    """A self-signed CA, the API server's certificate for 127.0.0.1, the service-account key pair and
    a static token file (one admin in ``system:masters``)."""
    directory.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=evsched-test-ca",
             "-keyout", "ca.key", "-out", "ca.crt", cwd=directory)
    (directory / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=kube-apiserver", "-keyout", "apiserver.key",
             "-out", "apiserver.csr", cwd=directory)
    _openssl("x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "2", "-extfile", "san.cnf", "-out", "apiserver.crt", cwd=directory)
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=directory)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=directory)
    (directory / "tokens.csv").write_text(f"{TOKEN},admin,admin-uid,system:masters\n")


def kubeconfig_text(server: str, ca_file: Path, token: str) -> str:
    """A kubeconfig with one cluster, one token user and one current context."""
    return (
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: test\n  cluster:\n    server: {server}\n    certificate-authority: {ca_file}\n"
        f"users:\n- name: admin\n  user:\n    token: {token}\n"
        "contexts:\n- name: test\n  context:\n    cluster: test\n    user: admin\n"
        "current-context: test\n"
    )


PORTS = ("etcd", "etcd-peer", "kube-apiserver", "kwok")  # each listens on a free loopback port of its own


@dataclass
class KubeCluster:
    """etcd, kube-apiserver and KWOK of one test session: ports, files, processes."""

    workdir: Path
    binaries: Path
    ports: dict[str, int] = field(default_factory=lambda: {name: free_port() for name in PORTS})  # by PORTS
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)  # by binary

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['kube-apiserver']}"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def pki(self) -> Path:
        return self.workdir / "pki"

    def _start(self, name: str, *args: str) -> None:
        self.procs[name] = start_logged([str(self.binaries / name), *args], self.workdir / f"{name}.log", self.workdir)

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Start etcd, the API server and KWOK; return once the API server is ready and KWOK serves."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        write_pki(self.pki)
        self.kubeconfig.write_text(kubeconfig_text(self.server, self.pki / "ca.crt", TOKEN))
        etcd, peer = f"http://127.0.0.1:{self.ports['etcd']}", f"http://127.0.0.1:{self.ports['etcd-peer']}"
        self._start("etcd", "--data-dir", str(self.workdir / "etcd"), "--name", "test",
                    "--listen-client-urls", etcd, "--advertise-client-urls", etcd,
                    "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                    "--initial-cluster", f"test={peer}", "--unsafe-no-fsync", "--log-level", "warn")
        pki = self.pki
        self._start(
            "kube-apiserver", f"--etcd-servers={etcd}", "--bind-address=127.0.0.1",
            f"--secure-port={self.ports['kube-apiserver']}",
            "--advertise-address=127.0.0.1", f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}", f"--client-ca-file={pki / 'ca.crt'}",
            f"--token-auth-file={pki / 'tokens.csv'}", "--authorization-mode=AlwaysAllow",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'sa.pub'}", f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/24", "--enable-priority-and-fairness=false",
            # no controller-manager: no default ServiceAccount, and nothing would ever lift the not-ready taint
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition", "--endpoint-reconciler-type=none",
            "--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000",
        )
        self.wait_ready(timeout_s)
        # KWOK's default of 4 pod workers caps every scheduler at ~50 pods/s Running on this machine
        (self.workdir / "kwok.yaml").write_text(KWOK_CONFIG)
        self._start("kwok", f"--kubeconfig={self.kubeconfig}", f"--config={self.workdir / 'kwok.yaml'}",
                    "--manage-all-nodes=true",
                    f"--server-address=127.0.0.1:{self.ports['kwok']}")
        self._wait(lambda: self._http_ok(f"http://127.0.0.1:{self.ports['kwok']}/healthz", None), "kwok", timeout_s)

    def _http_ok(self, url: str, context: ssl.SSLContext | None) -> bool:
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
        try:
            with urllib.request.urlopen(request, timeout=5, context=context) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        context = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        self._wait(lambda: self._http_ok(f"{self.server}/readyz", context), "kube-apiserver", timeout_s)

    def _wait(self, ready: Callable[[], bool], what: str, timeout_s: float) -> None:
        wait_until(ready, self.procs, what, timeout_s, self._failure)

    def _failure(self, what: str) -> str:
        tails = "\n".join(f"--- {name} log:\n{log_tail(self.workdir / f'{name}.log')}" for name in self.procs)
        return f"Kubernetes test cluster: {what}\n{tails}"

    def stop(self) -> None:
        stop_groups([self.procs.pop(name) for name in ("kwok", "kube-apiserver", "etcd") if name in self.procs])


def session_cluster(workdir: Path) -> KubeCluster:
    """Build (if needed) and start a cluster for a test session; the caller stops it. A build or a
    start that fails skips the Kubernetes tests, except under ``CI=true`` where it fails them."""
    try:
        binaries = build()
    except RuntimeError as exc:
        broker_unavailable(f"the Kubernetes test cluster cannot be built: {exc}")
    return started(KubeCluster(workdir, binaries), unavailable="the Kubernetes test cluster did not start")


def _build(_: list[str]) -> int:
    print(build())
    return 0


def _build_yunikorn(_: list[str]) -> int:
    print(build_yunikorn())
    return 0


def _run(_: list[str]) -> int:
    cluster = KubeCluster(Path(tempfile.mkdtemp(prefix="evsched-k8s-")), build())
    return run_until_stopped(cluster, lambda: f"Kubernetes {K8S_VERSION} on KWOK is up: "
                             f"--kubeconfig {cluster.kubeconfig}. Ctrl-C stops it.")


def main(argv: list[str]) -> int:
    return tool_main(argv, {"build": _build, "build-yunikorn": _build_yunikorn, "run": _run},
                     "python -m tests.kube_cluster build | build-yunikorn | run")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
