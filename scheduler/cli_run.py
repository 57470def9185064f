"""Handlers of ``evsched run`` and ``evsched submit``: open the log, start the service or append."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

import orjson

from events.codec import decode_input_object
from events.log.port import EventLog, LogError
from events.models import InputRejected
from events.producer import key_of
from scheduler.config import SchedulerConfig

DEFAULT_LOG_DIR = "./evsched-data"
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


def add_log_arguments(p: argparse.ArgumentParser) -> None:
    """``--log DIR | --kafka HOST:PORT`` and Kafka's options."""
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
    # cli_commands registers the run parser and calls only this function; until it calls
    # add_service_arguments itself, the service's Kafka flags are added here for `run`.
    if p.prog.rsplit(" ", 1)[-1] == "run":
        add_service_arguments(p)


def add_service_arguments(p: argparse.ArgumentParser) -> None:
    """``evsched run``'s Kafka-only flags."""
    p.add_argument("--standby", action="store_true",
                   help="active/standby: run only while holding the lease (Kafka consumer group GROUP.active); "
                   "otherwise wait, then restore state from the decisions topic and take over when the active "
                   "instance stops or its session times out. Exits 1 if the lease is lost while running")
    p.add_argument("--transactions", action="store_true",
                   help="require a broker with transactional producers: probe at start and exit 1 with the "
                   "broker's reason when it has none. Probe only: outputs and offsets are still committed "
                   "separately (outputs first), which the design relies on, so a crash never loses a decision")


async def open_log(args: argparse.Namespace, *, readonly: bool = False) -> EventLog:
    """The log named by the arguments, opened (and started, for Kafka)."""
    if getattr(args, "kafka", None):
        from events.log.kafka import KafkaLog

        kwargs: dict[str, Any] = {
            "input_topics": args.input_topics or ["evsched.inputs"],
            "decisions_topic": args.decisions_topic,
            "deadletter_topic": args.deadletter_topic,
            "group_id": args.group,
            "security_protocol": args.security_protocol,
        }
        if args.sasl_mechanism:
            kwargs["sasl_mechanism"] = args.sasl_mechanism
            kwargs["sasl_plain_username"] = os.environ.get("EVSCHED_KAFKA_USERNAME")
            kwargs["sasl_plain_password"] = os.environ.get("EVSCHED_KAFKA_PASSWORD")
        log = KafkaLog(args.kafka, **kwargs)
        await log.start()
        return log
    from events.log.file import FileLog

    return FileLog(args.log or DEFAULT_LOG_DIR, readonly=readonly)


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
    for err in errors:
        print(f"evsched submit: {err}", file=sys.stderr)

    async def append() -> None:
        log = await open_log(args)
        try:
            await log.append_inputs(good)
        finally:
            await log.close()

    try:
        asyncio.run(append())
    except LogError as exc:
        print(f"evsched submit: {exc}", file=sys.stderr)
        return 1
    print(f"appended {len(good)} events" + (f"; {len(errors)} lines rejected" if errors else ""), file=sys.stderr)
    return 1 if errors else 0


def cmd_run(args: argparse.Namespace) -> int:
    """``evsched run [--config F] [--log DIR | --kafka …] [--mqtt URL] [--once]``."""
    setup_logging(args.verbose)
    from scheduler.cli_commands import load_config_arg

    config = load_config_arg(args.config)  # None without --config; exits 1 with every reason when invalid
    try:
        return asyncio.run(_run(args, config))
    except LogError as exc:
        LOG.error("%s", exc)
        return 1


async def _run(args: argparse.Namespace, config: SchedulerConfig | None) -> int:
    from scheduler.service import Service
    from scheduler.snapshots import SnapshotStore

    log = await open_log(args)
    if getattr(args, "transactions", False):
        probe = getattr(log, "probe_transactions", None)
        supported, reason = await probe() if probe is not None else (False, "only Kafka has them (use --kafka)")
        if not supported:
            LOG.error("--transactions: no transactional producer: %s", reason)
            await log.close()
            return 1
        LOG.info("--transactions: %s (outputs and offsets are still committed separately)", reason)
    listeners: list[Any] = []
    bridge = None
    if args.mqtt:
        from scheduler.bridge_wiring import start_bridge

        bridge = await start_bridge(args.mqtt, log, ingest=args.mqtt_ingest)
        listeners.append(bridge)
    snapshot_dir = args.snapshot_dir or (None if args.kafka else str(Path(args.log or DEFAULT_LOG_DIR) / "snapshots"))
    store = SnapshotStore(snapshot_dir) if snapshot_dir else None
    service = Service(log, batch_records=args.batch, listeners=listeners, snapshots=store,
                      snapshot_every=args.snapshot_every)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, service.stop)
    lease: Any = None
    try:
        if getattr(args, "standby", False):
            if not hasattr(log, "lease"):
                LOG.error("--standby needs --kafka (the lease is a Kafka consumer group)")
                return 1
            lease = log.lease()
            lease.on_lost = service.stop  # finish the cycle in hand, then exit 1 (below)
            await lease.start()
            LOG.info("standby: waiting for the active lease (group %s.active)", args.group)
            if not await lease.wait(service.stopping):
                return 0
        await service.start()
        if config is not None and config.checksum != service.engine.state.config.checksum:
            end = await log.input_end()
            record = {
                "id": f"config-{config.checksum[:16]}-{sum(end.values())}",
                "source": "evsched-run",
                "type": "config.updated",
                "data": {"yaml": config.yaml},
            }
            waiting = await service.lag()
            await log.append_inputs([(b"default", orjson.dumps(record))])
            LOG.info("appended config %s from %s to the input log", config.checksum[:12], args.config)
            if waiting:
                LOG.warning(
                    "the config takes effect after the %d inputs already waiting in the log; to apply it to "
                    "them, submit it first (a config.updated event) or start the service before submitting",
                    waiting,
                )
        await service.run(once=args.once)
        if lease is not None and not lease.held.is_set():
            return 1
    finally:
        if lease is not None:
            await lease.close()  # after the last cycle is written: a standby may start at once
        if bridge is not None:
            await bridge.close()
        await log.close()
    return 0
