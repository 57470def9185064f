"""Wires the MQTT bridge into the service: a cycle listener that publishes, and node ingest.

Publishing never blocks a cycle: ``publish`` only enqueues (``scheduler.bridge.mqtt``).
Ingested node events are appended to the input log, so the log stays the only truth and
replay still reproduces every decision; refused messages are logged and counted.
"""

from __future__ import annotations

import logging
import os
import ssl
from typing import Any

from events.log.credentials import mqtt_credentials
from events.log.port import EventLog
from events.models import OutputEvent
from scheduler.bridge.ingest import Rejection
from scheduler.bridge.port import Publisher
from scheduler.bridge.topics import StatusTracker, route_cycle, route_status
from scheduler.core.engine import Engine
from scheduler.core.state_form import queue_entry

LOG = logging.getLogger("evsched.bridge")


def queue_status(engine: Engine, partition: str) -> dict[str, dict[str, Any]]:
    """Every queue's published status (priority, pending, allocated, running apps)."""
    part = engine.state.partitions.get(partition)
    if part is None:
        return {}
    return {q.path: queue_entry(q) for q in part.root.walk()}


class MqttBridge:
    """Publishes each cycle's outputs and changed queue status; re-syncs status on reconnect."""

    def __init__(self, publisher: Publisher, partition: str = "default", prefix: str = "evsched") -> None:
        self.publisher = publisher
        self.partition = partition
        self.prefix = prefix
        self.tracker = StatusTracker()
        self.last_status: dict[str, dict[str, Any]] = {}
        self.ingest: Any = None
        publisher.set_on_reconnect(self.resync)

    def cycle_done(self, engine: Engine, outputs: list[OutputEvent]) -> None:
        """Route one cycle (outputs first, then changed status) to the publisher."""
        self.last_status = queue_status(engine, self.partition)
        for msg in route_cycle(self.partition, outputs, self.last_status, self.tracker, prefix=self.prefix):
            self.publisher.publish(msg.topic, msg.payload, retain=msg.retain)

    def resync(self) -> None:
        """After a reconnect the broker may have lost retained status: publish all of it."""
        self.tracker.resync()
        for msg in route_status(self.partition, self.last_status, self.tracker, prefix=self.prefix):
            self.publisher.publish(msg.topic, msg.payload, retain=True)
        LOG.info("MQTT reconnected: re-published status of %d queues", len(self.last_status))

    async def close(self) -> None:
        """Stop ingest, flush what can be flushed, disconnect."""
        if self.ingest is not None:
            await self.ingest.close()
        await self.publisher.close()
        stats = self.publisher.stats()
        LOG.info("MQTT bridge closed: %d published, %d dropped, %d reconnects",
                 stats.published, stats.dropped, stats.reconnects)


def mqtt_tls(ca: str | None, cert: str | None, key: str | None) -> ssl.SSLContext | None:
    """The TLS context of ``mqtts://``: the system's CAs or ``ca``; a client certificate when
    ``cert`` (and its ``key``, else in the same file) is given. None: the defaults."""
    if not (ca or cert):
        return None
    context = ssl.create_default_context(cafile=ca)
    if cert:
        context.load_cert_chain(cert, key)
    return context


async def start_bridge(
    url: str, log: EventLog, *, ingest: bool, partition: str = "default", prefix: str = "evsched",
    tls: ssl.SSLContext | None = None,
) -> MqttBridge:
    """Connect the publisher (and, when asked, node ingest into ``log``); topics under ``prefix``;
    ``tls`` for ``mqtts://``."""
    from scheduler.bridge.mqtt import MqttIngest, MqttPublisher

    creds = mqtt_credentials(os.environ)  # EVSCHED_MQTT_PASSWORD or EVSCHED_MQTT_PASSWORD_FILE
    username, password = creds.username, creds.password
    publisher = MqttPublisher(url, tls=tls, username=username, password=password)
    bridge = MqttBridge(publisher, partition, prefix)
    await publisher.start()
    if ingest:
        async def accept(raw: bytes) -> None:
            key = None
            await log.append_inputs([(key, raw)])

        async def refuse(topic: str, rejection: Rejection) -> None:
            LOG.warning("MQTT ingest refused a message on %s: %s: %s", topic, rejection.reason, rejection.message)

        bridge.ingest = MqttIngest(url, partition, accept, refuse, tls=tls, username=username, password=password,
                                   prefix=prefix)
        await bridge.ingest.start()
    return bridge
