"""Shared pytest fixtures: the Kafka test broker (see tests/kafka_broker.py)."""

from tests.kafka_broker import kafka_bootstrap, kafka_topics  # noqa: F401
from tests.mqtt_broker import mqtt_url  # noqa: F401
