"""The embedded log's submission socket: other processes append inputs to a log a running service holds.

One process writes an embedded log (``FileLog``'s ``LOCK``); while ``evsched run`` holds it,
``submit``, ``config apply`` and ``priorityclass apply|delete`` cannot open it themselves.
Instead the service listens on ``<dir>/submit.sock`` (a Unix socket, mode 0600: file
permissions are the access control, as for the log's files) and appends what it is sent
through its own ``FileLog``: the single-writer guarantee holds for every channel, and a
submission is durable (fsynced) when the client hears back.

Protocol, one request per connection: 8 bytes big-endian length, then that many bytes of
JSON ``{"channel": "inputs"|"admin", "records": [[key or null, value], ...]}`` (a value is
one input event's JSON text); the answer is one JSON line, ``{"appended": N}`` or
``{"error": "…"}``. A request is at most ``MAX_REQUEST_BYTES`` (clients split larger
submissions: each request is appended as one batch) and must arrive within
``READ_TIMEOUT_S``. What is appended is validated as any input: the service rejects a bad
event ``input.rejected`` when it reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
from collections.abc import Sequence
from pathlib import Path

import orjson

from events.log.file import ADMIN, INPUTS, FileLog
from events.log.port import LogError

SOCKET_NAME = "submit.sock"
MAX_REQUEST_BYTES = 64 << 20
READ_TIMEOUT_S = 30.0
_HEAD = struct.Struct(">Q")
LOG = logging.getLogger("evsched.log")

Record = tuple[bytes | None, bytes]


def socket_path(directory: str | os.PathLike[str]) -> Path:
    """Where the service holding the log in ``directory`` accepts submissions."""
    return Path(directory) / SOCKET_NAME


class SubmissionServer:
    """The service side: accepts submissions on ``<dir>/submit.sock`` and appends them to ``log``."""

    def __init__(self, log: FileLog) -> None:
        self.log = log
        self.path = socket_path(log.directory)
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        """Listen (a stale socket file, left by a service that died, is replaced: this process holds the lock)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        old = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(self._serve, path=str(self.path))
        finally:
            os.umask(old)

    async def close(self) -> None:
        """Stop listening and remove the socket file."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            answer = await self._handle(reader)
        except Exception as exc:
            LOG.warning("submission socket: %s", exc)
            answer = {"error": str(exc)}
        try:
            writer.write(orjson.dumps(answer) + b"\n")
            await writer.drain()
        except OSError:
            pass  # the client went away; what was appended stays appended
        finally:
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader) -> dict[str, object]:
        head = await asyncio.wait_for(reader.readexactly(_HEAD.size), READ_TIMEOUT_S)
        (size,) = _HEAD.unpack(head)
        if size > MAX_REQUEST_BYTES:
            return {"error": f"request of {size} bytes is over the limit of {MAX_REQUEST_BYTES}"}
        body = await asyncio.wait_for(reader.readexactly(size), READ_TIMEOUT_S)
        channel, records = parse_request(body)
        if channel == ADMIN:
            self.log.append_admin_sync(records)
        else:
            self.log.append_inputs_sync(records)
        LOG.info("appended %d submitted events to the %s channel", len(records), channel)
        return {"appended": len(records)}


def parse_request(body: bytes) -> tuple[str, list[Record]]:
    """A request's channel and records; ``ValueError`` saying what is wrong with it.

    >>> parse_request(b'{"channel": "inputs", "records": [["k", "{}"], [null, "{}"]]}')
    ('inputs', [(b'k', b'{}'), (None, b'{}')])
    >>> parse_request(b'{"channel": "outputs", "records": []}')
    Traceback (most recent call last):
    ValueError: channel must be 'inputs' or 'admin', not 'outputs'
    """
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(request, dict):
        raise ValueError("a request is a JSON object")
    channel = request.get("channel")
    if channel not in (INPUTS, ADMIN):
        raise ValueError(f"channel must be 'inputs' or 'admin', not {channel!r}")
    raw = request.get("records")
    if not isinstance(raw, list):
        raise ValueError("records must be a list of [key, value] pairs")
    records: list[Record] = []
    for pair in raw:
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[1], str)
                and (pair[0] is None or isinstance(pair[0], str))):
            raise ValueError("records must be a list of [key or null, value text] pairs")
        records.append((None if pair[0] is None else pair[0].encode(), pair[1].encode()))
    return channel, records


def _requests(channel: str, records: Sequence[Record]) -> list[bytes]:
    """``records`` as request bodies, each under ``MAX_REQUEST_BYTES``."""
    bodies: list[bytes] = []
    chunk: list[list[str | None]] = []
    size = 0
    budget = MAX_REQUEST_BYTES // 2  # JSON escaping at most doubles a value's size, in practice
    for key, value in records:
        if chunk and size + len(value) > budget:
            bodies.append(orjson.dumps({"channel": channel, "records": chunk}))
            chunk, size = [], 0
        chunk.append([None if key is None else key.decode(), value.decode()])
        size += len(value) + 16
    if chunk:
        bodies.append(orjson.dumps({"channel": channel, "records": chunk}))
    return bodies


def submit_to_service(directory: str | os.PathLike[str], records: Sequence[Record], *, admin: bool) -> None:
    """Append ``records`` through the service holding the log in ``directory`` (its admin channel
    when ``admin``); durable when this returns. ``LogError`` when no service listens or it refuses."""
    path = socket_path(directory)
    for body in _requests(ADMIN if admin else INPUTS, records):
        answer = _exchange(path, body)
        if "error" in answer:
            raise LogError(f"the service holding {directory} refused the submission: {answer['error']}")


def _exchange(path: Path, body: bytes) -> dict[str, object]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(str(path))
        except OSError as exc:
            raise ServiceNotListening(str(exc)) from None
        sock.sendall(_HEAD.pack(len(body)) + body)
        sock.shutdown(socket.SHUT_WR)
        reply = b""
        while not reply.endswith(b"\n"):
            data = sock.recv(65536)
            if not data:
                break
            reply += data
    try:
        answer = orjson.loads(reply)
    except orjson.JSONDecodeError:
        raise LogError(f"the service at {path} closed the connection without an answer") from None
    if not isinstance(answer, dict):
        raise LogError(f"the service at {path} answered {reply!r}")
    return answer


class ServiceNotListening(LogError):
    """No service accepts submissions on the log's socket (none runs, or it is not listening yet)."""
