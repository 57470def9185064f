"""MqttPublisher with no broker reachable: it must never block, bound its memory, and log
one redacted WARNING per outage. (A closed loopback port refuses at once: no broker needed.)
Nothing here is timed: the checks are what was delivered, dropped and logged."""

from __future__ import annotations

import asyncio
import logging

import pytest

from scheduler.bridge.mqtt import MqttPublisher
from tests.mqtt_broker import WAIT_S, eventually
from tests.procs import free_port


def test_unreachable_broker_never_blocks_and_bounds_the_queue(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="scheduler.bridge")
    url = f"mqtt://evsched:hunter2@127.0.0.1:{free_port()}"

    async def scenario() -> None:
        pub = MqttPublisher(url, max_queue=5)
        await pub.start()
        for i in range(30):  # returns for every message with no broker: publish only enqueues
            pub.publish("evsched/t/decisions", b"%d" % i, retain=i % 10 == 0)
        assert pub.stats().published == 0
        # A few refused attempts (0.1, 0.2 s backoff), seen in the log rather than assumed after a fixed time.
        await eventually(lambda: any("still down" in r.getMessage() for r in caplog.records), what="a retry refused")
        stats = pub.stats()
        assert (stats.published, stats.dropped, stats.connected) == (0, 25, False)
        # close() gives up after its drain timeout (were it to wait for the broker, it would hang here).
        await asyncio.wait_for(pub.close(drain_timeout=0.2), WAIT_S)
        assert pub.stats().dropped == 30  # the 5 still queued when close gave up

    asyncio.run(scenario())
    records = [r for r in caplog.records if r.name.startswith("scheduler.bridge")]
    warnings = [r for r in records if r.levelno == logging.WARNING]
    outage = [r for r in warnings if "cannot connect" in r.getMessage()]
    assert len(outage) == 1, [r.getMessage() for r in warnings]
    assert "evsched:***@127.0.0.1" in outage[0].getMessage()
    assert any("queue full" in r.getMessage() for r in warnings)
    assert any(r.levelno == logging.DEBUG and "still down" in r.getMessage() for r in records)
    assert "hunter2" not in caplog.text


def test_close_without_start_drops_what_was_queued() -> None:
    async def scenario() -> None:
        pub = MqttPublisher(f"mqtt://127.0.0.1:{free_port()}")
        pub.publish("a", b"1")
        await pub.close()
        pub.publish("a", b"2")
        assert pub.stats().dropped == 2

    asyncio.run(scenario())


def test_mqtts_without_a_context_gets_a_default_one() -> None:
    async def scenario() -> None:
        pub = MqttPublisher("mqtts://u:secret@127.0.0.1:1")
        assert pub.url == "mqtts://u:***@127.0.0.1:1"
        assert pub._tls is not None
        await pub.close()

    asyncio.run(scenario())
