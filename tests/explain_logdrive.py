"""Test helper: drive the engine over a FileLog the way the service does (inputs, then cycles).

``LogDriver`` appends input events to ``<dir>/inputs`` and, on ``cycle()``, runs
``run_logged_cycle`` on the records not consumed yet and appends ``cycle.started``, the
engine's outputs and ``cycle.completed`` to ``<dir>/outputs`` in one batch. Times are
synthetic (1 ms apart) so every run writes the same bytes. ``copy_log`` writes a tampered
copy of a log for audit tests (on top of ``tests.logdrive.copy_log``). Event builders
are ``tests.sim``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from events.codec import encode_output
from events.log.file import FileLog
from events.times import format_time
from scheduler.core.engine import Engine
from scheduler.core.logged_cycle import advance, run_logged_cycle
from tests.logdrive import copy_log as copy_log_records

MS = 1000


class LogDriver:
    """Writes inputs and runs cycles into a FileLog (close it, or use as a context manager)."""

    def __init__(self, directory: Path, config_yaml: str | None = None) -> None:
        self.now_us = 0
        self.log = FileLog(directory, now_us=lambda: self.now_us)
        self.engine = Engine()
        self.position = 0
        self.count = 0
        if config_yaml is not None:
            self.submit({"type": "config.updated", "data": {"yaml": config_yaml}})

    def __enter__(self) -> LogDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the log."""
        self.log.close_sync()

    def submit(self, *events: dict[str, Any]) -> None:
        """Append input events (``id``, ``source`` and ``time`` are filled in)."""
        values = []
        for event in events:
            self.count += 1
            self.now_us += MS
            full = {"id": f"in-{self.count}", "source": "test", "time": format_time(self.now_us), **event}
            values.append((None, orjson.dumps(full)))
        self.log.append_inputs_sync(values)

    def cycle(self) -> int:
        """Run one cycle over the unconsumed inputs; returns its number of decisions."""
        self.now_us += MS
        start = {"inputs": self.position}
        records = list(self.log.iter_inputs(start))
        through = advance(start, records)
        outs = run_logged_cycle(self.engine, records, ["inputs"], self.now_us, start, through)
        self.log.append_outputs_sync([encode_output(o) for o in outs])
        self.position = through["inputs"]
        return sum(1 for o in outs if o.type == "allocation.decided")


def copy_log(src: Path, dst: Path, tamper_outputs: Callable[[list[list[dict[str, Any]]]], None]) -> None:
    """Copy a log, letting ``tamper_outputs`` edit the output batches (dicts) in place first."""

    def tamper(values: list[bytes]) -> list[bytes]:
        batches: list[list[dict[str, Any]]] = []
        for value in values:
            obj = orjson.loads(value)
            if obj["type"] == "cycle.started" or not batches:
                batches.append([])
            batches[-1].append(obj)
        tamper_outputs(batches)
        return [orjson.dumps(o, option=orjson.OPT_SORT_KEYS) for batch in batches for o in batch]

    with FileLog(src, readonly=True) as log:
        copy_log_records(log, dst, outputs=tamper).close_sync()
