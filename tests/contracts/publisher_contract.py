"""The Publisher contract suite: every publisher's tests subclass ``PublisherContract``.

Run against ``MemoryPublisher`` (tests/unit/test_bridge_port.py) and against ``MqttPublisher`` on
a real broker (tests/integration/test_mqtt_publisher.py). A subclass implements
``make_publisher``, ``reader`` and ``retained``; the tests are inherited.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from scheduler.bridge.port import Publisher, PublisherStats


class Reader(Protocol):
    async def get(self, count: int, timeout: float = 5.0) -> list[tuple[str, bytes]]: ...


class PublisherContract:
    """What every ``Publisher`` adapter must do. Subclasses provide the three hooks."""

    delivers_in_memory = False  # True: no network, so publish() may deliver at once

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
            before = pub.stats().published
            # publish() is a plain call: the burst runs without the event loop turning once, so
            # an adapter with a network delivers none of it meanwhile (no round trip can happen
            # here); the in-memory one delivers each at once. Nothing here is timed.
            assert not inspect.iscoroutinefunction(pub.publish)
            for i in range(2000):
                assert pub.publish(f"{prefix}/burst", b"%d" % i) is None  # type: ignore[func-returns-value]
            assert pub.stats().published - before == (2000 if self.delivers_in_memory else 0)
            await pub.close()
            assert pub.stats().published + pub.stats().dropped == 2000

        asyncio.run(scenario())
