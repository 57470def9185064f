"""The aiomqtt adapters: ``MqttPublisher`` (non-blocking, reconnecting) and ``MqttIngest``.

The only module that imports aiomqtt. Both keep one broker connection alive from a
background task, reconnecting with exponential backoff (0.1 s doubling to 5 s) and logging
one WARNING line per outage (later failed attempts log at DEBUG, so a long outage does not
flood the log). URLs are logged with the password redacted; credentials are never logged.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable

import aiomqtt

from events.log.clock import wall_clock_us
from scheduler.bridge.address import BrokerAddress, parse_broker_url
from scheduler.bridge.ingest import IngestStats, Rejection, validate_ingest
from scheduler.bridge.outbox import BACKOFF_MAX, WINDOW, Backoff, Message, Outbox
from scheduler.bridge.port import PublisherStats, ReconnectCallback
from scheduler.bridge.topics import ingest_filter

log = logging.getLogger(__name__)


class _Reconnecting:
    """One broker connection kept alive by a background task; subclasses run a session on it."""

    _role = "client"

    def __init__(
        self,
        url: str,
        tls: ssl.SSLContext | None,
        client_id: str | None,
        username: str | None,
        password: str | None,
        keepalive: int,
        now: Callable[[], float],
    ) -> None:
        self._address: BrokerAddress = parse_broker_url(url).with_credentials(username, password)
        if tls is None and self._address.tls:
            tls = ssl.create_default_context()
        self._tls = tls
        self._client_id = client_id
        self._keepalive = keepalive
        self._now = now
        self._task: asyncio.Task[None] | None = None
        self._up = asyncio.Event()
        self._reconnects = 0

    @property
    def url(self) -> str:
        """The broker URL with the password redacted, safe to log."""
        return self._address.redacted()

    @property
    def connected(self) -> bool:
        return self._up.is_set()

    async def wait_connected(self, timeout: float) -> bool:
        """True once a session is running (for the publisher: connected; for ingest: subscribed)."""
        try:
            await asyncio.wait_for(self._up.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def _new_client(self) -> aiomqtt.Client:
        a = self._address
        return aiomqtt.Client(
            a.host,
            a.port,
            username=a.username,
            password=a.password,
            identifier=self._client_id,
            # A stable client id asks the broker to keep our session (and queue QoS 1
            # messages for a subscriber) across reconnects.
            clean_session=self._client_id is None,
            tls_context=self._tls,
            keepalive=self._keepalive,
            max_inflight_messages=WINDOW,
        )

    def _done(self) -> bool:
        """No more sessions needed (the publisher: closing and drained)."""
        return False

    def _on_connected(self, again: bool) -> None:
        """Hook run on every connection; ``again`` is False for the first one."""

    async def _session(self, client: aiomqtt.Client) -> None:
        """Use the connection until it fails (raise) or the work is done (return)."""
        raise NotImplementedError

    async def _run(self) -> None:
        backoff = Backoff()
        ever_connected = False
        outage_since: float | None = None
        while not self._done():
            try:
                async with self._new_client() as client:
                    backoff.reset()
                    if ever_connected:
                        self._reconnects += 1
                        down = self._now() - outage_since if outage_since is not None else 0.0
                        log.info("MQTT %s %s: reconnected after %.1f s", self._role, self.url, down)
                    else:
                        log.info("MQTT %s %s: connected", self._role, self.url)
                    self._on_connected(again=ever_connected)
                    ever_connected = True
                    outage_since = None
                    await self._session(client)
                    return
            except Exception as exc:
                # MqttError is the expected case; anything else is a bug, but the bridge must
                # outlive it (the scheduler keeps running), so it is logged and retried too.
                lost = self._up.is_set()
                self._up.clear()
                # aiomqtt wraps the real reason ("connection lost", "refused") as the cause.
                reason = exc.__cause__ or exc
                detail = str(reason) or type(reason).__name__
                if outage_since is None:
                    outage_since = self._now()
                    what = "connection lost" if lost else "cannot connect"
                    line = f"MQTT {self._role} {self.url}: {what} ({detail}); reconnecting"
                    bug = not isinstance(exc, aiomqtt.MqttError)
                    log.warning("%s with backoff up to %.0f s", line, BACKOFF_MAX, exc_info=bug)
                else:
                    log.debug("MQTT %s %s: still down (%s)", self._role, self.url, detail)
            if self._done():
                return
            await asyncio.sleep(backoff.next())

    async def _stop_task(self, timeout: float | None) -> None:
        """Wait up to ``timeout`` for the background task to end by itself, then cancel it."""
        task, self._task = self._task, None
        if task is None:
            return
        if timeout is not None:
            await asyncio.wait({task}, timeout=timeout)
        task.cancel()
        # asyncio.wait, unlike awaiting the task, does not re-raise its CancelledError here,
        # so a cancellation of close() itself still propagates.
        await asyncio.wait({task})
        if not task.cancelled() and task.exception() is not None:
            log.error("MQTT %s %s: task failed", self._role, self.url, exc_info=task.exception())
        self._up.clear()


async def _until_disconnected(client: aiomqtt.Client) -> None:
    """Raise MqttError when the connection drops (aiomqtt signals it through ``messages``).

    In-flight publishes would otherwise wait their full timeout for a PUBACK that cannot come.
    """
    async for _ in client.messages:
        pass
    raise aiomqtt.MqttError("message stream ended")


async def _race(main: Awaitable[None], client: aiomqtt.Client) -> None:
    """Run ``main`` until it returns, or raise as soon as the connection drops."""
    work = asyncio.ensure_future(main)
    watch = asyncio.ensure_future(_until_disconnected(client))
    try:
        done, _ = await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        work.cancel()
        watch.cancel()
        await asyncio.gather(work, watch, return_exceptions=True)
    (work if work in done else watch).result()


class MqttPublisher(_Reconnecting):
    """``Publisher`` over MQTT: ``publish`` enqueues, a background task delivers at QoS 1.

    Call ``publish`` from the event loop's thread (the service's cycle runs there). Register
    the status re-sync with ``on_reconnect=`` or ``set_on_reconnect``.
    """

    _role = "publisher"

    def __init__(
        self,
        url: str,
        *,
        max_queue: int = 10_000,
        tls: ssl.SSLContext | None = None,
        client_id: str | None = None,
        username: str | None = None,
        password: str | None = None,
        on_reconnect: ReconnectCallback | None = None,
        keepalive: int = 15,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(url, tls, client_id, username, password, keepalive, now)
        self._outbox = Outbox(max_queue)
        self._unacked: deque[Message] = deque()  # sent on a connection that broke before PUBACK
        self._wakeup = asyncio.Event()
        self._on_reconnect = on_reconnect
        self._resync_due = False
        self._overflowing = False
        self._closing = False
        self._published = 0
        self._dropped = 0

    def publish(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False) -> None:
        if self._closing:
            self._dropped += 1
            return
        dropped = self._outbox.put(topic, bytes(payload), qos, retain)
        if dropped is not None:
            self._dropped += 1
            # The broker's copy of a dropped retained topic may now be stale: ask for a resync.
            self._resync_due = self._resync_due or dropped.retain
            if not self._overflowing:
                self._overflowing = True
                log.warning(
                    "MQTT publisher %s: queue full (%d); dropping the oldest messages",
                    self.url,
                    self._outbox.max_size,
                )
        self._wakeup.set()

    def set_on_reconnect(self, callback: ReconnectCallback | None) -> None:
        self._on_reconnect = callback

    async def start(self) -> None:
        if self._task is None and not self._closing:
            self._task = asyncio.create_task(self._run(), name="mqtt-publisher")

    async def close(self, drain_timeout: float = 2.0) -> None:
        """Stop accepting messages, deliver what can be delivered within ``drain_timeout``
        seconds, then stop; whatever is left counts as dropped."""
        if self._closing:
            return
        self._closing = True
        self._wakeup.set()
        await self._stop_task(drain_timeout)
        left = self._outbox.clear() + len(self._unacked)
        self._unacked.clear()
        if left:
            self._dropped += left
            log.warning("MQTT publisher %s: closed with %d messages undelivered", self.url, left)

    def stats(self) -> PublisherStats:
        return PublisherStats(
            published=self._published,
            dropped=self._dropped,
            reconnects=self._reconnects,
            connected=self.connected,
        )

    def _done(self) -> bool:
        return self._closing and not self._unacked and not self._outbox

    def _on_connected(self, again: bool) -> None:
        self._up.set()
        # A restarted broker may have lost its retained messages: have the service re-send.
        self._resync_due = self._resync_due or again

    async def _session(self, client: aiomqtt.Client) -> None:
        # Up to WINDOW publishes await PUBACK at once by design; keep aiomqtt from warning.
        client.pending_calls_threshold = WINDOW + 1
        await _race(self._send_loop(client), client)

    def _resync_if_due(self) -> None:
        if not self._resync_due:
            return
        self._resync_due = False
        if self._on_reconnect is None:
            return
        try:
            self._on_reconnect()
        except Exception:
            log.exception("MQTT publisher %s: on_reconnect callback failed", self.url)

    async def _send_loop(self, client: aiomqtt.Client) -> None:
        """Keep up to WINDOW publishes awaiting PUBACK (a sliding window, not batches: brokers
        with Nagle on, mosquitto's default, delay the PUBACKs at the end of a burst by a
        delayed-ACK period, which made batch-and-wait ~10x slower than one at a time)."""
        window: deque[tuple[Message, asyncio.Task[None]]] = deque()
        try:
            while True:
                self._resync_if_due()
                while window and window[0][1].done():
                    window[0][1].result()  # a failed publish: the connection is broken
                    window.popleft()
                    self._published += 1
                while len(window) < WINDOW and (self._unacked or self._outbox):
                    m = self._unacked.popleft() if self._unacked else self._outbox.take(1)[0]
                    # Each task hands its message to paho before its first await, in creation
                    # order, so messages go on the wire in publish order.
                    task = asyncio.create_task(client.publish(m.topic, m.payload, qos=m.qos, retain=m.retain))
                    task.add_done_callback(lambda _: self._wakeup.set())
                    window.append((m, task))
                if not window:
                    self._overflowing = False
                    if self._closing:
                        return
                # No await since the checks above, so no wake-up can be lost by clearing here.
                self._wakeup.clear()
                await self._wakeup.wait()
        finally:
            # Unacknowledged messages go back to the front, in order, for the next connection
            # (at least once: one acknowledged behind a lost one is sent again).
            for _, task in window:
                task.cancel()
                if task.done() and not task.cancelled():
                    task.exception()  # read, so asyncio does not log it as never retrieved
            self._unacked.extendleft(reversed([m for m, _ in window]))


class MqttIngest(_Reconnecting):
    """Subscribes (QoS 1) to ``<prefix>/<partition>/ingest/nodes/+`` and validates each message.

    Accepted messages go to ``on_accept(raw_bytes)`` (the service appends them to the input
    log), refused ones to ``on_reject(topic, Rejection)``, one at a time in arrival order.
    """

    _role = "ingest"

    def __init__(
        self,
        url: str,
        partition: str,
        on_accept: Callable[[bytes], Awaitable[None]],
        on_reject: Callable[[str, Rejection], Awaitable[None]],
        *,
        tls: ssl.SSLContext | None = None,
        client_id: str | None = None,
        username: str | None = None,
        password: str | None = None,
        keepalive: int = 15,
        clock_us: Callable[[], int] = wall_clock_us,
        now: Callable[[], float] = time.monotonic,
        prefix: str = "evsched",
    ) -> None:
        super().__init__(url, tls, client_id, username, password, keepalive, now)
        self._partition = partition
        self._prefix = prefix
        self._filter = ingest_filter(partition, prefix=prefix)
        self._on_accept = on_accept
        self._on_reject = on_reject
        self._clock_us = clock_us
        self._accepted = 0
        self._rejected = 0

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="mqtt-ingest")

    async def close(self) -> None:
        await self._stop_task(None)

    def stats(self) -> IngestStats:
        return IngestStats(self._accepted, self._rejected, self._reconnects, self.connected)

    async def _session(self, client: aiomqtt.Client) -> None:
        await client.subscribe(self._filter, qos=1)
        self._up.set()
        async for message in client.messages:
            await self._handle(message.topic.value, _payload_bytes(message.payload))
        raise aiomqtt.MqttError("message stream ended")

    async def _handle(self, topic: str, payload: bytes) -> None:
        raw, rejection = validate_ingest(topic, payload, partition=self._partition, now_us=self._clock_us(),
                                          prefix=self._prefix)
        try:
            if raw is not None:
                self._accepted += 1
                await self._on_accept(raw)
            elif rejection is not None:
                self._rejected += 1
                await self._on_reject(topic, rejection)
        except Exception:
            # A failing callback must not stop ingestion of the next heartbeats.
            log.exception("MQTT ingest %s: callback failed for a message on %s", self.url, topic)


def _payload_bytes(payload: object) -> bytes:
    # paho delivers bytes; aiomqtt's type also allows str/int/float/None.
    return bytes(payload) if isinstance(payload, bytes | bytearray) else str(payload or "").encode()


async def clear_retained(
    url: str, partition: str, *, prefix: str = "evsched", username: str | None = None, password: str | None = None,
    tls: ssl.SSLContext | None = None,
) -> list[str]:
    """Empty every retained queue status topic of ``partition`` under ``prefix``; returns the topics cleared.

    Subscribes to ``<prefix>/<partition>/queues/#`` and to a marker topic of its own, then
    publishes to the marker: the broker sends the retained messages when the subscription
    is made, so once the marker comes back every retained message has arrived. Each is then
    overwritten by an empty retained message (MQTT's way to delete one).
    """
    import uuid

    from scheduler.bridge.topics import escape_level, queues_filter

    a = parse_broker_url(url)
    if tls is None and a.tls:
        tls = ssl.create_default_context()
    marker = f"{prefix}/{escape_level(partition)}/clear-marker/{uuid.uuid4().hex}"
    found: list[str] = []
    async with aiomqtt.Client(a.host, a.port, username=username or a.username, password=password or a.password,
                              tls_context=tls) as client:
        await client.subscribe(queues_filter(partition, prefix=prefix), qos=1)
        await client.subscribe(marker, qos=1)
        await client.publish(marker, b"", qos=1)
        async for message in client.messages:
            topic = message.topic.value
            if topic == marker:
                break
            if message.retain and _payload_bytes(message.payload):
                found.append(topic)
        await client.unsubscribe(queues_filter(partition, prefix=prefix))
        for topic in found:
            await client.publish(topic, b"", qos=1, retain=True)
    return sorted(found)
