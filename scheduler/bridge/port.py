"""The publisher port: what the service needs from a message bus, and nothing more.

``publish`` only enqueues — it never awaits the network and never raises on a broker
problem — so the scheduling path cannot block on MQTT. Delivery is at least once: after
a reconnect a message may arrive twice, and consumers drop copies by event ``id``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

ReconnectCallback = Callable[[], None]


@dataclass(frozen=True)
class PublisherStats:
    """Counters since the publisher was created.

    ``published``: acknowledged by the broker; ``dropped``: discarded (queue full, or still
    queued when ``close`` gave up, or published after ``close``); ``reconnects``: successful
    connections after a lost one; ``connected``: a broker connection is up right now.
    """

    published: int
    dropped: int
    reconnects: int
    connected: bool


@runtime_checkable
class Publisher(Protocol):
    """A non-blocking, at-least-once message publisher."""

    def publish(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False) -> None:
        """Enqueue one message; returns at once. An empty retained payload clears the topic."""
        ...

    def set_on_reconnect(self, callback: ReconnectCallback | None) -> None:
        """Called (on the event loop) after every reconnect, and when retained messages had
        to be dropped: the service re-publishes its retained status from it."""
        ...

    async def start(self) -> None:
        """Begin delivering. Returns without waiting for a broker connection."""
        ...

    async def close(self) -> None:
        """Flush what can be flushed within the adapter's drain timeout, then stop."""
        ...

    def stats(self) -> PublisherStats:
        """A snapshot of the counters."""
        ...
