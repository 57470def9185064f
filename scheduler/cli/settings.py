"""Typed settings built once from the parsed command line; the code below the CLI never sees argparse.

``log_settings`` turns ``--log DIR | --kafka HOST:PORT`` and the Kafka flags into an
``events.log.open.LogSettings``; ``service_settings`` turns ``evsched run``'s flags into a
``ServiceSettings`` (``scheduler/service/settings.py``, beside the service it configures);
``snapshot_settings`` turns replay's ``--snapshot-dir``/``--no-snapshots`` into a
``SnapshotSettings``. Every field is read with its parser default, so a subcommand without a
flag gets the same value the old code got from ``getattr(args, …, default)``; the flags'
defaults are the dataclasses' own (``default``).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

from events.log.names import DEFAULT_ADMIN_TOPIC, DEFAULT_INPUT_TOPIC, DEFAULT_LOG_DIR
from events.log.open import KafkaSettings, LogSettings
from scheduler.service.settings import ServiceSettings

__all__ = ["ServiceSettings", "SnapshotSettings", "default", "log_settings", "partition_names", "service_settings",
           "snapshot_settings"]


def default(settings: type[Any], name: str) -> Any:
    """The default of the settings dataclass's field ``name``: a flag's default is read from here, so
    the command line and code that builds the settings itself (tests, the service) never disagree."""
    for field in fields(settings):
        if field.name == name:
            if field.default is MISSING:
                raise LookupError(f"{settings.__name__}.{name} has no plain default")
            return field.default
    raise LookupError(f"{settings.__name__} has no field {name!r}")


def partition_names(values: Iterable[str] | None) -> tuple[str, ...]:
    """``--partition`` values (repeatable, comma lists), first mention first, without repeats."""
    names: list[str] = []
    for value in values or []:
        for name in value.split(","):
            if name.strip() and name.strip() not in names:
                names.append(name.strip())
    return tuple(names)


def log_settings(args: argparse.Namespace) -> LogSettings:
    """The log the arguments name (``add_log_arguments``' flags)."""
    kafka = None
    if getattr(args, "kafka", None):
        kafka = KafkaSettings(
            bootstrap=args.kafka,
            group=args.group,
            input_topics=tuple(args.input_topics or [DEFAULT_INPUT_TOPIC]),
            decisions_topic=args.decisions_topic,
            deadletter_topic=args.deadletter_topic,
            admin_topic=getattr(args, "admin_topic", DEFAULT_ADMIN_TOPIC),
            security_protocol=args.security_protocol,
            sasl_mechanism=args.sasl_mechanism,
            password_file=getattr(args, "kafka_password_file", None),
            # run's timing flags; other commands read with the settings' defaults
            session_timeout_ms=getattr(args, "session_timeout_ms", default(KafkaSettings, "session_timeout_ms")),
            fetch_wait_ms=getattr(args, "fetch_wait_ms", default(KafkaSettings, "fetch_wait_ms")),
            request_timeout_ms=getattr(args, "request_timeout_ms", default(KafkaSettings, "request_timeout_ms")),
            replication_factor=getattr(args, "replication_factor", None),
            ssl_cafile=getattr(args, "ssl_cafile", None),
            ssl_certfile=getattr(args, "ssl_certfile", None),
            ssl_keyfile=getattr(args, "ssl_keyfile", None),
        )
    return LogSettings(directory=getattr(args, "log", None) or DEFAULT_LOG_DIR, kafka=kafka,
                       partitions=partition_names(getattr(args, "partitions", None)))


def service_settings(args: argparse.Namespace) -> ServiceSettings:
    """``evsched run``'s settings from its parsed flags."""
    log = log_settings(args)
    return ServiceSettings(
        log=log, config=args.config, mqtt=args.mqtt, mqtt_ingest=args.mqtt_ingest,
        mqtt_prefix=args.mqtt_prefix, once=args.once,
        batch=args.batch, max_batch=args.max_batch, snapshot_dir=args.snapshot_dir,
        snapshot_every=args.snapshot_every, snapshot_keep=args.snapshot_keep, standby=args.standby,
        transactions=args.transactions, no_transactions=args.no_transactions,
        kafka_outage_s=args.kafka_outage_s,
        verbose=args.verbose, log_format=args.log_format, log_level=args.log_level, http=args.http,
        ready_max_lag=args.ready_max_lag, accept_admin_on_inputs=args.accept_admin_on_inputs,
        serial_commits=args.serial_commits,
        mqtt_ca=args.mqtt_ca, mqtt_cert=args.mqtt_cert, mqtt_key=args.mqtt_key,
    )


@dataclass(frozen=True)
class SnapshotSettings:
    """Which snapshots replay may start from: ``directory`` (None: none) unless ``disabled`` (``--no-snapshots``)."""

    directory: str | None = None
    disabled: bool = False


def snapshot_settings(args: argparse.Namespace, log: LogSettings) -> SnapshotSettings:
    """As ``evsched run`` lays snapshots out: DIR/snapshots of the embedded log; for Kafka
    ``--snapshot-dir``, else ./evsched-data/snapshots/GROUP (GROUP: ``--group`` when given, else the
    service's default); and under either ``P`` for the shard of ``--partition P``."""
    directory = getattr(args, "snapshot_dir", None)
    if directory is None and not log.kafka:
        directory = str(Path(log.directory) / "snapshots")
        return SnapshotSettings(directory=directory, disabled=bool(getattr(args, "no_snapshots", False)))
    if directory is None and log.kafka:
        from replay.kafka_source import REPLAY_GROUP  # replay's own consumer group: not the service's

        group = log.kafka.group if log.kafka.group != REPLAY_GROUP else KafkaSettings.group
        directory = str(Path(DEFAULT_LOG_DIR) / "snapshots" / group)
    if directory is not None and log.partitions:
        directory = str(Path(directory) / log.partitions[0]) if len(log.partitions) == 1 else directory
    return SnapshotSettings(directory=directory, disabled=bool(getattr(args, "no_snapshots", False)))
