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
from scheduler.config import SchedulerConfig

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

    options = client_options(kafka.bootstrap, **kafka.security())
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
