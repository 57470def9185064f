"""Open the log that typed settings name: the embedded ``FileLog`` or a ``KafkaLog`` (its topics, security, timing).

``LogSettings`` and ``KafkaSettings`` are built once from the command line
(``scheduler.cli.settings``); everything below the CLI takes them, never argparse
namespaces. ``open_log`` is the one place a log is opened from settings: ``evsched run``,
``submit``, ``replay`` and ``audit`` all name a log the same way. Shell code: it reads
credentials from the environment (``events.log.credentials``) and connects.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from events.log.credentials import CredentialError, kafka_sasl
from events.log.kafka_options import tls_context
from events.log.names import (
    DEFAULT_ADMIN_TOPIC,
    DEFAULT_DEADLETTER_TOPIC,
    DEFAULT_DECISIONS_TOPIC,
    DEFAULT_FETCH_WAIT_MS,
    DEFAULT_GROUP,
    DEFAULT_INPUT_TOPIC,
    DEFAULT_LOG_DIR,
    DEFAULT_REQUEST_TIMEOUT_MS,
    DEFAULT_SESSION_TIMEOUT_MS,
    DEFAULT_SHARD,
    heartbeat_interval_ms,
)
from events.log.port import EventLog, LogError

if TYPE_CHECKING:
    from events.log.kafka import OffsetCommitter, ShardTopics



@dataclass(frozen=True)
class KafkaSettings:
    """Where and how to reach Kafka: bootstrap servers, topic base names, group, security, timing."""

    bootstrap: str
    group: str = DEFAULT_GROUP
    input_topics: tuple[str, ...] = (DEFAULT_INPUT_TOPIC,)
    decisions_topic: str = DEFAULT_DECISIONS_TOPIC
    deadletter_topic: str = DEFAULT_DEADLETTER_TOPIC
    admin_topic: str = DEFAULT_ADMIN_TOPIC
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    password_file: str | None = None  # the SASL password's file; the password itself never is a setting
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS  # 0: the adapter's default
    fetch_wait_ms: int = DEFAULT_FETCH_WAIT_MS
    request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS
    replication_factor: int | None = None  # of the topics created; None: min(3, brokers)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None

    def security(self) -> dict[str, Any]:
        """KafkaLog's security keyword arguments; credentials from the environment, never argv.

        Raises ``LogError`` (naming what is missing, never a secret) when a SASL mechanism lacks them.
        """
        kwargs: dict[str, Any] = {"security_protocol": self.security_protocol}
        try:
            context = tls_context(self.security_protocol, self.ssl_cafile, self.ssl_certfile, self.ssl_keyfile)
        except ValueError as exc:
            raise LogError(str(exc)) from None
        if context is not None:
            kwargs["ssl_context"] = context
        if self.sasl_mechanism:
            try:  # from EVSCHED_KAFKA_* or --kafka-password-file, never argv
                kwargs.update(kafka_sasl(self.sasl_mechanism, os.environ, self.password_file))
            except CredentialError as exc:
                raise LogError(str(exc)) from None
        return kwargs

    def group_timing(self) -> dict[str, Any]:
        """Consumer-group session and heartbeat (a session timeout of 0: the adapter's defaults)."""
        session = self.session_timeout_ms
        if not session:
            return {}
        return {"session_timeout_ms": session, "heartbeat_interval_ms": heartbeat_interval_ms(session)}

    def fetch_tuning(self) -> dict[str, Any]:
        """KafkaLog's ``fetch_max_wait_ms`` and ``request_timeout_ms``."""
        return {"fetch_max_wait_ms": self.fetch_wait_ms, "request_timeout_ms": self.request_timeout_ms}

    def topics_of(self, shard: str) -> ShardTopics:
        """The topics of scheduler partition ``shard`` under these base names."""
        from events.log.kafka import shard_topics

        try:
            return shard_topics(shard, input_topics=list(self.input_topics), decisions_topic=self.decisions_topic,
                                deadletter_topic=self.deadletter_topic, admin_topic=self.admin_topic)
        except ValueError as exc:
            raise LogError(f"--partition: {exc}") from None


@dataclass(frozen=True)
class LogSettings:
    """The log a command reads or writes: the embedded log in ``directory``, or Kafka when ``kafka`` is set.

    ``partitions`` are the scheduler partitions (shards) named, first mention first, without
    repeats; they need Kafka (the embedded log holds one scheduler).
    """

    directory: str = DEFAULT_LOG_DIR
    kafka: KafkaSettings | None = None
    partitions: tuple[str, ...] = ()

    def kafka_topics(self) -> dict[str, Any]:
        """KafkaLog's topic keyword arguments: the base names, or the one named partition's topics."""
        assert self.kafka is not None
        if len(self.partitions) > 1:
            raise LogError(f"name one --partition to read, not {len(self.partitions)}: {', '.join(self.partitions)}")
        return kafka_topic_args(self.kafka.topics_of(self.partitions[0] if self.partitions else DEFAULT_SHARD))


def kafka_topic_args(topics: ShardTopics) -> dict[str, Any]:
    """KafkaLog's topic keyword arguments for one shard's topics."""
    return {"input_topics": list(topics.inputs), "decisions_topic": topics.decisions,
            "deadletter_topic": topics.deadletter, "admin_topic": topics.admin}


def transactional_id(kafka: KafkaSettings, shard: str = DEFAULT_SHARD) -> str:
    """The stable transactional id of one shard's log (group + shard): whoever runs the shard
    next uses the same id, and its producer fences every earlier one."""
    return f"{kafka.group}.{shard}"


async def open_log(settings: LogSettings, *, shard: str | None = None, readonly: bool = False,
                   transactional: bool = False, fence_at_start: bool = True,
                   commit_offsets: OffsetCommitter | None = None, writes_only: bool = False) -> EventLog:
    """The log ``settings`` name, opened (and started, for Kafka): the one place a ``KafkaLog`` is built.

    ``shard``: that scheduler partition's topics (default: the one ``--partition`` named, else the
    base names). ``transactional``: Kafka cycles commit in transactions under the shard's
    ``transactional_id``; ``fence_at_start`` False leaves fencing the previous owner to
    ``take_over()`` (a standby, once it holds the lease). ``commit_offsets``: the shard group
    commits the log's input offsets (``ShardMembership.commit``); the log then joins no group
    of its own, so the group's session timing is the membership's, not the log's. ``writes_only``:
    Kafka only appends (no consumer is started: ``submit``, ``config apply``)."""
    kafka = settings.kafka
    if kafka is not None:
        from events.log.kafka import KafkaLog

        name = shard or (settings.partitions or (DEFAULT_SHARD,))[0]
        topics = settings.kafka_topics() if shard is None else kafka_topic_args(kafka.topics_of(shard))
        timing = kafka.group_timing() if commit_offsets is None else {}
        log = KafkaLog(kafka.bootstrap, group_id=kafka.group, replication_factor=kafka.replication_factor,
                       **topics, **kafka.security(), **timing, **kafka.fetch_tuning(),
                       transactional_id=transactional_id(kafka, name) if transactional else None,
                       fence_at_start=fence_at_start, commit_offsets=commit_offsets, writes_only=writes_only)
        await log.start()
        return log
    if settings.partitions or shard is not None:
        raise LogError("--partition needs --kafka (the embedded log holds one scheduler)")
    from events.log.file import FileLog

    return FileLog(settings.directory, readonly=readonly)
