"""Shared pytest fixtures: the Kafka test broker (see tests/kafka_broker.py), the MQTT one
(tests/mqtt_broker.py); and hypothesis without its per-example deadline (a wall-clock limit
that a busy machine trips: no test encodes the machine's speed)."""

from hypothesis import settings

from tests.kafka_broker import kafka_bootstrap, kafka_topics  # noqa: F401
from tests.mqtt_broker import mqtt_url  # noqa: F401

settings.register_profile("evsched", deadline=None)
settings.load_profile("evsched")


def pytest_report_header() -> str:
    """Which MQTT broker the run starts (or is pointed at), shown at the top of every run."""
    from tests.mqtt_broker import describe_mqtt_broker

    return f"MQTT test broker: {describe_mqtt_broker()}"
