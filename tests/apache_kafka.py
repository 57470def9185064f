"""Apache Kafka for the tests: fetch the broker with Maven, run KRaft nodes on loopback.

``fetch()`` copies ``org.apache.kafka:kafka_2.13`` (the version in tests/brokers/kafka/pom.xml)
and its runtime dependencies into a cache directory outside the repository
(``$EVSCHED_KAFKA_CACHE``, else ``~/.cache/evsched/kafka-<version>``); ``make kafka`` runs it.
``KafkaCluster`` formats KRaft storage and starts ``java -cp '<cache>/*' kafka.Kafka`` for each
node (every node is broker and controller), each in its own process group with its log in a
file, and waits until the cluster answers. ``broker_properties`` is the one description of a
node's settings: the harness writes it, and the test of docker-compose.yml compares against it.
Run ``python -m tests.apache_kafka fetch`` to fetch, ``... run [N]`` to run a cluster by hand,
``... up`` (``make kafka-up``) for one node on 127.0.0.1:9092 whose topics outlive it.
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests import procs

BROKER_DIR = Path(__file__).resolve().parent / "brokers" / "kafka"
POM = BROKER_DIR / "pom.xml"
LOG4J = BROKER_DIR / "log4j2.properties"
READY_TIMEOUT_S = 90.0  # a JVM on a shared 2-core machine: start-up takes seconds, not minutes
HEAP = "-Xmx512m"


def kafka_version() -> str:
    """The Kafka version the pom fetches (its ``kafka.version`` property)."""
    match = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", POM.read_text())
    if not match:
        raise RuntimeError(f"{POM}: no <kafka.version> property")
    return match.group(1).strip()


def cache_dir() -> Path:
    """Where the broker's jars live: ``$EVSCHED_KAFKA_CACHE`` or ``~/.cache/evsched/kafka-<v>``."""
    return procs.tool_cache("EVSCHED_KAFKA_CACHE", f"kafka-{kafka_version()}")


def _complete_marker(directory: Path) -> Path:
    return directory / ".complete"


def fetch() -> Path:
    """The cache directory, filled by Maven first when it is not complete yet.

    Raises ``RuntimeError`` with Maven's output when Maven is missing or fails.
    """
    target = cache_dir()
    if _complete_marker(target).is_file():
        return target
    target.mkdir(parents=True, exist_ok=True)
    cmd = ["mvn", "-q", "-B", "-f", str(POM), "dependency:copy-dependencies", f"-DoutputDirectory={target}"]
    procs.run_tool(cmd, "fetch Apache Kafka with Maven", 900)
    if not any(target.glob("kafka_2.13-*.jar")):
        raise RuntimeError(f"fetching Apache Kafka with Maven left no kafka_2.13 jar in {target}: {' '.join(cmd)}")
    _complete_marker(target).write_text(kafka_version() + "\n")
    return target


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (Kafka's Uuid form)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def broker_properties(
    node_id: int,
    port: int,
    controller_port: int,
    voters: Mapping[int, int],
    log_dir: str,
    *,
    host: str = "127.0.0.1",
    advertised_host: str = "127.0.0.1",
    voter_host: str | None = None,
) -> dict[str, str]:
    """One KRaft node's server.properties: broker and controller in one process.

    ``voters`` maps each node id to its controller port (on ``voter_host``, else ``host``).
    docker-compose.yml sets the same (a test checks). Internal topics are replicated to
    min(3, nodes) with min.insync.replicas one less (at least 1); group session bounds allow
    the tests' short session timeouts; rebalances start at once.
    """
    nodes = len(voters)
    replication = min(3, nodes)
    min_isr = max(1, replication - 1)
    return {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": ",".join(f"{n}@{voter_host or host}:{p}" for n, p in sorted(voters.items())),
        "listeners": f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{advertised_host}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": log_dir,
        "num.partitions": "1",
        "default.replication.factor": str(replication),
        "min.insync.replicas": str(min_isr),
        "offsets.topic.replication.factor": str(replication),
        "offsets.topic.num.partitions": "5",
        "transaction.state.log.replication.factor": str(replication),
        "transaction.state.log.min.isr": str(min_isr),
        "transaction.state.log.num.partitions": "5",
        "share.coordinator.state.topic.replication.factor": str(replication),
        "share.coordinator.state.topic.min.isr": str(min_isr),
        "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": "500",
        "auto.create.topics.enable": "true",
        "unclean.leader.election.enable": "false",
    }


def write_properties(path: Path, props: Mapping[str, str]) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))


@dataclass
class KafkaNode:
    """One KRaft node (broker + controller): its ports, files and process."""

    node_id: int
    port: int
    controller_port: int
    workdir: Path
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def properties_path(self) -> Path:
        return self.workdir / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.workdir / f"broker-{self.starts}.log"

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def _java(classpath: Path, main: str, *args: str, log4j: bool = True) -> list[str]:
    opts = [HEAP, "-Xss1m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]
    opts.append("-XX:ActiveProcessorCount=2")
    if log4j:
        opts.append(f"-Dlog4j2.configurationFile={LOG4J}")
    return ["java", *opts, "-cp", f"{classpath}/*", main, *args]


@dataclass(frozen=True)
class SaslSsl:
    """A SASL_SSL listener (SCRAM-SHA-512 over TLS) beside the PLAINTEXT one: the broker's PEM
    keystore (private key, then its certificate chain) and the SCRAM users made at format time."""

    keystore_pem: Path
    users: Mapping[str, str]
    port: int = field(default_factory=procs.free_port)


def sasl_ssl_properties(props: Mapping[str, str], tls: SaslSsl) -> dict[str, str]:
    """``props`` with a SASL_SSL listener (SCRAM-SHA-512 over TLS) added on ``tls.port``."""
    out = dict(props)
    out["listeners"] += f",SASL_SSL://127.0.0.1:{tls.port}"
    out["advertised.listeners"] += f",SASL_SSL://127.0.0.1:{tls.port}"
    out["listener.security.protocol.map"] += ",SASL_SSL:SASL_SSL"
    out["sasl.enabled.mechanisms"] = "SCRAM-SHA-512"
    out["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"] = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    )
    out["ssl.keystore.type"] = "PEM"
    out["ssl.keystore.location"] = str(tls.keystore_pem)
    return out


@dataclass
class KafkaCluster:
    """``size`` KRaft nodes on free loopback ports under ``workdir``; start, stop, kill, restart."""

    workdir: Path
    size: int = 1
    classpath: Path = field(default_factory=cache_dir)
    cluster_id: str = field(default_factory=new_cluster_id)
    nodes: list[KafkaNode] = field(default_factory=list)
    sasl_ssl: SaslSsl | None = None  # one node only: a SASL_SSL listener beside the PLAINTEXT one
    extra: Mapping[str, str] = field(default_factory=dict)  # more server properties (e.g. an authorizer)

    def __post_init__(self) -> None:
        if not self.nodes:
            self.nodes = [KafkaNode(n, procs.free_port(), procs.free_port(), self.workdir / f"node-{n}")
                          for n in range(1, self.size + 1)]

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        return next(n for n in self.nodes if n.node_id == node_id)

    def properties(self, node: KafkaNode) -> dict[str, str]:
        voters = {n.node_id: n.controller_port for n in self.nodes}
        props = broker_properties(node.node_id, node.port, node.controller_port, voters, str(node.workdir / "data"))
        props = sasl_ssl_properties(props, self.sasl_ssl) if self.sasl_ssl is not None else props
        return {**props, **self.extra}

    def format(self) -> None:
        """Write each node's server.properties and format its KRaft storage."""
        for node in self.nodes:
            node.workdir.mkdir(parents=True, exist_ok=True)
            write_properties(node.properties_path, self.properties(node))
        # One JVM per node is slow on 2 cores; the storage tool is quick once started.
        for node in self.nodes:
            # --cluster-id=ID in one argument: an id may start with "-" (URL-safe base64)
            scram = [a for user, password in (self.sasl_ssl.users.items() if self.sasl_ssl else ())
                     for a in ("--add-scram", f"SCRAM-SHA-512=[name={user},password={password}]")]
            cmd = _java(self.classpath, "kafka.tools.StorageTool", "format", "--ignore-formatted",
                        f"--cluster-id={self.cluster_id}", "-c", str(node.properties_path), *scram, log4j=False)
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
            if done.returncode != 0:
                raise RuntimeError(
                    f"formatting KRaft storage for node {node.node_id} failed (exit {done.returncode}):\n"
                    f"{(done.stdout + done.stderr)[-4000:]}"
                )

    def start_node(self, node: KafkaNode) -> None:
        """Start one node's process (not waiting for it)."""
        if node.running():
            return
        node.starts += 1
        node.proc = procs.start_logged(_java(self.classpath, "kafka.Kafka", str(node.properties_path)), node.log_path)

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Format, start every node, and wait until the cluster answers with every broker."""
        self.format()
        for node in self.nodes:
            self.start_node(node)
        self.wait_ready(timeout_s)

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S, nodes: list[KafkaNode] | None = None) -> None:
        """Wait until every running node is a registered broker and accepts connections (a broker
        registers with the controllers before its listener opens); raise with log tails if not."""
        want = [n for n in (nodes or self.nodes) if n.running()]
        ids = {n.node_id for n in want}
        children = {f"node {n.node_id}": n.proc for n in want if n.proc is not None}

        def ready() -> bool:
            return all(_tcp_open(n.bootstrap) for n in want) and ids <= asyncio.run(registered_brokers(self.bootstrap))

        procs.wait_until(ready, children, f"the cluster to answer with brokers {sorted(ids)}", timeout_s, self._failure)

    def _failure(self, what: str) -> str:
        tails = "\n".join(
            f"--- node {n.node_id} log ({n.log_path}):\n{procs.log_tail(n.log_path)}" for n in self.nodes
        )
        return f"Apache Kafka test cluster: {what}\n{tails}"

    def kill(self, node: KafkaNode, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to one node's process group and (for SIGKILL/SIGTERM) wait for it to exit."""
        if node.proc is None or node.proc.poll() is not None:
            return
        os.killpg(node.proc.pid, sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            node.proc.wait(timeout=60)

    def restart(self, node: KafkaNode, timeout_s: float = READY_TIMEOUT_S) -> None:
        self.start_node(node)
        self.wait_ready(timeout_s, [node])

    def stop(self, grace_s: float = 15.0) -> None:
        """SIGTERM every node at once (a node stopped alone waits for the others' quorum), then
        SIGKILL whatever is still running after ``grace_s``."""
        procs.stop_groups([n.proc for n in self.nodes if n.proc is not None], grace_s)


def _tcp_open(address: str) -> bool:
    host, _, port = address.rpartition(":")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, int(port))) == 0


async def registered_brokers(bootstrap: str) -> set[int]:
    """Node ids of the brokers a metadata request lists (empty when nothing answers)."""
    from aiokafka.client import AIOKafkaClient

    reachable = [a for a in bootstrap.split(",") if _tcp_open(a)]
    if not reachable:
        return set()  # nothing listens yet: no client, so no connection-refused noise
    client = AIOKafkaClient(bootstrap_servers=",".join(reachable), request_timeout_ms=3000)
    try:
        await client.bootstrap()
        return {b.nodeId for b in client.cluster.brokers()}
    except Exception:
        return set()
    finally:
        await client.close()


def session_cluster(workdir: Path, size: int = 1) -> KafkaCluster:
    """Fetch (if needed) and start a test cluster; the caller stops it.

    A fetch that fails skips the Kafka tests with Maven's output, except under ``CI=true``
    where it fails them; a broker that fetched but does not start is always an error, with
    its log tail.
    """
    try:
        classpath = fetch()
    except RuntimeError as exc:
        procs.broker_unavailable(f"Apache Kafka test broker: {exc}")
    return procs.started(KafkaCluster(workdir, size, classpath))


def _fetch(_: list[str]) -> int:
    print(fetch())
    return 0


def _run(argv: list[str]) -> int:
    import tempfile

    size = int(argv[0]) if argv else 1
    cluster = KafkaCluster(Path(tempfile.mkdtemp(prefix="evsched-kafka-")), size, fetch())
    return procs.run_until_stopped(cluster, lambda: cluster.bootstrap)


def main(argv: list[str]) -> int:
    return procs.tool_main(argv, {"fetch": _fetch, "run": _run, "up": up},
                           "python -m tests.apache_kafka fetch | run [N] | up [--port P] [--dir DIR]")


def up(argv: list[str]) -> int:
    """``make kafka-up``: one Apache Kafka node on 127.0.0.1:P (default 9092, its controller on P+1) for
    trying evsched out, its topics kept in DIR (default ./kafka-data) across restarts; Ctrl-C stops it."""
    import argparse

    parser = argparse.ArgumentParser(prog="make kafka-up", description=up.__doc__)
    parser.add_argument("--port", type=int, default=9092)
    parser.add_argument("--dir", default="kafka-data")
    args = parser.parse_args(argv)
    workdir = Path(args.dir).resolve()
    if _tcp_open(f"127.0.0.1:{args.port}"):
        print(f"make kafka-up: 127.0.0.1:{args.port} is taken (a broker already up?); KAFKA_PORT=P picks another",
              file=sys.stderr)
        return 1
    node = KafkaNode(1, args.port, args.port + 1, workdir / "node-1")
    cluster = KafkaCluster(workdir, 1, fetch(), nodes=[node])
    print(f"starting Apache Kafka {kafka_version()} on 127.0.0.1:{args.port} (data in {workdir}; "
          f"broker log {node.workdir}/broker-1.log) ...", flush=True)
    return procs.run_until_stopped(cluster, lambda: f"Kafka is up: evsched run --kafka 127.0.0.1:{args.port}; "
                             f"evsched submit --kafka 127.0.0.1:{args.port} FILE.jsonl. Ctrl-C stops it.")



if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
