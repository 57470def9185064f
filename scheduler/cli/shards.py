"""``evsched run|submit --kafka … --partition NAME``: sharded Kafka wiring for the CLI.

``run`` joins the shard group ``--group`` (``events.log.kafka.ShardMembership``) for the
named scheduler partitions and lets ``scheduler.service.shards.ShardHost`` run the ones the group
assigns to this instance, each as its own ``Service`` over its own ``KafkaLog``.
``submit`` routes each event to its partition's input topic; ``config.updated`` and
priority-class events concern every partition and go to every named shard.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from events.log.names import DEFAULT_SHARD
from scheduler.config import SchedulerConfig
from scheduler.core.engine import DEFAULT_SOURCE

if TYPE_CHECKING:
    from events.log.kafka import ShardTopics
    from events.log.open import KafkaSettings, LogSettings
    from scheduler.cli.settings import ServiceSettings
    from scheduler.service.cycle_gc import CycleCollector
    from scheduler.service.shards import RunningShard

LOG = logging.getLogger("evsched")
# Every shard's scheduler sees these: the queue configuration and the priority classes.
BROADCAST_TYPES = frozenset({"config.updated", "priorityclass.upserted", "priorityclass.deleted"})


def shard_source(shard: str) -> str:
    """The ``source`` of a shard's outputs: envelope ids (``<cycle>-<n>``) repeat across shards,
    so each shard is its own CloudEvents source (the default shard keeps ``evsched``)."""
    return DEFAULT_SOURCE if shard == DEFAULT_SHARD else f"{DEFAULT_SOURCE}/{shard}"


# ---------------------------------------------------------------------------- submit


Record = tuple[bytes, bytes]


def route(records: list[Record], shards: list[str]) -> tuple[dict[str, list[Record]], list[str]]:
    """Each validated ``(key, value)`` to its shard(s): ``({shard: records}, errors)``.

    An event goes to the shard of its ``data.partition`` (``default`` when absent); the
    broadcast types go to every shard; a partition not among ``shards`` is an error.
    """
    out: dict[str, list[Record]] = defaultdict(list)
    errors = []
    for key, value in records:
        obj = orjson.loads(value)
        if obj["type"] in BROADCAST_TYPES:
            for shard in shards:
                out[shard].append((key, value))
            continue
        partition = obj["data"].get("partition", DEFAULT_SHARD)
        if partition not in shards:
            errors.append(f"event {obj['id']!r}: partition {partition!r} is not among --partition {','.join(shards)}")
            continue
        out[partition].append((key, value))
    return dict(out), errors


async def submit_to_shards(settings: LogSettings, records: list[Record], errors: list[str], *,
                           admin: bool = False) -> list[Record]:
    """Append ``records`` to their shards' input (``admin``: admin) topics; returns those appended
    (errors: appended to)."""
    from events.log.open import open_log

    assert settings.kafka is not None
    routed, unroutable = route(records, list(settings.partitions))
    errors.extend(unroutable)
    for shard, batch in routed.items():
        log = await open_log(settings, shard=shard)
        try:
            await (log.append_admin(batch) if admin else log.append_inputs(batch))
        finally:
            await log.close()
    appended = {r for batch in routed.values() for r in batch}
    return [r for r in records if r in appended]


# ---------------------------------------------------------------------------- run


async def run_shards(
    settings: ServiceSettings, kafka: KafkaSettings, config: SchedulerConfig | None, collector: CycleCollector
) -> int:
    """``evsched run --kafka … --partition …``: join the shard group, run what it assigns."""
    from events.log.kafka import ShardMembership
    from events.log.kafka_options import client_options
    from scheduler.cli.service_wiring import stop_on_signals, use_transactions
    from scheduler.service.shards import ShardHost

    if settings.standby:
        LOG.error("--standby and --partition do not mix: with --partition, instances of one group split the "
                  "shards and take over each other's (that is the standby)")
        return 1
    topics = {shard: kafka.topics_of(shard) for shard in settings.log.partitions}
    security = kafka.security()
    transactional = await use_transactions(settings)
    if transactional is None:
        return 1
    membership = ShardMembership(
        client_options(kafka.bootstrap, request_timeout_ms=kafka.request_timeout_ms, **security), group_id=kafka.group,
        replication_factor=kafka.replication_factor,
        shards={shard: (*t.inputs, t.admin) for shard, t in topics.items()},  # a shard's channels, admin included
        **kafka.group_timing(),
    )

    from scheduler.cli.http_wiring import MissingExtra, live_state, start_for_shards

    surfaces: dict[str, Any] = {}  # shard -> its HTTP view (LiveState), with --http

    async def open_shard(shard: str) -> RunningShard:
        running = await _open_shard(settings, config, topics[shard], membership, collector, transactional)
        if settings.http:
            surfaces[shard] = live_state(settings, running.service, with_log=False)
        return running

    host = ShardHost(open_shard, once=settings.once)
    try:
        http = await start_for_shards(settings, lambda: {n: s for n, s in surfaces.items() if n in host.shards})
    except (MissingExtra, OSError, ValueError) as exc:
        LOG.error("--http %s: %s", settings.http, exc)
        return 1
    membership.on_revoke, membership.on_assign = host.revoke, host.assign
    stop_on_signals(host.stop)
    await membership.start()
    try:
        await host.run()
    finally:
        await membership.close()  # after the last cycle of every shard is written: others take over at once
        if http is not None:
            await http.stop()
    return 0


async def _open_shard(
    settings: ServiceSettings, config: SchedulerConfig | None, topics: ShardTopics,
    membership: Any, collector: CycleCollector, transactional: bool = False,
) -> RunningShard:
    """Open one shard's log, restore its scheduler (snapshot + log tail) and append ``--config``.

    With ``transactional`` the log's producer has the shard's transactional id, started before
    the log is read: a previous owner is fenced and its open transaction aborted first."""
    from events.log.open import open_log
    from scheduler.cli.service_wiring import append_config, open_service
    from scheduler.service.shards import RunningShard

    shard = topics.shard
    log = await open_log(settings.log, shard=shard, transactional=transactional, commit_offsets=membership.commit)
    bridge = None

    async def close() -> None:
        if bridge is not None:
            await bridge.close()
        await log.close()

    try:
        snapshot_dir = Path(settings.snapshots()) / shard
        service, bridge = await open_service(settings, log, snapshot_dir, partition=shard, name=shard,
                                             source=shard_source(shard), poll_interval_s=0.0, collector=collector)
        await service.start()
        await append_config(service, config, settings.config)
    except BaseException:
        await close()
        raise
    return RunningShard(service, close)
