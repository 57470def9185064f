"""Start ``evsched run``'s service: a ``Service`` with its snapshots and MQTT bridge, ``--config`` appended, signals.

Shared by the single-log run (``scheduler.cli.run``) and the sharded one (``scheduler.cli.shards``).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from events.log.port import EventLog, LogRefused
from scheduler.cli.settings import ServiceSettings
from scheduler.config import SchedulerConfig, default_config

if TYPE_CHECKING:
    from scheduler.service.bridge_wiring import MqttBridge
    from scheduler.service.loop import Service

LOG = logging.getLogger("evsched")


async def open_service(
    settings: ServiceSettings, log: EventLog, snapshot_dir: str | Path | None, *, partition: str = "default",
    **service_args: Any,
) -> tuple[Service, MqttBridge | None]:
    """A ``Service`` over ``log`` as ``run``'s flags configure it, with its MQTT bridge (``--mqtt``) started."""
    from scheduler.service.loop import Service
    from scheduler.storage.snapshot_files import SnapshotStore

    store = SnapshotStore(snapshot_dir, keep=settings.snapshot_keep) if snapshot_dir else None
    from scheduler.service.rejection_log import RejectionLogger

    listeners: list[Any] = [RejectionLogger()]
    bridge = None
    if settings.mqtt:
        from scheduler.service.bridge_wiring import mqtt_tls, start_bridge

        tls = mqtt_tls(settings.mqtt_ca, settings.mqtt_cert, settings.mqtt_key)
        bridge = await start_bridge(settings.mqtt, log, ingest=settings.mqtt_ingest, partition=partition,
                                    prefix=settings.mqtt_prefix, tls=tls)
        listeners.append(bridge)
    # The bridge reads the engine of the cycle it publishes: no commit overlapping the next cycle.
    service = Service.from_settings(log, settings, listeners=listeners, snapshots=store,
                                    overlap_commits=bridge is None and not settings.serial_commits, **service_args)
    return service, bridge


def stop_on_signals(stop: Callable[[], None]) -> None:
    """SIGINT and SIGTERM call ``stop`` (finish the cycle in hand, then return)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop)


class ConfigAfterInputs(Exception):
    """``run --config`` on a log whose waiting inputs were submitted before any config: they would be read
    under the built-in config (and those naming its queues rejected), so ``run`` refuses and says what to do."""


async def _waiting_configs(service: Service, waiting: int, look: int = 10_000) -> list[str]:
    """The YAML of each ``config.updated`` among the first waiting inputs (at most ``look``): ``config apply``'s,
    or ``submit --config``'s."""
    found: list[str] = []
    for rec in await service.log.read_inputs(dict(service.positions), min(waiting, look)):
        if b"config.updated" not in rec.value:
            continue
        if service.admin_channels is not None and rec.channel not in service.admin_channels:
            continue  # rejected 'not-authorized' when read
        try:
            obj = orjson.loads(rec.value)
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict) and obj.get("type") == "config.updated" and isinstance(obj.get("data"), dict):
            found.append(str(obj["data"].get("yaml")))
    return found


def _where(settings: ServiceSettings | None) -> str:
    if settings is None:
        return "--log DIR"
    if settings.log.kafka is not None:
        return f"--kafka {settings.log.kafka.bootstrap}"
    return f"--log {settings.log.directory}"


async def append_config(
    service: Service, config: SchedulerConfig | None, path: str | None, settings: ServiceSettings | None = None
) -> None:
    """Append ``--config`` to the service's input log as ``config.updated`` when it differs
    from the config in force (keyed by the service's shard name, ``default`` when unsharded).

    Raises ``ConfigAfterInputs`` when no config was ever applied and inputs are already
    waiting: the config would land after them.
    """
    if config is None or config.checksum == service.engine.state.config.checksum:
        return
    waiting = await service.lag()
    untouched = not any(service.positions.values())  # no input read yet: none decided under the built-in config
    queued = await _waiting_configs(service, waiting) if waiting else []
    if queued and queued[-1] == config.yaml:
        LOG.info("config %s from %s is already in the log, waiting to be read", config.checksum[:12], path)
        return
    if waiting and untouched and not queued and service.engine.state.config.checksum == default_config().checksum:
        where = _where(settings)
        raise ConfigAfterInputs(
            f"--config {path}: the log already holds {waiting} inputs submitted before any queue configuration; "
            f"appended now, the config would land after them and they would be read under the built-in config "
            f"(inputs for its queues rejected). Nothing has been decided from them yet. Either put the config "
            f"first: start a fresh log (remove the directory, or new topics on Kafka) and submit again with "
            f"`evsched submit --config {path} {where} FILE.jsonl`; "
            f"or append it after them deliberately: `evsched config apply {path} {where}`, then "
            f"`evsched run {where}`"
        )
    end = await service.log.input_end()
    record = {
        "id": f"config-{config.checksum[:16]}-{sum(end.values())}",
        "source": "evsched-run",
        "type": "config.updated",
        "data": {"yaml": config.yaml},
    }
    await service.log.append_admin([((service.name or "default").encode(), orjson.dumps(record))])
    LOG.info("appended config %s from %s to the admin channel", config.checksum[:12], path)
    if waiting:
        LOG.warning(
            "the config takes effect after the %d inputs already waiting in the log; to apply it to "
            "them, submit it first (`evsched submit --config F …`) or start the service before submitting",
            waiting,
        )


async def use_transactions(settings: ServiceSettings) -> bool | None:
    """Whether ``run`` commits cycles in transactions: probed once at start (None: ``--transactions``
    was asked for and the broker has none — the caller exits 1). Logs the choice once.

    Raises ``LogRefused`` at once for an untrusted certificate or refused credentials."""
    kafka = settings.log.kafka
    if kafka is None:
        if settings.transactions:
            LOG.error("--transactions: only Kafka has them (use --kafka)")
            return None
        return False
    if settings.no_transactions:
        LOG.info("--no-transactions: at-least-once (outputs first, then input offsets; deterministic ids "
                 "make re-written outputs identical)")
        return False
    from events.log.kafka.clients import diagnose, probe_transactions
    from events.log.kafka_options import client_options

    options = client_options(kafka.bootstrap, request_timeout_ms=kafka.request_timeout_ms, **kafka.security())
    refused = await diagnose(options)
    if isinstance(refused, LogRefused):
        raise refused  # an untrusted certificate or a wrong password: say so now, never retry
    supported, reason = await probe_transactions(options, kafka.group)
    if supported:
        LOG.info("exactly-once cycles: each cycle's outputs and input offsets commit in one transaction (%s)",
                 reason)
        return True
    if settings.transactions:
        LOG.error("--transactions: no transactional producer: %s", reason)
        return None
    LOG.warning("at-least-once cycles: the broker has no transactions (%s); outputs first, then input "
                "offsets, and nothing fences an instance that another one took over from", reason)
    return False
