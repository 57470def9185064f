"""``--http HOST:PORT`` for ``evsched run`` and ``evsched serve``: the operator's surface, wired to a source.

The server is optional (off unless asked) and needs the ``http`` extra (aiohttp,
prometheus-client); without it the command says which extra to install.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING

from events.log.open import LogSettings
from events.log.source import LogSource

if TYPE_CHECKING:
    from replay.rederive import StartPoint
    from scheduler.cli.settings import ServiceSettings
    from scheduler.http.server import HttpServer
    from scheduler.http.sources import LiveState, StateSource
    from scheduler.service.loop import Service

LOG = logging.getLogger("evsched.http")


class MissingExtra(Exception):
    """An optional dependency is not installed; the message names the extra."""


def add_http_arguments(p: argparse.ArgumentParser, *, required: bool = False) -> None:
    """``--http HOST:PORT`` and ``--ready-max-lag N``."""
    p.add_argument("--http", metavar="HOST:PORT", required=required,
                   help="serve /metrics, /healthz, /readyz, the state API (/ws/v1/...) and the web page on this "
                   "address (an explicit bind address, e.g. 127.0.0.1:9090; port 0 picks a free one)")
    p.add_argument("--ready-max-lag", type=int, default=10_000, metavar="N",
                   help="/readyz answers 503 while more than N inputs wait (default 10000)")


def _require_http() -> None:
    try:
        import aiohttp  # noqa: F401
        import prometheus_client  # noqa: F401
    except ImportError as exc:
        raise MissingExtra(f"--http needs the 'http' extra ({exc.name} is missing): "
                           "pip install 'evsched[http]'") from None


def source_opener(log: LogSettings) -> Callable[[], AbstractContextManager[LogSource]]:
    """A function opening the log ``log`` names, read-only (for explanations and time travel)."""
    from replay.open_source import open_source

    @contextmanager
    def opener() -> Iterator[LogSource]:
        with open_source(log) as source:
            yield source

    return opener


async def start_server(source: StateSource, address: str) -> HttpServer:
    """Bind the server for ``source`` (its URL is logged and kept in ``server.url``)."""
    _require_http()
    from scheduler.http.server import HttpServer

    server = HttpServer(source, address)
    await server.start()
    return server


def live_state(settings: ServiceSettings, service: Service, *, with_log: bool) -> LiveState:
    """An observer listening to ``service``, and the surface's view of both (and of the log, ``with_log``)."""
    from scheduler.http.observer import ServiceObserver
    from scheduler.http.sources import LiveState

    observer = ServiceObserver(cycle_seconds=lambda: service.last_cycle_s)
    service.listeners.append(observer)
    opener = source_opener(settings.log) if with_log else None
    return LiveState(service, observer, opener, ready_max_lag=settings.ready_max_lag,
                     history_start=lambda source, latest: history_start(settings, source, latest),
                     cycle_start=lambda source, cycle: cycle_start(settings, source, cycle))


def cycle_start(settings: ServiceSettings, source: LogSource, cycle: int) -> StartPoint | None:
    """Where time travel (``?cycle=N``) re-derives from: the newest snapshot the log vouches
    for at or before the cycle (None: the beginning)."""
    from replay.snapshot_start import pick_snapshot
    from scheduler.storage.snapshot_files import SnapshotStore

    return pick_snapshot(source, SnapshotStore(settings.snapshots()), cycle).start


# A log of at most this many inputs is re-derived from its beginning for the history when no
# snapshot lies SERIES_CYCLES back (seconds of work in a thread); a longer one from its newest snapshot.
HISTORY_REDERIVE_INPUTS = 100_000


def history_start(settings: ServiceSettings, source: LogSource, latest: int) -> StartPoint | None:
    """Where the surface re-derives its recent history from (``replay.history``): the newest
    snapshot at least ``SERIES_CYCLES`` before the log's last cycle; else the beginning of a
    short log (``HISTORY_REDERIVE_INPUTS``), or the newest snapshot of a long one (a shorter
    series, but no long re-derivation beside the service)."""
    from events.log.source import input_total
    from replay.history import SERIES_CYCLES
    from replay.snapshot_start import pick_snapshot
    from scheduler.storage.snapshot_files import SnapshotStore

    store = SnapshotStore(settings.snapshots())
    if latest > SERIES_CYCLES:
        found = pick_snapshot(source, store, latest - SERIES_CYCLES).start
        if found is not None:
            return found
    total = input_total(source)
    if total is not None and total <= HISTORY_REDERIVE_INPUTS:
        return None
    return pick_snapshot(source, store, None).start


async def start_for_service(settings: ServiceSettings, service: Service) -> HttpServer | None:
    """The live surface for ``service`` when ``--http`` was given (None otherwise)."""
    if not settings.http:
        return None
    _require_http()
    state = live_state(settings, service, with_log=True)
    server = await start_server(state, settings.http)
    state.load_history()  # the decisions and figures of the cycles before this start, from the log
    return server


async def start_for_shards(settings: ServiceSettings, running: Callable[[], dict[str, LiveState]]) -> HttpServer | None:
    """The surface of a sharded instance (``--partition``), when ``--http`` was given."""
    if not settings.http:
        return None
    _require_http()
    from scheduler.http.sources import ShardedState

    return await start_server(ShardedState(running, ready_max_lag=settings.ready_max_lag), settings.http)
