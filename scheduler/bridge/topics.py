"""Topic mapping: which MQTT topic each output and queue status goes to, and what changed.

Pure: no I/O, no clock. The layout (``<p>`` is the scheduler partition; ``evsched`` is the
default prefix, ``run --mqtt-prefix`` another — one per deployment sharing a broker, so
one deployment's retained queue status never shows up in another's)::

    evsched/<p>/decisions                   every output event, in order
    evsched/<p>/nodes/<node_id>/allocations allocation.decided / allocation.revoked of that node
    evsched/<p>/queues/root/a/b             retained status of queue root.a.b
    evsched/<p>/ingest/nodes/<node_id>      node.added / node.updated from node agents (inbound)

Identifiers become single topic levels through ``escape_level``: ``%``, ``/``, ``+``, ``#``,
control characters (C0, DEL, C1) and Unicode non-characters are percent-encoded (as UTF-8
bytes, ``%XX``). ``/``, ``+`` and ``#`` would split a level or make it a wildcard; the
others are refused by brokers (mosquitto drops the connection of a client that publishes
one), so one hostile node id would otherwise cut the bridge off for good.

>>> queue_topic("default", "root.a.b")
'evsched/default/queues/root/a/b'
>>> node_topic("default", "n#1")
'evsched/default/nodes/n%231/allocations'
>>> queue_topic("default", "root.a", prefix="site-a/evsched")
'site-a/evsched/default/queues/root/a'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from events.codec import dumps, encode_output
from events.models import AllocationDecided, AllocationRevoked, OutputEvent

ROOT = "evsched"
STATUS_FIELDS = ("priority", "pending", "allocated", "running_apps")

QueueStatus = Mapping[str, Any]

# Non-characters: U+FDD0–U+FDEF and the last two code points of each of the 17 planes.
_NONCHARACTERS = r"\ufdd0-\ufdef" + "".join(f"{chr(p << 16 | 0xFFFE)}{chr(p << 16 | 0xFFFF)}" for p in range(17))
_ESCAPE_RE = re.compile(r"[%/+#\x00-\x1f\x7f-\x9f" + _NONCHARACTERS + "]")
_UNESCAPE_RE = re.compile("(?:%[0-9A-F]{2})+")


class Outgoing(NamedTuple):
    """One message to publish: ``(topic, payload, retain)``."""

    topic: str
    payload: bytes
    retain: bool


def _percent(match: re.Match[str]) -> str:
    return "".join(f"%{byte:02X}" for byte in match.group().encode("utf-8", "surrogatepass"))


def _unpercent(match: re.Match[str]) -> str:
    return bytes.fromhex(match.group().replace("%", "")).decode("utf-8", "replace")


def escape_level(text: str) -> str:
    """An identifier → one safe topic level (inverse: ``unescape_level``). Empty is an error.

    >>> escape_level("n#1/\\x85")
    'n%231%2F%C2%85'
    """
    if not text:
        raise ValueError("an MQTT topic level cannot be empty")
    return _ESCAPE_RE.sub(_percent, text)


def unescape_level(level: str) -> str:
    """One topic level → the identifier ``escape_level`` made it from.

    >>> unescape_level(escape_level("a/b#c%d\\x85"))
    'a/b#c%d\\x85'
    """
    return _UNESCAPE_RE.sub(_unpercent, level)


def check_prefix(prefix: str) -> str:
    """A topic prefix as given (``evsched``, ``site-a/evsched``), or ValueError saying what is wrong with it.

    >>> check_prefix("site-a/evsched")
    'site-a/evsched'
    >>> check_prefix("a/#")
    Traceback (most recent call last):
    ValueError: MQTT prefix 'a/#': no wildcards (+ #), no empty levels, no leading or trailing '/'
    """
    levels = prefix.split("/")
    if not prefix or any(not level or "+" in level or "#" in level or "\0" in level for level in levels):
        raise ValueError(f"MQTT prefix {prefix!r}: no wildcards (+ #), no empty levels, no leading or trailing '/'")
    return prefix


def decisions_topic(partition: str, *, prefix: str = ROOT) -> str:
    return f"{prefix}/{escape_level(partition)}/decisions"


def node_topic(partition: str, node_id: str, *, prefix: str = ROOT) -> str:
    return f"{prefix}/{escape_level(partition)}/nodes/{escape_level(node_id)}/allocations"


def queue_topic(partition: str, queue_path: str, *, prefix: str = ROOT) -> str:
    levels = "/".join(escape_level(name) for name in queue_path.split("."))
    return f"{prefix}/{escape_level(partition)}/queues/{levels}"


def queues_filter(partition: str, *, prefix: str = ROOT) -> str:
    """Every retained queue status topic of one partition (what ``mqtt clear`` empties)."""
    return f"{prefix}/{escape_level(partition)}/queues/#"


def ingest_filter(partition: str, *, prefix: str = ROOT) -> str:
    """The subscription filter for node agents' events of one partition."""
    return f"{prefix}/{escape_level(partition)}/ingest/nodes/+"


def parse_ingest_topic(topic: str, *, prefix: str = ROOT) -> tuple[str, str] | None:
    """``evsched/<p>/ingest/nodes/<node>`` → (partition, node_id), unescaped; else ``None``.

    >>> parse_ingest_topic("evsched/default/ingest/nodes/n1")
    ('default', 'n1')
    >>> parse_ingest_topic("evsched/default/ingest/nodes/n1/extra") is None
    True
    """
    if not topic.startswith(prefix + "/"):
        return None
    levels = ["", *topic[len(prefix) + 1:].split("/")]
    if len(levels) != 5 or levels[2:4] != ["ingest", "nodes"]:
        return None
    if not levels[1] or not levels[4]:
        return None
    partition, node_id = unescape_level(levels[1]), unescape_level(levels[4])
    # Only the one canonical spelling of a level: "%41" or "%2f" for a node named "A" or "/"
    # would be a second topic for that node, outside what a broker ACL on its topic covers.
    if escape_level(partition) != levels[1] or escape_level(node_id) != levels[4]:
        return None
    return partition, node_id


def topic_matches(topic_filter: str, topic: str) -> bool:
    """MQTT filter matching (``+`` one level, ``#`` the rest, including the parent level).

    >>> topic_matches("evsched/+/nodes/#", "evsched/default/nodes/n1/allocations")
    True
    >>> topic_matches("evsched/+/decisions", "evsched/default/queues/root")
    False
    """
    f_levels = topic_filter.split("/")
    t_levels = topic.split("/")
    for i, f in enumerate(f_levels):
        if f == "#":
            return True
        if i >= len(t_levels) or (f != "+" and f != t_levels[i]):
            return False
    return len(f_levels) == len(t_levels)


def encode_status(status: QueueStatus) -> bytes:
    """Canonical JSON of a queue's status: exactly the four published fields, keys sorted."""
    return dumps({name: status[name] for name in STATUS_FIELDS})


class StatusTracker:
    """Remembers the last published status of every queue, so a cycle publishes only changes.

    ``changes`` treats its result as published. A queue missing from the map (removed by a
    config update) yields an empty payload once: published retained, it clears the topic.

    >>> t = StatusTracker()
    >>> s = {"priority": 0, "pending": {}, "allocated": {}, "running_apps": 0}
    >>> [q for q, _ in t.changes({"root.a": s, "root.b": s})]
    ['root.a', 'root.b']
    >>> t.changes({"root.a": s, "root.b": {**s, "running_apps": 1}})[0][0]
    'root.b'
    >>> t.resync(); len(t.changes({"root.a": s}))
    1
    """

    def __init__(self) -> None:
        self._last: dict[str, bytes] = {}

    def changes(self, queue_status: Mapping[str, QueueStatus]) -> list[tuple[str, bytes]]:
        """(queue_path, payload) for every queue whose status differs from the last published
        one, sorted by path; payload ``b""`` for a queue that disappeared."""
        out: list[tuple[str, bytes]] = []
        current = {path: encode_status(status) for path, status in queue_status.items()}
        for path in sorted(current.keys() | self._last.keys()):
            payload = current.get(path, b"")
            if self._last.get(path) != payload:
                out.append((path, payload))
        self._last = current
        return out

    def resync(self) -> None:
        """Forget what was published: the next ``changes`` returns every queue."""
        self._last = {}


def route_status(
    partition: str, queue_status: Mapping[str, QueueStatus], tracker: StatusTracker, *, prefix: str = ROOT
) -> list[Outgoing]:
    """Retained status messages for the queues that changed (all of them after ``resync``)."""
    return [Outgoing(queue_topic(partition, path, prefix=prefix), payload, True)
            for path, payload in tracker.changes(queue_status)]


def route_outputs(partition: str, outputs: Iterable[OutputEvent], *, prefix: str = ROOT) -> list[Outgoing]:
    """Each output to the decisions topic, and allocation events also to their node's topic.

    ``allocation.revoked`` carries no partition, so the partition is the caller's: one
    scheduler instance owns one partition.
    """
    decisions = decisions_topic(partition, prefix=prefix)
    out: list[Outgoing] = []
    for event in outputs:
        payload = encode_output(event)
        out.append(Outgoing(decisions, payload, False))
        if isinstance(event.data, AllocationDecided | AllocationRevoked):
            out.append(Outgoing(node_topic(partition, event.data.node_id, prefix=prefix), payload, False))
    return out


def route_cycle(
    partition: str,
    outputs: Iterable[OutputEvent],
    queue_status: Mapping[str, QueueStatus] | None,
    tracker: StatusTracker,
    *,
    prefix: str = ROOT,
) -> list[Outgoing]:
    """Everything one cycle publishes, in order: its outputs, then changed queue status.

    ``queue_status`` is the full map after the cycle (``None``: no status this cycle).
    """
    routed = route_outputs(partition, outputs, prefix=prefix)
    if queue_status is not None:
        routed.extend(route_status(partition, queue_status, tracker, prefix=prefix))
    return routed
