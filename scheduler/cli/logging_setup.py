"""Log output of the long-running commands: text or one JSON object per line, at a chosen level."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from typing import Any

import orjson

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
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
