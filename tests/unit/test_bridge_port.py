"""The Publisher contract suite (tests/contracts/publisher_contract.py), run here against MemoryPublisher."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from scheduler.bridge.memory import MemoryPublisher
from scheduler.bridge.port import Publisher
from scheduler.bridge.topics import topic_matches
from tests.contracts.publisher_contract import PublisherContract, Reader


class _MemoryReader:
    def __init__(self, publisher: MemoryPublisher, topic_filter: str) -> None:
        self._publisher = publisher
        self._filter = topic_filter
        self._next = len(publisher.messages)

    async def get(self, count: int, timeout: float = 5.0) -> list[tuple[str, bytes]]:
        deadline = time.monotonic() + timeout
        while True:
            fresh = self._publisher.messages[self._next :]
            found = [(m.topic, m.payload) for m in fresh if topic_matches(self._filter, m.topic)]
            if len(found) >= count or time.monotonic() > deadline:
                self._next = len(self._publisher.messages)
                return found
            await asyncio.sleep(0.001)


class TestMemoryPublisher(PublisherContract):
    delivers_in_memory = True

    def make_publisher(self) -> Publisher:
        return MemoryPublisher()

    def reader(self, publisher: Publisher, topic_filter: str) -> AbstractAsyncContextManager[Reader]:
        assert isinstance(publisher, MemoryPublisher)

        @asynccontextmanager
        async def open_reader() -> AsyncIterator[Reader]:
            yield _MemoryReader(publisher, topic_filter)

        return open_reader()

    async def retained(self, publisher: Publisher, topic_filter: str) -> dict[str, bytes]:
        assert isinstance(publisher, MemoryPublisher)
        return {t: p for t, p in publisher.retained.items() if topic_matches(topic_filter, t)}

    def test_simulate_reconnect_counts_and_calls_back(self) -> None:
        pub = MemoryPublisher()
        calls: list[str] = []
        pub.set_on_reconnect(lambda: calls.append("resync"))
        pub.simulate_reconnect()
        assert calls == ["resync"]
        assert pub.stats().reconnects == 1

    def test_close_before_start_drops_the_queued(self) -> None:
        pub = MemoryPublisher()
        pub.publish("a", b"1")
        asyncio.run(pub.close())
        assert pub.messages == []
        assert pub.stats().dropped == 1

    def test_on_topic_filters_and_records_qos(self) -> None:
        pub = MemoryPublisher()
        asyncio.run(pub.start())
        pub.publish("evsched/p/nodes/n1/allocations", b"a", qos=0)
        pub.publish("evsched/p/decisions", b"b")
        [only] = pub.on_topic("evsched/p/nodes/+/allocations")
        assert (only.payload, only.qos, only.retain) == (b"a", 0, False)
