"""MqttPublisher against a real broker: the shared Publisher contract (tests/contracts/publisher_contract.py)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

import pytest

from scheduler.bridge.mqtt import MqttPublisher
from scheduler.bridge.port import Publisher
from tests.contracts.publisher_contract import PublisherContract, Reader
from tests.mqtt_broker import MqttReader, read_retained

pytestmark = pytest.mark.mqtt


class TestMqttPublisher(PublisherContract):
    url: str

    @pytest.fixture(autouse=True)
    def _broker(self, mqtt_url: str) -> None:
        self.url = mqtt_url

    def make_publisher(self) -> Publisher:
        return MqttPublisher(self.url)

    def reader(self, publisher: Publisher, topic_filter: str) -> AbstractAsyncContextManager[Reader]:
        return MqttReader(self.url, topic_filter)

    async def retained(self, publisher: Publisher, topic_filter: str) -> dict[str, bytes]:
        return await read_retained(self.url, topic_filter)
