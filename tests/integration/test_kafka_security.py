"""SASL/SCRAM-SHA-512 over TLS against a real Apache Kafka broker, with a CA made by the test.

The module starts its own one-node broker with a SASL_SSL listener: a CA and a broker
certificate (for 127.0.0.1) generated with the openssl CLI, a SCRAM user created when the
storage is formatted. ``evsched submit``, ``run`` and ``replay verify`` work over it with
``--ssl-cafile`` and the password from the environment; a wrong password or a CA that did
not sign the broker's certificate ends the command at once with a message that says which,
never a hang or a traceback, and never the password.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from scheduler.simulation.workload import WorkloadSpec
from tests.apache_kafka import KafkaCluster, SaslSsl, fetch
from tests.cli import evsched as run_evsched
from tests.kafka_broker import fresh_topics
from tests.kafka_run import workload

pytestmark = pytest.mark.kafka
USER, PASSWORD = "evsched-app", "s3cret-Passw0rd"


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca_and_broker_cert(where: Path, name: str) -> Path:
    """``name``-ca.pem (a CA) and ``name``-broker.pem (key + certificate for 127.0.0.1, signed by it)."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name} test CA",
            "-keyout", f"{name}-ca.key", "-out", f"{name}-ca.pem", cwd=where)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", f"{name}-broker.key",
            "-out", f"{name}-broker.csr", cwd=where)
    (where / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", f"{name}-broker.csr", "-CA", f"{name}-ca.pem", "-CAkey", f"{name}-ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", f"{name}-broker.crt", cwd=where)
    pem = where / f"{name}-broker.pem"
    pem.write_text((where / f"{name}-broker.key").read_text() + (where / f"{name}-broker.crt").read_text())
    return where / f"{name}-ca.pem"


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    """(SASL_SSL bootstrap, the CA that signed the broker, another CA)."""
    if shutil.which("openssl") is None:
        pytest.fail("the openssl CLI is needed to make the test's certificates")
    where = tmp_path_factory.mktemp("kafka-tls")
    ca = make_ca_and_broker_cert(where, "good")
    other_ca = make_ca_and_broker_cert(where, "other")
    tls = SaslSsl(where / "good-broker.pem", {USER: PASSWORD})
    cluster = KafkaCluster(where / "cluster", 1, fetch(), sasl_ssl=tls)
    try:
        cluster.start()
        yield f"127.0.0.1:{tls.port}", ca, other_ca
    finally:
        cluster.stop()


def evsched(*args: str, password: str = PASSWORD) -> subprocess.CompletedProcess[str]:
    """The CLI with the SCRAM user's credentials in its environment (never on its command line)."""
    env = {"EVSCHED_KAFKA_USERNAME": USER, "EVSCHED_KAFKA_PASSWORD": password}
    return run_evsched(*args, env=env, check=False, text=True, timeout=120)


def secure_args(bootstrap: str, ca: Path, label: str) -> list[str]:
    topics = fresh_topics(label)
    return ["--kafka", bootstrap, "--input-topic", topics.inputs, "--decisions-topic", topics.decisions,
            "--deadletter-topic", topics.deadletter, "--group", topics.group,
            "--security-protocol", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-512", "--ssl-cafile", str(ca)]


def test_submit_run_and_verify_over_sasl_scram_and_tls(
    secure_broker: tuple[str, Path, Path], tmp_path: Path
) -> None:
    bootstrap, ca, _ = secure_broker
    path = tmp_path / "in.jsonl"
    evts = workload(WorkloadSpec(nodes=10, apps=4, asks=60, leaves=2, seed=3))
    path.write_bytes(b"\n".join(orjson.dumps(e) for e in evts) + b"\n")
    args = secure_args(bootstrap, ca, "tls")
    submitted = evsched("submit", *args, str(path))
    assert submitted.returncode == 0, submitted.stderr
    ran = evsched("run", *args, "--once", "--snapshot-dir", str(tmp_path / "snap"))
    assert ran.returncode == 0, ran.stderr
    assert "exactly-once cycles" in ran.stderr
    verified = evsched("replay", "verify", *args)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    for out in (submitted, ran, verified):
        assert PASSWORD not in out.stdout + out.stderr


def test_a_wrong_password_fails_at_once_with_a_clear_message(
    secure_broker: tuple[str, Path, Path], tmp_path: Path
) -> None:
    bootstrap, ca, _ = secure_broker
    path = tmp_path / "in.jsonl"
    path.write_text('{"type": "node.added", "data": {"node_id": "n1", "capacity": {"vcore": 1000}}}\n')
    for command in (["submit", *secure_args(bootstrap, ca, "pw"), str(path)],
                    ["run", *secure_args(bootstrap, ca, "pw"), "--once"]):
        done = evsched(*command, password="not-the-password")
        assert done.returncode == 1, done.stderr
        assert "SASL authentication as 'evsched-app' with SCRAM-SHA-512 was refused" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
        assert "not-the-password" not in done.stderr


def test_an_untrusted_broker_certificate_fails_at_once_with_a_clear_message(
    secure_broker: tuple[str, Path, Path], tmp_path: Path
) -> None:
    bootstrap, _, other_ca = secure_broker
    path = tmp_path / "in.jsonl"
    path.write_text('{"type": "node.added", "data": {"node_id": "n1", "capacity": {"vcore": 1000}}}\n')
    for command in (["submit", *secure_args(bootstrap, other_ca, "ca"), str(path)],
                    ["run", *secure_args(bootstrap, other_ca, "ca"), "--once"]):
        done = evsched(*command)
        assert done.returncode == 1, done.stderr
        assert f"the TLS certificate of {bootstrap} is not trusted" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
