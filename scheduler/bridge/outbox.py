"""Delivery plumbing of the publisher, free of I/O: the bounded outbox and the reconnect backoff.

``Outbox`` sits between ``publish`` (the scheduling path) and the sender task; ``Backoff``
spaces reconnect attempts. Both are pure so their policies are unit-tested without a broker.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

BACKOFF_START = 0.1
BACKOFF_MAX = 5.0
# QoS 1 messages awaiting PUBACK at once (a sliding window): hides the round trip without
# making the resend after a lost connection large.
WINDOW = 64


class Backoff:
    """Reconnect delays: 0.1, 0.2, 0.4 … capped at 5 s; ``reset`` after a good connection.

    >>> b = Backoff(); [b.next() for _ in range(8)]
    [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    """

    def __init__(self, start: float = BACKOFF_START, maximum: float = BACKOFF_MAX) -> None:
        self._start = start
        self._maximum = maximum
        self._next = start

    def next(self) -> float:
        delay = self._next
        self._next = min(round(delay * 2, 6), self._maximum)
        return delay

    def reset(self) -> None:
        self._next = self._start


@dataclass(slots=True)
class Message:
    """One queued message; ``seq`` restores publish order across the two deques."""

    seq: int
    topic: str
    payload: bytes
    qos: int
    retain: bool


class Outbox:
    """Bounded FIFO between ``publish`` and the sender; when full, the oldest non-retained
    message goes (retained status is re-synced anyway), and only if every queued message is
    retained, the oldest of those.

    Two deques ordered by a sequence number instead of one ``asyncio.Queue``: the queue
    cannot remove from its middle, and this keeps both the drop and the take O(1).
    """

    def __init__(self, max_size: int) -> None:
        if max_size < 1:
            raise ValueError("max_queue must be at least 1")
        self.max_size = max_size
        self._plain: deque[Message] = deque()
        self._retained: deque[Message] = deque()
        self._seq = 0

    def __len__(self) -> int:
        return len(self._plain) + len(self._retained)

    def put(self, topic: str, payload: bytes, qos: int, retain: bool) -> Message | None:
        """Append; returns the message dropped to make room, if any."""
        dropped = None
        if len(self) >= self.max_size:
            dropped = (self._plain or self._retained).popleft()
        self._seq += 1
        (self._retained if retain else self._plain).append(Message(self._seq, topic, payload, qos, retain))
        return dropped

    def take(self, limit: int) -> list[Message]:
        """Up to ``limit`` messages in publish order."""
        out: list[Message] = []
        plain, retained = self._plain, self._retained
        while len(out) < limit and (plain or retained):
            if not retained or (plain and plain[0].seq < retained[0].seq):
                out.append(plain.popleft())
            else:
                out.append(retained.popleft())
        return out

    def clear(self) -> int:
        """Empty it; returns how many messages were discarded."""
        count = len(self)
        self._plain.clear()
        self._retained.clear()
        return count
