"""docker-compose.yml runs Apache Kafka with the settings the test harness runs it with.

``tests/apache_kafka.py``'s ``broker_properties`` is the one description of a node; the
compose file's ``KAFKA_*`` variables (the apache/kafka image turns ``KAFKA_A_B`` into
``a.b``) must say the same for node 1 on host ``kafka``, and the image must be the version
the harness fetches.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.apache_kafka import broker_properties, kafka_version

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"


def compose_kafka() -> dict[str, object]:
    service: dict[str, object] = yaml.safe_load(COMPOSE.read_text())["services"]["kafka"]
    return service


def test_compose_broker_settings_equal_the_harness() -> None:
    env = compose_kafka()["environment"]
    assert isinstance(env, dict)
    props = {k.removeprefix("KAFKA_").lower().replace("_", "."): str(v) for k, v in env.items()}
    # The compose file adds one listener the harness does not need: HOST, for clients on the host.
    for key in ("listeners", "advertised.listeners", "listener.security.protocol.map"):
        props[key] = ",".join(p for p in props[key].split(",") if not p.startswith("HOST:"))
    expected = broker_properties(1, 9092, 9093, {1: 9093}, "/var/lib/kafka/data",
                                 host="", advertised_host="kafka", voter_host="kafka")
    assert props == expected


def test_compose_runs_the_kafka_version_the_tests_fetch() -> None:
    assert compose_kafka()["image"] == f"apache/kafka:{kafka_version()}"
