"""The producer API: typed builders of valid input events, and a Kafka sender for them.

For teams whose systems feed evsched. Each builder method validates its arguments with
the same models the scheduler decodes with, and returns a ``ProducedEvent``: the Kafka
key (docs/contract.md §1: ``app_id`` for app/ask/allocation events, ``node_id`` for node events,
the partition name for config and priority-class events) and the canonical JSON value.

    events = EventBuilder(source="k8s-shim/cluster-a")
    ev = events.app_added(app_id="app-1", queue="root.sandbox", user="alice")
    async with EvschedProducer("kafka:9092") as producer:
        await producer.send(ev)

Ids come from the caller (``id=``) or the builder's ``id_factory`` (default: a random
UUID); no global state. aiokafka is imported only when an ``EvschedProducer`` starts.
"""

from __future__ import annotations

import ssl
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from events.codec import dumps
from events.log.kafka_options import client_options
from events.models import (
    INPUT_DATA,
    AllocationReleased,
    AppAdded,
    AppRemoved,
    AskAdded,
    AskRemoved,
    ConfigUpdated,
    Frozen,
    InputEnvelope,
    NodeAdded,
    NodeRemoved,
    NodeUpdated,
    PriorityClassDeleted,
    PriorityClassUpserted,
)
from events.times import parse_time

IdFactory = Callable[[], str]
DEFAULT_TOPIC = "evsched.inputs"


def random_id() -> str:
    """The default id factory: a random UUID in hex."""
    return uuid.uuid4().hex


@dataclass(frozen=True, slots=True)
class ProducedEvent:
    """One input event ready for Kafka: its key, its value bytes, and what it is."""

    key: bytes
    value: bytes
    type: str
    id: str

    @property
    def record(self) -> tuple[bytes, bytes]:
        """``(key, value)``, as ``EventLog.append_inputs`` and Kafka clients take them."""
        return self.key, self.value


def key_of(event_type: str, data: Frozen) -> str:
    """docs/contract.md §1's key rule for one event's data."""
    family = event_type.split(".", 1)[0]
    if family in ("app", "ask", "allocation"):
        return str(getattr(data, "app_id"))  # noqa: B009  # every model of these types has it
    if family == "node":
        return str(getattr(data, "node_id"))  # noqa: B009
    return str(getattr(data, "partition"))  # noqa: B009  # config, priorityclass


def _time_text(time: str | datetime | None) -> str | None:
    if time is None:
        return None
    if isinstance(time, datetime):
        if time.tzinfo is None:
            raise ValueError("event time needs a timezone (e.g. datetime.now(UTC))")
        return time.isoformat()
    parse_time(time)  # raises TimeFormatError (a ValueError) on bad text
    return time


class EventBuilder:
    """Builds input events for one ``source``. Every method validates like the scheduler.

    Invalid arguments raise ``pydantic.ValidationError`` (a ``ValueError``) here, in the
    producer, instead of becoming an ``input.rejected`` in the scheduler later.
    """

    def __init__(self, source: str, *, id_factory: IdFactory = random_id) -> None:
        self.source = source
        self._id_factory = id_factory

    def event(
        self,
        event_type: str,
        data: Frozen | Mapping[str, Any],
        *,
        id: str | None = None,
        time: str | datetime | None = None,
    ) -> ProducedEvent:
        """Any input type from its data (a model or a plain mapping, validated either way)."""
        model = INPUT_DATA.get(event_type)
        if model is None:
            raise ValueError(f"unknown input event type {event_type!r}")
        payload = data.model_dump(mode="json") if isinstance(data, Frozen) else dict(data)
        typed = model.model_validate(payload)
        event_id = id if id is not None else self._id_factory()
        envelope: dict[str, Any] = {
            "specversion": "1.0",
            "id": event_id,
            "source": self.source,
            "type": event_type,
            # None means "not given" (e.g. node.updated fields left alone): leave it out.
            "data": typed.model_dump(mode="json", by_alias=True, exclude_none=True),
        }
        when = _time_text(time)
        if when is not None:
            envelope["time"] = when
        InputEnvelope.model_validate(envelope)  # id/source limits, as the decoder checks
        return ProducedEvent(
            key=key_of(event_type, typed).encode(),
            value=dumps(envelope),
            type=event_type,
            id=event_id,
        )

    # -- one method per input type (docs/contract.md §2); keyword-only, mirroring events.models

    def app_added(
        self,
        *,
        app_id: str,
        queue: str = "",
        user: str,
        groups: Sequence[str] = (),
        tags: Mapping[str, str] | None = None,
        partition: str = "default",
        id: str | None = None,
        time: str | datetime | None = None,
    ) -> ProducedEvent:
        data = AppAdded(
            app_id=app_id,
            queue=queue,
            user=user,
            groups=list(groups),
            tags=dict(tags or {}),
            partition=partition,
        )
        return self.event("app.added", data, id=id, time=time)

    def app_removed(
        self,
        *,
        app_id: str,
        partition: str = "default",
        id: str | None = None,
        time: str | datetime | None = None,
    ) -> ProducedEvent:
        data = AppRemoved(app_id=app_id, partition=partition)
        return self.event("app.removed", data, id=id, time=time)

    def ask_added(
        self,
        *,
        app_id: str,
        ask_id: str,
        resources: Mapping[str, int],
        priority: int | None = None,
        priority_class: str | None = None,
        required_node: str | None = None,
        tags: Mapping[str, str] | None = None,
        partition: str = "default",
        id: str | None = None,
        time: str | datetime | None = None,
    ) -> ProducedEvent:
        data = AskAdded(
            app_id=app_id,
            ask_id=ask_id,
            resources=dict(resources),
            priority=priority,
            priority_class=priority_class,
            required_node=required_node,
            tags=dict(tags or {}),
            partition=partition,
        )
        return self.event("ask.added", data, id=id, time=time)

    def ask_removed(
        self,
        *,
        app_id: str,
        ask_id: str,
        partition: str = "default",
        id: str | None = None,
        time: str | datetime | None = None,
    ) -> ProducedEvent:
        data = AskRemoved(app_id=app_id, ask_id=ask_id, partition=partition)
        return self.event("ask.removed", data, id=id, time=time)

    def allocation_released(
        self,
        *,
        app_id: str,
        ask_id: str,
        partition: str = "default",
        id: str | None = None,
        time: str | datetime | None = None,
    ) -> ProducedEvent:
        data = AllocationReleased(app_id=app_id, ask_id=ask_id, partition=partition)
        return self.event("allocation.released", data, id=id, time=time)

    def node_added(
        self,
        *,
        node_id: str,
        capacity: Mapping[str, int],
        occupied: Mapping[str, int] | None = None,
        schedulable: bool = True,
        attributes: Mapping[str, str] | None = None,
        partition: str = "default",
        id: str | None = None,
        time: str | datetime | None = None,
    ) -> ProducedEvent:
        data = NodeAdded(
            node_id=node_id,
            capacity=dict(capacity),
            occupied=dict(occupied or {}),
            schedulable=schedulable,
            attributes=dict(attributes or {}),
            partition=partition,
        )
        return self.event("node.added", data, id=id, time=time)

    def node_updated(
        self,
        *,
        node_id: str,
        capacity: Mapping[str, int] | None = None,
        occupied: Mapping[str, int] | None = None,
        schedulable: bool | None = None,
        partition: str = "default",
        id: str | None = None,
        time: str | datetime | None = None,
    ) -> ProducedEvent:
        data = NodeUpdated(
            node_id=node_id,
            capacity=None if capacity is None else dict(capacity),
            occupied=None if occupied is None else dict(occupied),
            schedulable=schedulable,
            partition=partition,
        )
        return self.event("node.updated", data, id=id, time=time)

    def node_removed(
        self,
        *,
        node_id: str,
        partition: str = "default",
        id: str | None = None,
        time: str | datetime | None = None,
    ) -> ProducedEvent:
        data = NodeRemoved(node_id=node_id, partition=partition)
        return self.event("node.removed", data, id=id, time=time)

    def config_updated(
        self,
        *,
        yaml: str,
        partition: str = "default",
        id: str | None = None,
        time: str | datetime | None = None,
    ) -> ProducedEvent:
        data = ConfigUpdated(yaml=yaml, partition=partition)
        return self.event("config.updated", data, id=id, time=time)

    def priorityclass_upserted(
        self,
        *,
        name: str,
        value: int,
        global_default: bool = False,
        preemption_policy: Literal["Never", "PreemptLowerPriority"] = "Never",
        partition: str = "default",
        id: str | None = None,
        time: str | datetime | None = None,
    ) -> ProducedEvent:
        data = PriorityClassUpserted(
            name=name,
            value=value,
            global_default=global_default,
            preemption_policy=preemption_policy,
            partition=partition,
        )
        return self.event("priorityclass.upserted", data, id=id, time=time)

    def priorityclass_deleted(
        self,
        *,
        name: str,
        partition: str = "default",
        id: str | None = None,
        time: str | datetime | None = None,
    ) -> ProducedEvent:
        data = PriorityClassDeleted(name=name, partition=partition)
        return self.event("priorityclass.deleted", data, id=id, time=time)


class EvschedProducer:
    """Sends ``ProducedEvent``s to evsched's input topic with ``acks=all``.

    ``send`` only queues (the client batches what is queued together); ``flush`` waits
    for every queued event's acknowledgement and raises the first failure. ``send_all``
    is both. Leaving ``async with`` flushes.
    """

    MAX_PENDING = 10_000

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        topic: str = DEFAULT_TOPIC,
        client_id: str = "evsched-producer",
        linger_ms: int = 5,
        security_protocol: str = "PLAINTEXT",
        sasl_mechanism: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.topic = topic
        self._options = {  # the same connection and security options as the log's clients
            **client_options(
                bootstrap_servers, client_id=client_id, request_timeout_ms=None, security_protocol=security_protocol,
                sasl_mechanism=sasl_mechanism, sasl_plain_username=sasl_plain_username,
                sasl_plain_password=sasl_plain_password, ssl_context=ssl_context,
            ),
            "linger_ms": linger_ms,
        }
        self._producer: Any = None
        self._pending: list[Any] = []

    def __repr__(self) -> str:  # credentials stay out of reprs and logs
        servers = self._options["bootstrap_servers"]
        return f"EvschedProducer(bootstrap={servers!r}, topic={self.topic!r})"

    async def start(self) -> None:
        from aiokafka import AIOKafkaProducer  # lazy: events/ stays importable without it

        self._producer = AIOKafkaProducer(acks="all", **self._options)
        await self._producer.start()

    async def send(self, event: ProducedEvent, *, partition: int | None = None) -> None:
        """Queue one event (keyed per docs/contract.md §1); ``flush`` awaits its acknowledgement."""
        if self._producer is None:
            raise RuntimeError("EvschedProducer is not started")
        future = await self._producer.send(
            self.topic, value=event.value, key=event.key, partition=partition
        )
        self._pending.append(future)
        if len(self._pending) >= self.MAX_PENDING:  # bound memory when callers never flush
            await self.flush()

    async def flush(self) -> None:
        """Wait for every queued event to be acknowledged; raise the first failure."""
        pending, self._pending = self._pending, []
        first: BaseException | None = None
        for future in pending:  # all are in flight already; awaiting in turn costs nothing
            try:
                await future
            except Exception as exc:
                first = first or exc
        if first is not None:
            raise first

    async def send_all(self, events: Iterable[ProducedEvent]) -> None:
        """Queue every event, then wait for all acknowledgements (one round of batches)."""
        for event in events:
            await self.send(event)
        await self.flush()

    async def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is None:
            return
        try:
            await self.flush()
        finally:
            await producer.stop()

    async def __aenter__(self) -> EvschedProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
