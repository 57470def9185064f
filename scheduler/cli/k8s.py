"""``evsched k8s --kubeconfig FILE``: Kubernetes as the resource manager, with the service or apart from it over Kafka.

By default one process: the service (``scheduler.service``) and the shim
(``scheduler.kubernetes.shim``) share the embedded log. On start the service recovers and reads
every input already in the log, then the shim reconciles the API server's lists with the state
recovered and watches. With ``--kafka`` only the shim runs: it produces to the input topic and
follows the decisions topic of an ``evsched run --kafka`` elsewhere, its view of the scheduler's
state folded from that log (``scheduler.kubernetes.follower``) (docs/kubernetes.md).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os

from events.log.open import open_log
from events.log.port import LogError
from scheduler.cli.config_arg import load_config_arg
from scheduler.cli.flags import add_log_arguments, positive_int
from scheduler.cli.logging_setup import add_logging_arguments, setup_logging
from scheduler.cli.service_wiring import ConfigAfterInputs, append_config, open_service, stop_on_signals
from scheduler.cli.settings import ServiceSettings, default, log_settings
from scheduler.config import SchedulerConfig
from scheduler.service.cycle_gc import CycleCollector

LOG = logging.getLogger("evsched")
DEFAULT_SCHEDULER_NAME = "evsched"
APART_POLL_S = 0.05  # apart from the service nothing wakes the shim after a cycle: it polls the decisions topic


def add_k8s_command(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("k8s", help="schedule the pods of a Kubernetes API server (docs/kubernetes.md)")
    p.add_argument("--kubeconfig", metavar="FILE", default=os.environ.get("KUBECONFIG"),
                   help="the cluster and credentials (default $KUBECONFIG)")
    p.add_argument("--context", metavar="NAME", help="the kubeconfig context (default its current-context)")
    p.add_argument("--scheduler-name", default=DEFAULT_SCHEDULER_NAME, metavar="NAME",
                   help="schedule the pods whose spec.schedulerName is NAME (default %(default)s); other pods "
                   "occupy their nodes")
    p.add_argument("--config", metavar="F", help="queue configuration YAML, appended to the log as config.updated "
                   "(the embedded log only: with --kafka the service's own --config or `config apply` set it)")
    add_log_arguments(p)  # --log DIR (one process with the service) | --kafka HOST:PORT (the shim alone)
    p.add_argument("--batch", type=positive_int, default=default(ServiceSettings, "batch"), metavar="N",
                   help="inputs per cycle (default %(default)s); under a backlog batches double up to 4 x N")
    add_logging_arguments(p)
    p.set_defaults(handler=cmd_k8s)


def cmd_k8s(args: argparse.Namespace) -> int:
    settings = ServiceSettings(log=log_settings(args), config=args.config, batch=args.batch,
                               verbose=args.verbose, log_format=args.log_format, log_level=args.log_level)
    setup_logging(settings.log_format, settings.log_level, verbose=settings.verbose)
    if not args.kubeconfig:
        LOG.error("evsched k8s: no kubeconfig (--kubeconfig FILE or $KUBECONFIG)")
        return 1
    if settings.log.kafka is not None and settings.config:
        LOG.error("evsched k8s: --config needs the embedded log; with --kafka the service that reads the log "
                  "(`evsched run --kafka … --config F`) or `evsched config apply` sets the queues")
        return 1
    config = load_config_arg(settings.config)
    from scheduler.kubernetes.api import KubeconfigError, load_kubeconfig

    try:
        connection = load_kubeconfig(args.kubeconfig, args.context)
    except (KubeconfigError, OSError) as exc:
        LOG.error("evsched k8s: %s", exc)
        return 1
    try:
        if settings.log.kafka is not None:
            return asyncio.run(_run_apart(settings, connection, args.scheduler_name))
        with CycleCollector() as collector:
            return asyncio.run(_run(settings, config, connection, args.scheduler_name, collector))
    except (LogError, ConfigAfterInputs) as exc:
        LOG.error("%s", exc)
        return 1


async def _run_apart(settings: ServiceSettings, connection: object, scheduler_name: str) -> int:
    """The shim alone: inputs to the Kafka log, decisions from it, the state folded from it."""
    from scheduler.kubernetes.api import ApiError, Connection, KubeApi
    from scheduler.kubernetes.follower import LogFollower
    from scheduler.kubernetes.shim import KubeShim

    assert isinstance(connection, Connection)
    stop = asyncio.Event()
    stop_on_signals(stop.set)
    log = await open_log(settings.log)  # no transactions, no group membership: the service's are its own
    api = KubeApi(connection)
    follower = LogFollower(log)
    shim = KubeShim(api, log, follower.current, follower.between_cycles, scheduler_name=scheduler_name,
                    read_outputs=follower.read, idle_wait_s=APART_POLL_S)
    try:
        catching_up = asyncio.create_task(follower.catch_up())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait([catching_up, stopping], return_when=asyncio.FIRST_COMPLETED)
        if not catching_up.done():
            catching_up.cancel()
            return 0
        stopping.cancel()
        await catching_up
        try:
            await shim.start(outputs_from=follower.output_offset)
        except (ApiError, OSError) as exc:
            LOG.error("evsched k8s: cannot list the cluster at %s: %s", connection.server, exc)
            return 1
        LOG.info("scheduling pods with schedulerName %s on %s through the log on Kafka %s (%d cycles folded, %d "
                 "nodes, %d pods of ours)", scheduler_name, connection.server,
                 settings.log.kafka.bootstrap if settings.log.kafka else "", follower.cycles, len(shim.nodes),
                 len(shim.pods))
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait([stopping, *shim.tasks], return_when=asyncio.FIRST_COMPLETED)
        for task in shim.tasks:  # a task of the shim ends only when it fails (the log or the API server gone)
            if task.done() and not task.cancelled() and task.exception() is not None:
                LOG.error("evsched k8s: %s", task.exception())
                return 1
    finally:
        await shim.close()
        await api.close()
        await log.close()
    return 0


async def _run(settings: ServiceSettings, config: SchedulerConfig | None, connection: object, scheduler_name: str,
               collector: CycleCollector) -> int:
    from scheduler.kubernetes.api import ApiError, Connection, KubeApi
    from scheduler.kubernetes.shim import KubeShim

    assert isinstance(connection, Connection)
    log = await open_log(settings.log)
    service, _ = await open_service(settings, log, settings.snapshots(), collector=collector, poll_interval_s=0.05)
    stop_on_signals(service.stop)
    api = KubeApi(connection)
    shim = KubeShim(api, log, lambda: service.engine, service.wait_between_cycles, scheduler_name=scheduler_name)
    service.listeners.append(shim)
    try:
        await service.start()
        await append_config(service, config, settings.config, settings)
        while await service.lag() > 0:  # read every input already in the log: the shim reconciles with all of it
            await service.run_cycle_once()
        try:
            await shim.start()
        except (ApiError, OSError) as exc:
            LOG.error("evsched k8s: cannot list the cluster at %s: %s", connection.server, exc)
            return 1
        LOG.info("scheduling pods with schedulerName %s on %s (%d nodes, %d pods of ours)", scheduler_name,
                 connection.server, len(shim.nodes), len(shim.pods))
        await service.run()
    finally:
        await shim.close()
        await api.close()
        await log.close()
    return 0
