"""The HTTP server: routes of the metrics, probes, the YuniKorn-shaped JSON API and the web page.

Runs on the caller's event loop (aiohttp), beside the service: a handler runs between
cycles, reads, and returns. Routes (documented with examples in docs/http.md):

    /                                   the web page (scheduler/http/page/)
    /metrics                            Prometheus text format
    /healthz  /readyz                   liveness (the loop answers) and readiness (recovered, consuming, lag)
    /ws/v1/partitions                   partitions with totals
    /ws/v1/partition/{p}/queues         the queue tree          (?cycle=N: the state after cycle N)
    /ws/v1/partition/{p}/applications   apps (?queue=root.a)    (?cycle=N)
    /ws/v1/partition/{p}/nodes          nodes                   (?cycle=N)
    /ws/v1/cycles                       the latest cycle number and whether the source is live
    /ws/v1/decisions                    the latest decisions (?limit=50)
    /ws/v1/partition/{p}/queue/{q}/pending  pending asks in try order, reasons, remedies (?offset=&limit=&ask=A/K)
    /ws/v1/partition/{p}/series         each recent cycle's pending, allocated, decisions and time (?last=240)
    /ws/v1/decisions/{id}/explain       why a decision landed where it did
    /ws/v1/asks/{app}/{ask}/explain     why an ask is still pending

Anyone who can reach the port can send requests (any web page can make a browser send a
GET), so every resource a request can hold is bounded (docs/reliability.md): numbers in
queries are ASCII digits only, at most 18; no error message echoes more than a short
excerpt of what was sent; at most ``MAX_CONNECTIONS`` connections are open at once (more
are closed as they arrive); a connection must send a request's headers within
``HEADER_TIMEOUT_S`` of opening or of its last response, and an idle one is closed after
``IDLE_TIMEOUT_S``; time travel is bounded in ``scheduler.http.sources``.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

import orjson
from aiohttp import web

from replay.explain.decision import ExplainError
from replay.explain.pending_list import DEFAULT_LIMIT, MAX_LIMIT, UnknownQueue, pending_in_queue
from replay.history import RECENT_DECISIONS, SERIES_CYCLES
from scheduler.core.engine import Engine
from scheduler.http import views
from scheduler.http.metrics import CONTENT_TYPE, Metrics
from scheduler.http.sources import Busy, NotAvailable, StateSource, UnknownTarget

LOG = logging.getLogger("evsched.http")
PAGE_FILES = {"index.html": "text/html", "app.js": "text/javascript", "style.css": "text/css"}
SOURCE_KEY = web.AppKey("source", StateSource)
METRICS_KEY = web.AppKey("metrics", Metrics)

MAX_OFFSET = 10**9
MAX_PAGE = 1000  # rows of apps or nodes per request when paged (?limit=)
MAX_SEARCH = 200  # characters of ?search=
MAX_DECISIONS_LIMIT = 1000  # a larger ?limit= is a 400; the server keeps RECENT_DECISIONS anyway
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MAX_CONNECTIONS = 256  # well under a process's usual 1,024 open files, which the log and brokers share
HEADER_TIMEOUT_S = 10.0
IDLE_TIMEOUT_S = 30.0
MAX_MESSAGE_CHARS = 300  # an error message is cut here: it may quote what was sent
_WHOLE_NUMBER = re.compile("[0-9]{1,18}")  # str.isdigit and int() also take "١٠", "1_0", " 1"


def _excerpt(text: str) -> str:
    """``text`` quoted, or for a long one its length and start: an error never echoes it whole."""
    return repr(text) if len(text) <= 40 else f"{len(text)} characters starting {text[:20]!r}"


def whole_number(name: str, text: str) -> int:
    """A query parameter of ASCII digits (at most 18: within 64 bits), else ``ValueError`` (400).

    >>> whole_number("limit", "50")
    50
    >>> for bad in ("١٠", "1_0", "+1", " 1", "9" * 19):
    ...     try:
    ...         whole_number("cycle", bad)
    ...     except ValueError as exc:
    ...         print(exc)
    cycle must be a whole number (ASCII digits, at most 18), got '١٠'
    cycle must be a whole number (ASCII digits, at most 18), got '1_0'
    cycle must be a whole number (ASCII digits, at most 18), got '+1'
    cycle must be a whole number (ASCII digits, at most 18), got ' 1'
    cycle must be a whole number (ASCII digits, at most 18), got '9999999999999999999'
    """
    if _WHOLE_NUMBER.fullmatch(text) is None:
        raise ValueError(f"{name} must be a whole number (ASCII digits, at most 18), got {_excerpt(text)}")
    return int(text)


def _json(value: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(value), status=status, content_type="application/json")


def _error(status: int, message: str) -> web.Response:
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + f"… ({len(message)} characters)"
    return _json({"status": status, "message": message}, status)


class ConnectionGuard:
    """A cap on open connections and a deadline for each request's headers, on aiohttp's server.

    aiohttp keeps any number of connections, and one that sends half a request line is kept
    until its keep-alive timeout: a few hundred such connections exhaust the process's open
    files ("Too many open files") and every request fails. The guard sits on the server's
    ``connection_made``/``connection_lost`` (which aiohttp's protocol calls for each
    connection): past ``max_connections`` a new connection is closed at once; a connection
    with no request started within ``header_timeout_s`` of opening, or of its last response,
    is closed. A request being handled (a long re-derivation) is never cut.
    """

    def __init__(self, max_connections: int, header_timeout_s: float) -> None:
        self.max_connections = max_connections
        self.header_timeout_s = header_timeout_s
        self.open: dict[object, asyncio.BaseTransport] = {}
        self.refused = 0  # connections closed on arrival (over the cap)
        self.timed_out = 0  # connections closed for sending no request in time
        self._deadlines: dict[object, asyncio.TimerHandle] = {}
        self._busy: set[object] = set()

    def attach(self, server: web.Server) -> None:
        """Wrap the server's per-connection hooks (instance attributes: aiohttp calls them so)."""
        made, lost = server.connection_made, server.connection_lost

        def connection_made(handler: Any, transport: asyncio.Transport) -> None:
            made(handler, transport)
            if len(self.open) >= self.max_connections:
                self.refused += 1
                # after aiohttp's protocol has finished setting the connection up (it asserts so)
                asyncio.get_running_loop().call_soon(transport.close)
                return
            self.open[handler] = transport
            self._arm(handler)

        def connection_lost(handler: Any, exc: BaseException | None = None) -> None:
            self.open.pop(handler, None)
            self._busy.discard(handler)
            timer = self._deadlines.pop(handler, None)
            if timer is not None:
                timer.cancel()
            lost(handler, exc)

        server.connection_made = connection_made  # type: ignore[method-assign]
        server.connection_lost = connection_lost  # type: ignore[method-assign]

    def _arm(self, handler: object) -> None:
        timer = self._deadlines.pop(handler, None)
        if timer is not None:
            timer.cancel()
        loop = asyncio.get_running_loop()
        self._deadlines[handler] = loop.call_later(self.header_timeout_s, self._expire, handler)

    def _expire(self, handler: object) -> None:
        self._deadlines.pop(handler, None)
        transport = self.open.get(handler)
        if transport is not None and handler not in self._busy:
            self.timed_out += 1
            transport.close()

    def started(self, handler: object) -> None:
        """A request's headers arrived on this connection: no deadline while it is handled."""
        self._busy.add(handler)
        timer = self._deadlines.pop(handler, None)
        if timer is not None:
            timer.cancel()

    def finished(self, handler: object) -> None:
        """The response went out: the next request's headers are due within the timeout."""
        self._busy.discard(handler)
        if handler in self.open:
            self._arm(handler)


GUARD_KEY = web.AppKey("guard", ConnectionGuard)


@web.middleware
async def _guarded(request: web.Request, handler: Handler) -> web.StreamResponse:
    guard = request.app.get(GUARD_KEY)
    if guard is None:
        return await handler(request)
    guard.started(request.protocol)
    try:
        return await handler(request)
    finally:
        guard.finished(request.protocol)


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Known failures become JSON errors with a status, never a traceback page."""
    try:
        return await handler(request)
    except views.UnknownPartition as exc:
        return _error(404, f"unknown partition {exc.args[0]!r}")
    except UnknownTarget as exc:
        return _error(404, str(exc))
    except UnknownQueue as exc:
        return _error(404, exc.args[0])
    except NotAvailable as exc:
        return _error(501, str(exc))
    except Busy as exc:
        response = _error(503, str(exc))
        response.headers["Retry-After"] = "5"
        return response
    except ExplainError as exc:
        return _error(404, str(exc))
    except ValueError as exc:
        return _error(400, str(exc))


def _cycle(request: web.Request) -> int | None:
    text = request.query.get("cycle", "")
    if text in ("", "latest"):
        return None
    return whole_number("cycle", text)


def query_number(request: web.Request, name: str, default: int, most: int) -> int:
    """Query parameter ``name``: ASCII digits only, at most ``most`` (else ``ValueError``, a 400)."""
    text = request.query.get(name)
    if text is None or text == "":
        return default
    value = whole_number(name, text)
    if value > most:
        raise ValueError(f"{name} must be at most {most}, got {value}")
    return value


async def _engine(request: web.Request) -> Engine:
    return await request.app[SOURCE_KEY].engine(request.match_info["partition"], _cycle(request))


async def page(request: web.Request) -> web.StreamResponse:
    name = request.match_info.get("name", "index.html")
    kind = PAGE_FILES.get(name)
    if kind is None:
        return _error(404, f"no page file {name!r}")
    body = resources.files("scheduler.http").joinpath("page", name).read_bytes()
    return web.Response(body=body, content_type=kind, charset="utf-8")


async def metrics(request: web.Request) -> web.StreamResponse:
    inputs = await request.app[SOURCE_KEY].scrape()
    body = request.app[METRICS_KEY].render(inputs)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


async def healthz(request: web.Request) -> web.StreamResponse:
    # Answering at all proves the event loop is turning: the cycle runs on the same loop.
    return _json({"status": "ok"})


async def readyz(request: web.Request) -> web.StreamResponse:
    ready, detail = await request.app[SOURCE_KEY].readiness()
    return _json({"ready": ready, **detail}, 200 if ready else 503)


async def partitions(request: web.Request) -> web.StreamResponse:
    return _json(await request.app[SOURCE_KEY].partitions(_cycle(request)))


async def queues(request: web.Request) -> web.StreamResponse:
    return _json(views.queues_view(await _engine(request), request.match_info["partition"]))


def _paged(request: web.Request, rows: list[dict[str, Any]], fields: tuple[str, ...]) -> web.Response:
    """``?search=`` (a substring of any of ``fields``, case-insensitive), ``?offset=``, ``?limit=``;
    the number of matching rows in the ``X-Total-Count`` header. Without them: every row."""
    search = request.query.get("search", "")
    if len(search) > MAX_SEARCH:
        raise ValueError(f"search is at most {MAX_SEARCH} characters")
    offset = query_number(request, "offset", 0, MAX_OFFSET)
    limit = query_number(request, "limit", MAX_PAGE, MAX_PAGE) if "limit" in request.query else None
    found = views.search_rows(rows, search, fields) if search else rows
    shown = found[offset:offset + limit] if limit is not None else found[offset:]
    response = _json(shown)
    response.headers["X-Total-Count"] = str(len(found))
    return response


async def applications(request: web.Request) -> web.StreamResponse:
    engine = await _engine(request)
    rows = views.applications_view(engine, request.match_info["partition"], request.query.get("queue"))
    return _paged(request, rows, ("applicationID", "queueName", "applicationState", "user"))


async def nodes(request: web.Request) -> web.StreamResponse:
    return _paged(request, views.nodes_view(await _engine(request), request.match_info["partition"]), ("nodeID",))


async def cycles(request: web.Request) -> web.StreamResponse:
    source = request.app[SOURCE_KEY]
    return _json({"latest": await source.latest_cycle(), "live": source.live})


async def decisions(request: web.Request) -> web.StreamResponse:
    limit = min(query_number(request, "limit", 50, MAX_DECISIONS_LIMIT), RECENT_DECISIONS)
    return _json(await request.app[SOURCE_KEY].decisions(limit))


async def pending(request: web.Request) -> web.StreamResponse:
    offset = query_number(request, "offset", 0, MAX_OFFSET)
    limit = query_number(request, "limit", DEFAULT_LIMIT, MAX_LIMIT)
    only = None
    if "ask" in request.query:
        app_id, sep, ask_id = request.query["ask"].partition("/")
        if not sep or not app_id or not ask_id:
            raise ValueError(f"ask takes APP/ASK, got {request.query['ask'][:80]!r}")
        only = (app_id, ask_id)
    engine = await _engine(request)
    info = request.match_info
    return _json(pending_in_queue(engine, info["partition"], info["queue"], offset, limit, only))


async def series(request: web.Request) -> web.StreamResponse:
    last = query_number(request, "last", SERIES_CYCLES, SERIES_CYCLES)
    return _json({"partition": request.match_info["partition"],
                  "cycles": await request.app[SOURCE_KEY].series(request.match_info["partition"], last)})


async def explain_decision(request: web.Request) -> web.StreamResponse:
    return _json(await request.app[SOURCE_KEY].explain_decision(request.match_info["decision_id"]))


async def explain_ask(request: web.Request) -> web.StreamResponse:
    info = request.match_info
    return _json(await request.app[SOURCE_KEY].explain_ask(info["app"], info["ask"]))


def build_app(source: StateSource) -> web.Application:
    """The aiohttp application serving ``source``."""
    app = web.Application(middlewares=[_guarded, _errors])
    app[SOURCE_KEY] = source
    app[METRICS_KEY] = Metrics()
    app.router.add_get("/", page)
    app.router.add_get("/page/{name}", page)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/ws/v1/partitions", partitions)
    app.router.add_get("/ws/v1/partition/{partition}/queues", queues)
    app.router.add_get("/ws/v1/partition/{partition}/applications", applications)
    app.router.add_get("/ws/v1/partition/{partition}/nodes", nodes)
    app.router.add_get("/ws/v1/cycles", cycles)
    app.router.add_get("/ws/v1/decisions", decisions)
    app.router.add_get("/ws/v1/partition/{partition}/series", series)
    app.router.add_get("/ws/v1/partition/{partition}/queue/{queue}/pending", pending)
    app.router.add_get("/ws/v1/decisions/{decision_id}/explain", explain_decision)
    app.router.add_get("/ws/v1/asks/{app}/{ask}/explain", explain_ask)
    return app


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (an explicit bind address; port 0 picks a free one).

    >>> parse_address("127.0.0.1:9090"), parse_address("[::1]:0")
    (('127.0.0.1', 9090), ('::1', 0))
    """
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--http takes HOST:PORT (e.g. 127.0.0.1:9090), got {text!r}")
    return host.strip("[]"), int(port)


class HttpServer:
    """Starts and stops the server on the running event loop."""

    def __init__(self, source: StateSource, address: str, *, max_connections: int = MAX_CONNECTIONS,
                 header_timeout_s: float = HEADER_TIMEOUT_S, idle_timeout_s: float = IDLE_TIMEOUT_S) -> None:
        self.host, self.port = parse_address(address)
        app = build_app(source)
        self.guard = app[GUARD_KEY] = ConnectionGuard(max_connections, header_timeout_s)
        self.runner = web.AppRunner(app, access_log=None, keepalive_timeout=idle_timeout_s)
        self.url = ""

    async def start(self) -> str:
        """Bind and serve; returns the base URL (with the port actually bound)."""
        await self.runner.setup()
        assert self.runner.server is not None
        self.guard.attach(self.runner.server)
        site = web.TCPSite(self.runner, self.host, self.port)
        await site.start()
        bound = self.runner.addresses
        port = int(bound[0][1]) if bound else self.port
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{host}:{port}"
        LOG.info("serving HTTP on %s (metrics at /metrics, page at /)", self.url)
        return self.url

    async def stop(self) -> None:
        """Close the listener and every open connection."""
        await self.runner.cleanup()
