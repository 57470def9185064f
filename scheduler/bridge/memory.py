"""The in-memory publisher: records every message, keeps retained ones per topic, for tests.

It behaves like a broker that is always up and acknowledges at once, so service unit tests
can assert on exactly what was published. ``simulate_reconnect`` drives the reconnect path.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.bridge.port import PublisherStats, ReconnectCallback
from scheduler.bridge.topics import topic_matches


@dataclass(frozen=True)
class PublishedMessage:
    """One recorded message."""

    topic: str
    payload: bytes
    qos: int
    retain: bool


class MemoryPublisher:
    """``Publisher`` adapter that delivers into lists instead of a network."""

    def __init__(self) -> None:
        self.messages: list[PublishedMessage] = []
        self.retained: dict[str, bytes] = {}
        self._on_reconnect: ReconnectCallback | None = None
        self._started = False
        self._closed = False
        self._dropped = 0
        self._reconnects = 0
        # Like the real adapter, messages published before start() wait for it.
        self._pending: list[PublishedMessage] = []

    def publish(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False) -> None:
        message = PublishedMessage(topic, bytes(payload), qos, retain)
        if self._closed:
            self._dropped += 1
        elif self._started:
            self._deliver(message)
        else:
            self._pending.append(message)

    def set_on_reconnect(self, callback: ReconnectCallback | None) -> None:
        self._on_reconnect = callback

    async def start(self) -> None:
        self._started = True
        pending, self._pending = self._pending, []
        for message in pending:
            self._deliver(message)

    async def close(self) -> None:
        if not self._started:
            # Never started: nothing could be delivered, as with a broker that never came up.
            self._dropped += len(self._pending)
            self._pending.clear()
        self._closed = True

    def stats(self) -> PublisherStats:
        return PublisherStats(
            published=len(self.messages),
            dropped=self._dropped,
            reconnects=self._reconnects,
            connected=self._started and not self._closed,
        )

    def simulate_reconnect(self) -> None:
        """Pretend the connection dropped and came back: count it and run the callback."""
        self._reconnects += 1
        if self._on_reconnect is not None:
            self._on_reconnect()

    def on_topic(self, topic_filter: str) -> list[PublishedMessage]:
        """Recorded messages whose topic matches an MQTT filter (``+`` and ``#`` allowed)."""
        return [m for m in self.messages if topic_matches(topic_filter, m.topic)]

    def clear(self) -> None:
        """Forget recorded messages (retained state stays, as on a broker)."""
        self.messages.clear()

    def _deliver(self, message: PublishedMessage) -> None:
        self.messages.append(message)
        if message.retain:
            if message.payload:
                self.retained[message.topic] = message.payload
            else:
                self.retained.pop(message.topic, None)
