"""Log output of the long-running commands: text or one JSON object per line, at a chosen level."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson

from events.display import printable, printable_lines

LEVELS = ("debug", "info", "warning", "error")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message (and the exception, if any).

    >>> rec = logging.LogRecord("evsched", logging.INFO, "f.py", 1, "cycle %d", (7,), None)
    >>> rec.created, rec.msecs = 0.0, 0.0
    >>> JsonFormatter().format(rec)
    '{"time":"1970-01-01T00:00:00.000Z","level":"info","logger":"evsched","message":"cycle 7"}'
    """

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry).decode()


class KafkaWarmUp(logging.Filter):
    """Drops aiokafka's lines about a fresh broker or topic still warming up, for ``grace_s`` seconds
    after the first: ``GroupCoordinatorNotAvailableError`` (ERROR) until the broker has created
    ``__consumer_offsets``, ``NotLeaderForPartitionError`` (WARNING) until a new topic's leader has
    taken over (a second or two each); aiokafka retries both by itself. Past the grace they pass:
    then something is wrong.

    >>> f = KafkaWarmUp(grace_s=30.0, now=iter([0.0, 10.0, 31.0]).__next__)
    >>> rec = lambda msg: logging.LogRecord("aiokafka", logging.ERROR, "f.py", 1, msg, None, None)
    >>> [f.filter(rec(m)) for m in ("failed: GroupCoordinatorNotAvailableError", "x NotLeaderForPartitionError",
    ...                             "other", "GroupCoordinatorNotAvailableError")]
    [False, False, True, True]
    """

    TRANSIENT = ("GroupCoordinatorNotAvailableError", "NotLeaderForPartitionError")
    LOGGERS = ("aiokafka.consumer.group_coordinator", "aiokafka.producer.sender")

    def __init__(self, grace_s: float = 30.0, now: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.grace_s, self._now = grace_s, now
        self._first: float | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not any(name in message for name in self.TRANSIENT):
            return True
        now = self._now()
        if self._first is None:
            self._first = now
        return now - self._first > self.grace_s


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message``, the message one line with controls escaped (``events.display.printable``).

    Log lines carry input text — resource names, ids, types, reasons quoting them — and
    any character may be in it. Escaping here, where every text line is made, rather than
    at each call site, means no message can start a forged line (a newline followed by a
    fake ``ERROR …``) or drive the terminal (an ESC sequence), whoever wrote the call.
    A traceback keeps its lines, each escaped the same way.

    >>> forged = "x\\n2026 ERROR disk full\\x1b[2J"
    >>> rec = logging.LogRecord("evsched", logging.INFO, "f.py", 1, "type=%s", (forged,), None)
    >>> rec.created, rec.msecs = 0.0, 0.0
    >>> TextFormatter("%(levelname)s %(message)s").format(rec)
    'INFO type=x\\\\x0a2026 ERROR disk full\\\\x1b[2J'
    """

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = printable(record.message)
        return super().formatMessage(record)

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:  # set here, or by a filter before (credentials' redaction); escaping is idempotent
            record.exc_text = "\n".join(printable_lines(record.exc_text.split("\n")))
        return super().format(record)


def add_logging_arguments(p: argparse.ArgumentParser) -> None:
    """``--log-format``, ``--log-level`` and ``-v`` (= ``--log-level debug``)."""
    p.add_argument("--log-format", choices=("text", "json"), default="text",
                   help="log lines on stderr as text (default) or one JSON object per line")
    p.add_argument("--log-level", choices=LEVELS, default="info", help="least severe level logged (default info)")
    p.add_argument("-v", "--verbose", action="store_true", help="the same as --log-level debug")


def setup_logging(fmt: str = "text", level: str = "info", *, verbose: bool = False) -> None:
    """Configure the root logger on stderr: ``fmt`` text or json, at ``level`` (``verbose``: debug)."""
    level = "debug" if verbose else level
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    warm_up = KafkaWarmUp()
    for name in KafkaWarmUp.LOGGERS:
        kafka_logger = logging.getLogger(name)
        kafka_logger.filters[:] = [f for f in kafka_logger.filters if not isinstance(f, KafkaWarmUp)]
        kafka_logger.addFilter(warm_up)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
