"""``evsched k8s --kubeconfig FILE``: the service over the embedded log with Kubernetes as its resource manager.

One process: the service (``scheduler.service``) and the shim (``scheduler.kubernetes.shim``)
share the log. On start the service recovers and reads every input already in the log, then the
shim reconciles the API server's lists with the state recovered and watches (docs/kubernetes.md).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os

from events.log.open import LogSettings, open_log
from events.log.port import LogError
from scheduler.cli.config_arg import load_config_arg
from scheduler.cli.flags import positive_int
from scheduler.cli.logging_setup import add_logging_arguments, setup_logging
from scheduler.cli.service_wiring import ConfigAfterInputs, append_config, open_service, stop_on_signals
from scheduler.cli.settings import ServiceSettings, default
from scheduler.config import SchedulerConfig
from scheduler.service.cycle_gc import CycleCollector

LOG = logging.getLogger("evsched")
DEFAULT_SCHEDULER_NAME = "evsched"


def add_k8s_command(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("k8s", help="schedule the pods of a Kubernetes API server (docs/kubernetes.md)")
    p.add_argument("--kubeconfig", metavar="FILE", default=os.environ.get("KUBECONFIG"),
                   help="the cluster and credentials (default $KUBECONFIG)")
    p.add_argument("--context", metavar="NAME", help="the kubeconfig context (default its current-context)")
    p.add_argument("--scheduler-name", default=DEFAULT_SCHEDULER_NAME, metavar="NAME",
                   help="schedule the pods whose spec.schedulerName is NAME (default %(default)s); other pods "
                   "occupy their nodes")
    p.add_argument("--config", metavar="F", help="queue configuration YAML, appended to the log as config.updated")
    p.add_argument("--log", metavar="DIR", default=default(LogSettings, "directory"),
                   help="embedded log directory (default %(default)s)")
    p.add_argument("--batch", type=positive_int, default=default(ServiceSettings, "batch"), metavar="N",
                   help="inputs per cycle (default %(default)s); under a backlog batches double up to 4 x N")
    add_logging_arguments(p)
    p.set_defaults(handler=cmd_k8s)


def cmd_k8s(args: argparse.Namespace) -> int:
    settings = ServiceSettings(log=LogSettings(directory=args.log), config=args.config, batch=args.batch,
                               verbose=args.verbose, log_format=args.log_format, log_level=args.log_level)
    setup_logging(settings.log_format, settings.log_level, verbose=settings.verbose)
    if not args.kubeconfig:
        LOG.error("evsched k8s: no kubeconfig (--kubeconfig FILE or $KUBECONFIG)")
        return 1
    config = load_config_arg(settings.config)
    from scheduler.kubernetes.api import KubeconfigError, load_kubeconfig

    try:
        connection = load_kubeconfig(args.kubeconfig, args.context)
    except (KubeconfigError, OSError) as exc:
        LOG.error("evsched k8s: %s", exc)
        return 1
    try:
        with CycleCollector() as collector:
            return asyncio.run(_run(settings, config, connection, args.scheduler_name, collector))
    except (LogError, ConfigAfterInputs) as exc:
        LOG.error("%s", exc)
        return 1


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
