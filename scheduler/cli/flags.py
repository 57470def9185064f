"""The command line's shared flags: which log (``--log | --kafka`` and Kafka's options), ``run``'s service flags.

``scheduler.cli.settings`` turns what they parse into typed settings.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from events.log.names import DEFAULT_INPUT_TOPIC, DEFAULT_LOG_DIR
from events.log.open import KafkaSettings
from scheduler.cli.credentials import add_credential_arguments
from scheduler.cli.settings import default
from scheduler.service.settings import ServiceSettings


class ExitOneParser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage; ours exits 1 (docs/contract.md §6: 2 means a replay divergence).
    Every parser of the command line is one: subparsers take their parent's class."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (``--batch 0`` would never read anything)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is less than 1")
    return value


def mqtt_prefix(text: str) -> str:
    """An argparse type: an MQTT topic prefix (``evsched``, ``site-a/evsched``: no wildcards, no empty levels)."""
    from scheduler.bridge.topics import check_prefix

    try:
        return check_prefix(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_log_arguments(p: argparse.ArgumentParser, *, mqtt: bool = False) -> None:
    """``--log DIR | --kafka HOST:PORT`` and Kafka's options (``mqtt``: also ``--mqtt-password-file``)."""
    where = p.add_mutually_exclusive_group()
    where.add_argument("--log", metavar="DIR", help=f"embedded log directory (default {DEFAULT_LOG_DIR})")
    where.add_argument("--kafka", metavar="HOST:PORT", help="Kafka bootstrap servers")
    p.add_argument("--input-topic", action="append", dest="input_topics", metavar="TOPIC",
                   help=f"Kafka input topic (repeatable; default {DEFAULT_INPUT_TOPIC})")
    p.add_argument("--decisions-topic", default=default(KafkaSettings, "decisions_topic"),
                   help="Kafka topic for outputs")
    p.add_argument("--deadletter-topic", default=default(KafkaSettings, "deadletter_topic"),
                   help="Kafka topic for unreadable input records (raw bytes, origin in headers)")
    p.add_argument("--admin-topic", default=default(KafkaSettings, "admin_topic"), metavar="TOPIC",
                   help="Kafka topic of the admin channel: the only one config.updated and priorityclass events "
                   "are accepted from; grant write on it to operators only (docs/security.md)")
    p.add_argument("--group", default=default(KafkaSettings, "group"), metavar="ID", help="Kafka consumer group id")
    p.add_argument("--security-protocol", default=default(KafkaSettings, "security_protocol"),
                   help="Kafka security protocol (SASL_SSL, SSL, …)")
    p.add_argument("--sasl-mechanism", default=None, help="Kafka SASL mechanism (PLAIN, SCRAM-SHA-256, …); "
                   "credentials come from EVSCHED_KAFKA_USERNAME / EVSCHED_KAFKA_PASSWORD")
    p.add_argument("--replication-factor", type=int, default=None, metavar="N",
                   help="Kafka: replication factor of the topics created (default min(3, brokers)); they get "
                   "min.insync.replicas N-1 (at least 1), and the input and decisions topics retention.ms=-1")
    p.add_argument("--ssl-cafile", metavar="PEM", help="Kafka TLS: CA certificates the brokers' certificates must "
                   "chain to (default: the system's CAs); for --security-protocol SSL or SASL_SSL")
    p.add_argument("--ssl-certfile", metavar="PEM", help="Kafka TLS: client certificate (mutual TLS)")
    p.add_argument("--ssl-keyfile", metavar="PEM", help="Kafka TLS: the client certificate's private key")
    add_credential_arguments(p, mqtt=mqtt)
    p.add_argument("--partition", action="append", dest="partitions", metavar="NAME",
                   help="Kafka: a scheduler partition (shard) with its own topics — TOPIC.NAME, or the topics "
                   "unchanged for 'default' (repeatable, or a comma list). run: the shards this instance may "
                   "run, split with the other instances of --group; submit: route each event to its "
                   "partition's topic; replay/audit: the one shard to read")


def add_service_arguments(p: argparse.ArgumentParser) -> None:
    """``evsched run``'s Kafka-only flags."""
    p.add_argument("--standby", action="store_true",
                   help="active/standby: run only while holding the lease (Kafka consumer group GROUP.active); "
                   "otherwise wait, then restore state from the decisions topic and take over when the active "
                   "instance stops or its session times out. Exits 1 if the lease is lost while running")
    session = default(KafkaSettings, "session_timeout_ms")
    p.add_argument("--session-timeout-ms", type=int, default=session, metavar="MS",
                   help="Kafka group session timeout: how soon another instance takes over the shards (or the "
                   f"lease) of one that died (default {session})")
    fetch_wait = default(KafkaSettings, "fetch_wait_ms")
    p.add_argument("--fetch-wait-ms", type=int, default=fetch_wait, metavar="MS",
                   help="Kafka fetch.max.wait: how long the broker may hold a fetch that finds nothing (default "
                   f"{fetch_wait}; Apache Kafka answers as soon as data arrives, so a longer wait saves idle requests "
                   "there, but Tansu holds the fetch for all of it, which adds to the event→decision latency)")
    request = default(KafkaSettings, "request_timeout_ms")
    p.add_argument("--request-timeout-ms", type=int, default=request, metavar="MS",
                   help=f"Kafka request timeout: a broker silent this long fails the request (default {request})")
    outage = default(ServiceSettings, "kafka_outage_s")
    p.add_argument("--kafka-outage-s", type=float, default=outage, metavar="S",
                   help="when Kafka fails (broker down or silent past the request timeout), restart in-process "
                   "— restore state from the log and go on — with backoff for up to S seconds of failures, "
                   f"then exit 1 (default {outage:g}; 0 exits at the first failure; the embedded log never restarts)")
    txn = p.add_mutually_exclusive_group()
    txn.add_argument("--transactions", action="store_true",
                     help="require exactly-once cycles: exit 1 with the broker's reason when it has no "
                     "transactional producers (by default they are used where the broker has them)")
    txn.add_argument("--no-transactions", action="store_true",
                     help="at-least-once even where the broker has transactions: outputs first, then the input "
                     "offsets, with nothing that fences an instance another one has taken over from")
