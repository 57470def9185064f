"""``evsched serve --http HOST:PORT [--log DIR | --kafka …]``: the HTTP surface over a log, without a service.

For post-mortems: the same API and page as ``run --http``, with every state re-derived
from the log (``?cycle=N`` travels back in time). Runs until SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from events.log.source import LogUnavailable, open_file_log
from scheduler.cli.http_wiring import MissingExtra, add_http_arguments, source_opener, start_server
from scheduler.cli.logging_setup import add_logging_arguments, setup_logging
from scheduler.cli.settings import log_settings
from scheduler.cli.sources import add_source_arguments

LOG = logging.getLogger("evsched.serve")


def add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``serve``."""
    p = sub.add_parser("serve", help="the HTTP API and web page over a log, without running the scheduler",
                       description="Serve /metrics, the state API (/ws/v1/...) and the web page over a log: "
                       "state and explanations re-derived from it, any cycle selectable (?cycle=N).")
    add_source_arguments(p)
    add_http_arguments(p, required=True)
    add_logging_arguments(p)
    p.set_defaults(handler=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    """Handler of ``serve``: exit 0 after SIGINT/SIGTERM, 1 when there is no log or the server cannot start."""
    setup_logging(args.log_format, args.log_level, verbose=args.verbose)
    settings = log_settings(args)
    if settings.kafka is None:  # a log that is not there is said now, not as a 500 on every request
        try:
            with open_file_log(settings.directory):
                pass
        except LogUnavailable as exc:
            print(f"evsched serve: {exc}", file=sys.stderr)
            return 1
    try:
        return asyncio.run(_serve(args))
    except MissingExtra as exc:
        LOG.error("%s", exc)
        return 1
    except (OSError, ValueError) as exc:
        LOG.error("cannot serve on %s: %s", args.http, exc)
        return 1


async def _serve(args: argparse.Namespace) -> int:
    from scheduler.cli.service_wiring import stop_on_signals
    from scheduler.http.sources import LogState

    stop = asyncio.Event()
    stop_on_signals(stop.set)
    server = await start_server(LogState(source_opener(log_settings(args))), args.http)
    print(f"evsched serve: {server.url}/", flush=True)
    try:
        await stop.wait()
    finally:
        await server.stop()
    return 0
