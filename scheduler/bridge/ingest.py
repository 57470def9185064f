"""Ingest validation: decide whether a node agent's MQTT message may enter the input log.

Pure: the subscriber in ``mqtt`` passes the topic, payload and current time in. MQTT is a
weaker trust boundary than the log (any client allowed on the topic can publish), so on top
of the codec's checks an agent may only speak about its own node, of its own partition,
with the two heartbeat types, in small messages.

Reason codes (stable, like docs/contract.md §3's): ``ingest-too-large``, ``ingest-topic``,
``ingest-partition``, ``ingest-type``, ``ingest-node-mismatch``, ``ingest-source``, and the
codec's own (``invalid``, …) for records that are not valid events at all.

The event's ``source`` must end in ``/<node_id>`` (e.g. ``agent/n1``): duplicates are
dropped by (``source``, ``id``), so an agent free to pick any source could pre-empt an
event of another producer (the resource manager's own ``node.removed``, say) by sending
its id first.
"""

from __future__ import annotations

from dataclasses import dataclass

from events.codec import decode_input
from events.models import InputRejected, NodeAdded, NodeUpdated
from scheduler.bridge.topics import parse_ingest_topic

MAX_INGEST_BYTES = 64 * 1024
INGEST_TYPES = frozenset({"node.added", "node.updated"})


@dataclass(frozen=True)
class Rejection:
    """Why an ingest message was refused; ``input_id``/``input_type`` when they were readable,
    so the service can report it as an ``input.rejected`` output."""

    reason: str
    message: str
    input_id: str | None = None
    input_type: str | None = None


@dataclass(frozen=True)
class IngestStats:
    """Counters of an ingest subscriber: messages accepted and rejected, reconnects, link state."""

    accepted: int
    rejected: int
    reconnects: int
    connected: bool


IngestResult = tuple[bytes, None] | tuple[None, Rejection]


def validate_ingest(
    topic: str, payload: bytes, *, partition: str, now_us: int, prefix: str = "evsched"
) -> IngestResult:
    """Check one message from ``<prefix>/<partition>/ingest/nodes/<node_id>`` (prefix: ``evsched``).

    Returns ``(raw, None)`` with the bytes to append to the input log unchanged (so the
    log's usual decoding, dedup and time stamping apply), or ``(None, Rejection)``.
    ``now_us`` stands in for a missing ``time`` while validating, as the log would.
    """
    if len(payload) > MAX_INGEST_BYTES:
        return None, Rejection("ingest-too-large", f"message of {len(payload)} bytes exceeds {MAX_INGEST_BYTES} bytes")
    parsed = parse_ingest_topic(topic, prefix=prefix)
    if parsed is None:
        return None, Rejection("ingest-topic", f"topic {topic!r} is not {prefix}/<partition>/ingest/nodes/<node_id>")
    topic_partition, topic_node = parsed
    if topic_partition != partition:
        return None, Rejection("ingest-partition", f"topic partition {topic_partition!r} is not {partition!r}")

    decoded = decode_input(payload, append_time_us=now_us, position=f"mqtt:{topic}")
    if isinstance(decoded, InputRejected):
        if decoded.input_type is not None and decoded.input_type not in INGEST_TYPES:
            return None, _wrong_type(decoded.input_id, decoded.input_type)
        return None, Rejection(decoded.reason, decoded.message, decoded.input_id, decoded.input_type)
    if decoded.type not in INGEST_TYPES or not isinstance(decoded.data, NodeAdded | NodeUpdated):
        return None, _wrong_type(decoded.id, decoded.type)

    data = decoded.data
    if data.node_id != topic_node:
        # A forged heartbeat: an agent allowed on its own topic speaking for another node.
        return None, Rejection(
            "ingest-node-mismatch",
            f"data.node_id {data.node_id!r} does not match the topic's node {topic_node!r}",
            decoded.id,
            decoded.type,
        )
    if data.partition != partition:
        return None, Rejection(
            "ingest-partition",
            f"data.partition {data.partition!r} is not {partition!r}",
            decoded.id,
            decoded.type,
        )
    if not decoded.source.endswith("/" + topic_node):
        return None, Rejection(
            "ingest-source",
            f"source {decoded.source!r} must end in '/{topic_node}' (an agent speaks only as its node)",
            decoded.id,
            decoded.type,
        )
    return bytes(payload), None


def _wrong_type(input_id: str | None, input_type: str) -> Rejection:
    allowed = " or ".join(sorted(INGEST_TYPES))
    return Rejection(
        "ingest-type",
        f"type {input_type!r} cannot be ingested over MQTT (only {allowed})",
        input_id,
        input_type,
    )
