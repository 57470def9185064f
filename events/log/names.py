"""The log's defaults — directory, topics, group, shard, Kafka timings — in one place, importable without aiokafka.

The Kafka adapter (``events.log.kafka``: its topics, and the defaults of a log built without
settings), the typed settings (``events.log.open.KafkaSettings``) and the command line's flag
defaults (read from the settings) all take them from here.
"""

from __future__ import annotations

from typing import Final

DEFAULT_LOG_DIR: Final = "./evsched-data"  # the embedded log's directory
DEFAULT_GROUP: Final = "evsched"  # the Kafka consumer group
DEFAULT_SHARD: Final = "default"  # the scheduler partition whose topics keep the base names
DEFAULT_INPUT_TOPIC: Final = "evsched.inputs"
DEFAULT_DECISIONS_TOPIC: Final = "evsched.decisions"
DEFAULT_DEADLETTER_TOPIC: Final = "evsched.deadletter"
DEFAULT_ADMIN_TOPIC: Final = "evsched.admin"  # the only topic rules changes are accepted from (docs/security.md)

DEFAULT_SESSION_TIMEOUT_MS: Final = 10_000  # a dead instance's shards (or lease) move to another this soon
DEFAULT_FETCH_WAIT_MS: Final = 5  # how long a broker may hold a fetch that finds nothing (Tansu holds all of it)
DEFAULT_REQUEST_TIMEOUT_MS: Final = 30_000  # a broker silent this long fails the request


def heartbeat_interval_ms(session_timeout_ms: int) -> int:
    """The consumer-group heartbeat for a session timeout: a third of it, within 100 ms and 0.5 s.

    A member learns that its group is rebalancing (another instance joined or left) only from its
    next heartbeat's answer, and every member waits until all have rejoined: with a 3 s heartbeat
    a second instance started beside a running one idled up to 3 s before it got a shard. Half a
    second bounds that wait for two small requests a second per instance.

    >>> heartbeat_interval_ms(DEFAULT_SESSION_TIMEOUT_MS), heartbeat_interval_ms(600)
    (500, 200)
    """
    return max(100, min(500, session_timeout_ms // 3))


DEFAULT_HEARTBEAT_INTERVAL_MS: Final = heartbeat_interval_ms(DEFAULT_SESSION_TIMEOUT_MS)
