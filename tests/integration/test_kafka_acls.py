"""Who may change the rules, enforced by Apache Kafka's ACLs (issue 25; docs/security.md).

A one-node KRaft broker with ``StandardAuthorizer``, deny-by-default, a SASL_SSL listener
(SCRAM-SHA-512 over TLS, a CA made by the test) and three principals: ``evsched`` (the
service), ``operator`` and ``rm`` (a resource manager). The harness's PLAINTEXT listener is
the super user that creates the topics and the ACLs (through the Admin API's CreateAcls).
Every right below comes from an ACL: without them each principal is refused everything, so
the test fails if the ACLs are not applied.
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from events.log.kafka import KafkaLog
from tests.apache_kafka import KafkaCluster, SaslSsl, fetch
from tests.cli import evsched
from tests.integration.test_kafka_security import make_ca_and_broker_cert
from tests.kafka_broker import KafkaTopics, fresh_topics

pytestmark = pytest.mark.kafka
USERS = {"evsched": "evsched-Passw0rd", "operator": "operator-Passw0rd", "rm": "rm-Passw0rd"}
# Kafka's ACL codes (org.apache.kafka.common.acl / resource)
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = 2, 3, 4, 5
LITERAL, PREFIXED = 3, 4
READ, WRITE, CREATE, DESCRIBE, IDEMPOTENT_WRITE = 3, 4, 5, 8, 12
ALLOW = 3
CONFIG = """partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: team
"""


class Broker:
    def __init__(self, plaintext: str, secure: str, ca: Path) -> None:
        self.plaintext, self.secure, self.ca = plaintext, secure, ca


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    if shutil.which("openssl") is None:
        pytest.fail("the openssl CLI is needed to make the test's certificates")
    where = tmp_path_factory.mktemp("kafka-acls")
    ca = make_ca_and_broker_cert(where, "good")
    tls = SaslSsl(where / "good-broker.pem", USERS)
    authorizer = {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        # The harness: the PLAINTEXT and controller listeners are unauthenticated (ANONYMOUS).
        "super.users": "User:ANONYMOUS",
    }
    cluster = KafkaCluster(where / "cluster", 1, fetch(), sasl_ssl=tls, extra=authorizer)
    try:
        cluster.start()
        yield Broker(cluster.bootstrap, f"127.0.0.1:{tls.port}", ca)
    finally:
        cluster.stop()


async def create_acls(bootstrap: str, acls: list[tuple[int, str, int, str, int]]) -> None:
    """(resource type, name, pattern type, principal, operation) → ALLOW ACLs, as the super user."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.protocol.admin import CreateAclsRequest

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        for rtype, name, pattern, principal, op in acls:
            request = CreateAclsRequest(rtype, name, pattern, principal, "*", op, ALLOW)
            response: Any = await admin._send_request(request)
            for error_code, message in response.creation_responses:
                assert error_code == 0, f"CreateAcls {principal} {op} on {name}: {error_code} {message}"
    finally:
        await admin.close()


def grant(broker: Broker, topics: KafkaTopics) -> None:
    """docs/security.md's ACLs, for this test's topic names."""
    evs, op, rm = "User:evsched", "User:operator", "User:rm"
    acls = [(TOPIC, t, LITERAL, evs, o) for t in (topics.inputs, topics.admin) for o in (READ, DESCRIBE)]
    acls += [(TOPIC, t, LITERAL, evs, o) for t in (topics.decisions, topics.deadletter)
             for o in (READ, WRITE, DESCRIBE)]
    acls += [(GROUP, topics.group, PREFIXED, evs, o) for o in (READ, DESCRIBE)]
    acls += [(TRANSACTIONAL_ID, topics.group, PREFIXED, evs, o) for o in (WRITE, DESCRIBE)]
    acls += [(CLUSTER, "kafka-cluster", LITERAL, evs, IDEMPOTENT_WRITE)]
    acls += [(TOPIC, topics.admin, LITERAL, op, o) for o in (WRITE, DESCRIBE)]
    acls += [(TOPIC, topics.inputs, LITERAL, rm, o) for o in (WRITE, DESCRIBE)]
    asyncio.run(create_acls(broker.plaintext, acls))


def create_topics(broker: Broker, topics: KafkaTopics) -> None:
    async def body() -> None:
        async with KafkaLog(broker.plaintext, input_topics=[topics.inputs], decisions_topic=topics.decisions,
                            deadletter_topic=topics.deadletter, admin_topic=topics.admin, group_id="harness"):
            pass

    asyncio.run(body())


async def produce(broker: Broker, user: str, topic: str, events: list[dict[str, Any]]) -> None:
    """Send as ``user`` over SASL_SSL; raises the broker's refusal."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=broker.secure, security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username=user, sasl_plain_password=USERS[user],
        ssl_context=ssl.create_default_context(cafile=str(broker.ca)), acks="all", request_timeout_ms=20_000,
    )
    await producer.start()
    try:
        for event in events:
            await producer.send_and_wait(topic, orjson.dumps(event), key=b"default")
    finally:
        await producer.stop()


def event(eid: str, kind: str, data: dict[str, Any], at: str) -> dict[str, Any]:
    return {"id": eid, "source": "t", "type": kind, "time": at, "data": data}


def test_the_three_principals_rights_and_a_config_from_the_rm_changes_nothing(
    acl_broker: Broker, tmp_path: Path
) -> None:
    from aiokafka.errors import KafkaError

    topics = fresh_topics("acl")
    create_topics(acl_broker, topics)
    grant(acl_broker, topics)
    operator_config = event("cfg-op", "config.updated", {"yaml": CONFIG}, "2026-01-01T00:00:00Z")
    rm_config = event("cfg-rm", "config.updated", {"yaml": CONFIG.replace("team", "mine")}, "2026-01-01T00:00:01Z")
    work = [event("n1", "node.added", {"node_id": "n1", "capacity": {"vcore": 8}}, "2026-01-01T00:00:02Z"),
            event("a1", "app.added", {"app_id": "a1", "queue": "root.team", "user": "u"}, "2026-01-01T00:00:03Z"),
            event("k1", "ask.added", {"app_id": "a1", "ask_id": "k1", "resources": {"vcore": 1}},
                  "2026-01-01T00:00:04Z")]

    # The resource manager may not write the admin topic: the broker refuses.
    with pytest.raises(KafkaError) as refused:
        asyncio.run(produce(acl_broker, "rm", topics.admin, [rm_config]))
    assert "Authorization" in type(refused.value).__name__ or "uthoriz" in str(refused.value), refused.value
    # The operator may; the resource manager writes the inputs (its config among them).
    asyncio.run(produce(acl_broker, "operator", topics.admin, [operator_config]))
    asyncio.run(produce(acl_broker, "rm", topics.inputs, [rm_config, *work]))

    # evsched's principal reads both topics and writes the decisions.
    args = ["--kafka", acl_broker.secure, "--input-topic", topics.inputs, "--decisions-topic", topics.decisions,
            "--deadletter-topic", topics.deadletter, "--admin-topic", topics.admin, "--group", topics.group,
            "--security-protocol", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-512", "--ssl-cafile", str(acl_broker.ca)]
    env = {"EVSCHED_KAFKA_USERNAME": "evsched", "EVSCHED_KAFKA_PASSWORD": USERS["evsched"]}
    ran = evsched("run", *args, "--once", "--snapshot-dir", str(tmp_path / "snap"), env=env, check=False, text=True,
                  timeout=180)
    assert ran.returncode == 0, ran.stderr[-3000:]

    async def outputs() -> list[dict[str, Any]]:
        async with KafkaLog(acl_broker.plaintext, input_topics=[topics.inputs], decisions_topic=topics.decisions,
                            deadletter_topic=topics.deadletter, admin_topic=topics.admin, group_id="harness") as log:
            return [orjson.loads(r.value) for r in await log.read_outputs(0)]

    outs = asyncio.run(outputs())
    rejected = [(o["data"]["input_id"], o["data"]["reason"]) for o in outs if o["type"] == "input.rejected"]
    assert rejected == [("cfg-rm", "not-authorized")]  # the rm's config changed nothing …
    assert sum(o["type"] == "config.applied" for o in outs) == 1  # … the operator's was applied
    placed = [(o["data"]["ask_id"], o["data"]["queue"]) for o in outs if o["type"] == "allocation.decided"]
    assert placed == [("k1", "root.team")]  # under the operator's queues
    started = next(o["data"] for o in outs if o["type"] == "cycle.started")
    assert started["admin_channels"] == [f"{topics.admin}/0"]
