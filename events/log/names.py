"""The log's default names — directory, topics, group, shard — in one place, importable without aiokafka.

The Kafka adapter (``events.log.kafka.topics``), the typed settings (``events.log.open``) and
the command line's flag defaults all read them here.
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
