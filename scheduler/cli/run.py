"""Handlers of ``evsched run`` and ``evsched submit``: open the log, start the service or append."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from events.codec import decode_input_object
from events.log.credentials import CredentialError, redact_logs
from events.log.open import DEFAULT_LOG_DIR, open_log
from events.log.port import EventLog, LogError
from events.models import InputRejected
from events.producer import key_of
from scheduler.cli.credentials import add_credential_arguments, prepare_run
from scheduler.cli.settings import ServiceSettings, log_settings, service_settings
from scheduler.config import SchedulerConfig
from scheduler.service.cycle_gc import CycleCollector

if TYPE_CHECKING:
    from scheduler.service.bridge_wiring import MqttBridge
    from scheduler.service.loop import Service

SUBMIT_SOURCE = "evsched-submit"
LOG = logging.getLogger("evsched")


def setup_logging(verbose: bool = False) -> None:
    """Human-readable log lines on stderr."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("aiokafka").setLevel(logging.WARNING)


def add_log_arguments(p: argparse.ArgumentParser, *, mqtt: bool = False) -> None:
    """``--log DIR | --kafka HOST:PORT`` and Kafka's options (``mqtt``: also ``--mqtt-password-file``)."""
    where = p.add_mutually_exclusive_group()
    where.add_argument("--log", metavar="DIR", help=f"embedded log directory (default {DEFAULT_LOG_DIR})")
    where.add_argument("--kafka", metavar="HOST:PORT", help="Kafka bootstrap servers")
    p.add_argument("--input-topic", action="append", dest="input_topics", metavar="TOPIC",
                   help="Kafka input topic (repeatable; default evsched.inputs)")
    p.add_argument("--decisions-topic", default="evsched.decisions", help="Kafka topic for outputs")
    p.add_argument("--deadletter-topic", default="evsched.deadletter",
                   help="Kafka topic for unreadable input records (raw bytes, origin in headers)")
    p.add_argument("--group", default="evsched", metavar="ID", help="Kafka consumer group id")
    p.add_argument("--security-protocol", default="PLAINTEXT", help="Kafka security protocol (SASL_SSL, SSL, …)")
    p.add_argument("--sasl-mechanism", default=None, help="Kafka SASL mechanism (PLAIN, SCRAM-SHA-256, …); "
                   "credentials come from EVSCHED_KAFKA_USERNAME / EVSCHED_KAFKA_PASSWORD")
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
    p.add_argument("--session-timeout-ms", type=int, default=10_000, metavar="MS",
                   help="Kafka group session timeout: how soon another instance takes over the shards (or the "
                   "lease) of one that died (default 10000)")
    p.add_argument("--fetch-wait-ms", type=int, default=5, metavar="MS",
                   help="Kafka fetch.max.wait: how long the broker may hold a fetch that finds nothing (default 5; "
                   "Apache Kafka answers as soon as data arrives, so a longer wait saves idle requests there, but "
                   "Tansu holds the fetch for all of it, which adds to the event→decision latency)")
    p.add_argument("--request-timeout-ms", type=int, default=None, metavar="MS",
                   help="Kafka request timeout: a broker silent this long fails the request (default 30000)")
    p.add_argument("--kafka-outage-s", type=float, default=300.0, metavar="S",
                   help="when Kafka fails (broker down or silent past the request timeout), restart in-process "
                   "— restore state from the log and go on — with backoff for up to S seconds of failures, "
                   "then exit 1 (default 300; 0 exits at the first failure)")
    p.add_argument("--transactions", action="store_true",
                   help="require a broker with transactional producers: probe at start and exit 1 with the "
                   "broker's reason when it has none. Probe only: outputs and offsets are still committed "
                   "separately (outputs first), which the design relies on, so a crash never loses a decision")


def prepare_submission(lines: list[bytes]) -> tuple[list[tuple[bytes, bytes]], list[str]]:
    """Validate JSONL lines for ``submit``: ((key, record) pairs to append, one error per bad line).

    A missing ``source`` becomes ``evsched-submit`` and a missing ``id`` a hash of the
    line, so submitting the same file twice is harmless (the copies are duplicates).
    """
    good: list[tuple[bytes, bytes]] = []
    errors: list[str] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            errors.append(f"line {number}: not valid JSON: {exc}")
            continue
        if isinstance(obj, dict):
            obj.setdefault("source", SUBMIT_SOURCE)
            obj.setdefault("id", hashlib.sha256(line.strip()).hexdigest()[:24])
        result = decode_input_object(obj, append_time_us=0, position=f"line {number}")
        if isinstance(result, InputRejected):
            errors.append(f"line {number}: {result.reason}: {result.message}")
            continue
        good.append((key_of(result.type, result.data).encode(), orjson.dumps(obj)))
    return good, errors


def cmd_submit(args: argparse.Namespace) -> int:
    """``evsched submit [--log DIR | --kafka …] FILE.jsonl|-``."""
    setup_logging()
    try:
        raw = sys.stdin.buffer.read() if args.file == "-" else open(args.file, "rb").read()  # noqa: SIM115
    except OSError as exc:
        print(f"evsched: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 1
    good, errors = prepare_submission(raw.splitlines())
    settings = log_settings(args)

    async def append() -> None:
        if settings.kafka and settings.partitions:
            from scheduler.cli.shards import submit_to_shards

            good[:] = await submit_to_shards(settings, good, errors)
            return
        log = await open_log(settings)
        try:
            await log.append_inputs(good)
        finally:
            await log.close()

    try:
        asyncio.run(append())
    except LogError as exc:
        print(f"evsched submit: {exc}", file=sys.stderr)
        return 1
    for err in errors:
        print(f"evsched submit: {err}", file=sys.stderr)
    print(f"appended {len(good)} events" + (f"; {len(errors)} lines rejected" if errors else ""), file=sys.stderr)
    return 1 if errors else 0


async def append_config(service: Service, config: SchedulerConfig | None, path: str | None) -> None:
    """Append ``--config`` to the service's input log as ``config.updated`` when it differs
    from the config in force (keyed by the service's shard name, ``default`` when unsharded)."""
    if config is None or config.checksum == service.engine.state.config.checksum:
        return
    end = await service.log.input_end()
    record = {
        "id": f"config-{config.checksum[:16]}-{sum(end.values())}",
        "source": "evsched-run",
        "type": "config.updated",
        "data": {"yaml": config.yaml},
    }
    waiting = await service.lag()
    await service.log.append_inputs([((service.name or "default").encode(), orjson.dumps(record))])
    LOG.info("appended config %s from %s to the input log", config.checksum[:12], path)
    if waiting:
        LOG.warning(
            "the config takes effect after the %d inputs already waiting in the log; to apply it to "
            "them, submit it first (a config.updated event) or start the service before submitting",
            waiting,
        )


def cmd_run(args: argparse.Namespace) -> int:
    """``evsched run [--config F] [--log DIR | --kafka …] [--mqtt URL] [--once]``."""
    settings = service_settings(args)
    setup_logging(settings.verbose)
    try:
        redact_logs(prepare_run(args, os.environ))  # credentials from env/files only, kept out of logs
    except CredentialError as exc:
        LOG.error("%s", exc)
        return 1
    from scheduler.cli.commands import load_config_arg

    config = load_config_arg(settings.config)  # None without --config; exits 1 with every reason when invalid
    outage = KafkaOutage(settings.kafka_outage_s)
    while True:
        try:
            with CycleCollector() as collector:  # GC between cycles, not inside them
                return asyncio.run(_run(settings, config, collector))
        except LogError as exc:
            delay = outage.next_delay(time.monotonic())
            if delay is None:
                LOG.error("%s", exc)
                return 1
            # Everything decided is in the log: a restart restores it (snapshot + tail), as after a crash.
            LOG.warning("Kafka failed: %s; restarting from the log in %.0f s (attempt %d; gives up after %.0f s "
                        "more of failures, --kafka-outage-s)", exc, delay, outage.attempts, outage.remaining)
            time.sleep(delay)


class KafkaOutage:
    """Backoff for in-process restarts after Kafka failures; a streak ends S seconds after its last failure.

    >>> o = KafkaOutage(60)
    >>> [o.next_delay(t) for t in (0, 1, 3, 7)], o.next_delay(61), o.next_delay(200)
    ([1.0, 2.0, 4.0, 8.0], None, 1.0)
    """

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.attempts = 0
        self.remaining = 0.0
        self._streak_start: float | None = None
        self._last: float | None = None

    def next_delay(self, now: float) -> float | None:
        """Seconds to wait before the next attempt, or None when it is time to give up."""
        if self.limit_s <= 0:
            return None
        if self._last is None or now - self._last > self.limit_s:  # a new streak
            self._streak_start, self.attempts = now, 0
        self._last = now
        assert self._streak_start is not None
        self.remaining = self._streak_start + self.limit_s - now
        if self.remaining <= 0:
            return None
        self.attempts += 1
        return min(2.0 ** (self.attempts - 1), 30.0, self.remaining)


async def open_service(
    settings: ServiceSettings, log: EventLog, snapshot_dir: str | Path | None, *, partition: str = "default",
    **service_args: Any,
) -> tuple[Service, MqttBridge | None]:
    """A ``Service`` over ``log`` as ``run``'s flags configure it, with its MQTT bridge (``--mqtt``) started."""
    from scheduler.service.loop import Service
    from scheduler.storage.snapshot_files import SnapshotStore

    store = SnapshotStore(snapshot_dir, keep=settings.snapshot_keep) if snapshot_dir else None
    listeners: list[Any] = []
    bridge = None
    if settings.mqtt:
        from scheduler.service.bridge_wiring import start_bridge

        bridge = await start_bridge(settings.mqtt, log, ingest=settings.mqtt_ingest, partition=partition)
        listeners.append(bridge)
    service = Service(log, batch_records=settings.batch, max_batch_records=settings.max_batch or 4 * settings.batch,
                      listeners=listeners, snapshots=store, snapshot_every=settings.snapshot_every, **service_args)
    return service, bridge


def stop_on_signals(stop: Callable[[], None]) -> None:
    """SIGINT and SIGTERM call ``stop`` (finish the cycle in hand, then return)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop)


async def _run(settings: ServiceSettings, config: SchedulerConfig | None, collector: CycleCollector) -> int:
    kafka = settings.log.kafka
    if kafka and settings.log.partitions:
        from scheduler.cli.shards import run_shards

        return await run_shards(settings, kafka, config, collector)
    log = await open_log(settings.log)
    if settings.transactions:
        probe = getattr(log, "probe_transactions", None)
        supported, reason = await probe() if probe is not None else (False, "only Kafka has them (use --kafka)")
        if not supported:
            LOG.error("--transactions: no transactional producer: %s", reason)
            await log.close()
            return 1
        LOG.info("--transactions: %s (outputs and offsets are still committed separately)", reason)
    # A Kafka read waits for records itself (KafkaLog's poll), so the loop needs no nap between reads.
    service, bridge = await open_service(settings, log, settings.snapshots(), poll_interval_s=0.0 if kafka else 0.2,
                                         collector=collector)
    stop_on_signals(service.stop)
    lease: Any = None
    try:
        if settings.standby:
            if not hasattr(log, "lease"):
                LOG.error("--standby needs --kafka (the lease is a Kafka consumer group)")
                return 1
            lease = log.lease()
            lease.on_lost = service.stop  # finish the cycle in hand, then exit 1 (below)
            await lease.start()
            LOG.info("standby: waiting for the active lease (group %s.active)", kafka.group if kafka else "evsched")
            if not await lease.wait(service.stopping):
                return 0
        await service.start()
        await append_config(service, config, settings.config)
        await service.run(once=settings.once)
        if lease is not None and not lease.held.is_set():
            return 1
    finally:
        if lease is not None:
            await lease.close()  # after the last cycle is written: a standby may start at once
        if bridge is not None:
            await bridge.close()
        await log.close()
    return 0
