"""The Publisher contract suite, run here against MemoryPublisher (and by
tests/integration/test_mqtt_publisher.py against MqttPublisher on a real broker)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol

from scheduler.bridge.memory import MemoryPublisher
from scheduler.bridge.port import Publisher, PublisherStats
from scheduler.bridge.topics import topic_matches


class Reader(Protocol):
    async def get(self, count: int, timeout: float = 5.0) -> list[tuple[str, bytes]]: ...


class PublisherContract:
    """What every ``Publisher`` adapter must do. Subclasses provide the three hooks."""

    def make_publisher(self) -> Publisher:
        raise NotImplementedError

    def reader(self, publisher: Publisher, topic_filter: str) -> AbstractAsyncContextManager[Reader]:
        """Observe messages on ``topic_filter`` published from now on."""
        raise NotImplementedError

    async def retained(self, publisher: Publisher, topic_filter: str) -> dict[str, bytes]:
        """What a subscriber arriving now finds retained under ``topic_filter``."""
        raise NotImplementedError

    @staticmethod
    def prefix() -> str:
        return f"evsched-test/{uuid.uuid4().hex[:12]}"

    def test_conforms_to_the_protocol(self) -> None:
        async def scenario() -> None:
            pub = self.make_publisher()
            assert isinstance(pub, Publisher)
            assert pub.stats() == PublisherStats(0, 0, 0, False)
            await pub.close()

        asyncio.run(scenario())

    def test_delivers_in_publish_order_and_counts(self) -> None:
        prefix = self.prefix()
        sent = [(f"{prefix}/{'ab'[i % 2]}", b"m%d" % i) for i in range(50)]

        async def scenario() -> None:
            pub = self.make_publisher()
            async with self.reader(pub, f"{prefix}/#") as reader:
                await pub.start()
                for topic, payload in sent:
                    pub.publish(topic, payload)
                assert await reader.get(len(sent)) == sent
            await pub.close()
            stats = pub.stats()
            assert (stats.published, stats.dropped, stats.connected) == (50, 0, False)

        asyncio.run(scenario())

    def test_messages_published_before_start_wait_for_it(self) -> None:
        prefix = self.prefix()

        async def scenario() -> None:
            pub = self.make_publisher()
            async with self.reader(pub, f"{prefix}/#") as reader:
                for i in range(3):
                    pub.publish(f"{prefix}/early", b"%d" % i)
                await pub.start()
                assert [p for _, p in await reader.get(3)] == [b"0", b"1", b"2"]
            await pub.close()

        asyncio.run(scenario())

    def test_retained_last_value_wins_and_empty_payload_clears(self) -> None:
        prefix = self.prefix()

        async def scenario() -> None:
            pub = self.make_publisher()
            await pub.start()
            pub.publish(f"{prefix}/q1", b"v1", retain=True)
            pub.publish(f"{prefix}/q1", b"v2", retain=True)
            pub.publish(f"{prefix}/q2", b"x", retain=True)
            pub.publish(f"{prefix}/q2", b"", retain=True)
            pub.publish(f"{prefix}/plain", b"not retained")
            await pub.close()
            assert await self.retained(pub, f"{prefix}/#") == {f"{prefix}/q1": b"v2"}
            cleaner = self.make_publisher()  # leave nothing retained on a shared broker
            await cleaner.start()
            cleaner.publish(f"{prefix}/q1", b"", retain=True)
            await cleaner.close()
            assert await self.retained(cleaner, f"{prefix}/#") == {}

        asyncio.run(scenario())

    def test_publish_after_close_is_dropped_not_raised(self) -> None:
        async def scenario() -> None:
            pub = self.make_publisher()
            await pub.start()
            await pub.close()
            pub.publish(f"{self.prefix()}/late", b"x")
            assert pub.stats().dropped == 1

        asyncio.run(scenario())

    def test_publish_only_enqueues(self) -> None:
        prefix = self.prefix()

        async def scenario() -> None:
            pub = self.make_publisher()
            await pub.start()
            started = time.perf_counter()
            for i in range(2000):
                pub.publish(f"{prefix}/burst", b"%d" % i)
            # 2000 network round trips could not fit; 2000 appends easily do.
            assert time.perf_counter() - started < 0.25
            await pub.close()
            assert pub.stats().published + pub.stats().dropped == 2000

        asyncio.run(scenario())


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
