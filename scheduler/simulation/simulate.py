"""``evsched simulate``: run the core alone over a JSONL file, deterministically (docs/contract.md §6).

Lines are applied in order; ``{"type": "schedule"}`` (optional ``time``, optional
``data.max_allocations``) runs one cycle, and the end of the file runs a last one. ``id``
and ``source`` may be omitted; a missing ``time`` is the previous line's plus 1 ms (the
first line's: the epoch). Every input line takes the next position of channel ``inputs``
so ``cycle.completed`` records the same positions a one-channel log would.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from events.codec import decode_loaded, reject
from events.models import MAX_RECORD_BYTES, InputRejected, OutputEvent
from events.times import TimeFormatError, parse_time
from scheduler.config import SchedulerConfig
from scheduler.core.engine import Engine

INPUT_CHANNEL = "inputs"
SIMULATE_SOURCE = "simulate"
ONE_MS_US = 1000


class Simulation:
    """Feeds lines to an Engine, turning schedule lines into cycles."""

    def __init__(self, config: SchedulerConfig | None = None, *, source: str = "evsched") -> None:
        self.engine = Engine(config, source=source)
        self.last_time_us: int | None = None
        self.inputs_consumed = 0
        self.line_number = 0

    def _after_last(self) -> int:
        """The time of a line without one: the previous line's plus 1 ms (the first's: the epoch)."""
        return 0 if self.last_time_us is None else self.last_time_us + ONE_MS_US

    def _next_time(self, obj: dict[str, Any]) -> int:
        text = obj.get("time")
        if isinstance(text, str):
            try:
                return parse_time(text)
            except TimeFormatError:
                pass
        return self._after_last()

    def _position(self) -> dict[str, int]:
        return {INPUT_CHANNEL: self.inputs_consumed}

    def feed(self, line: bytes) -> list[OutputEvent]:
        """Process one line; returns the outputs of any cycle it ran."""
        self.line_number += 1
        if not line.strip():
            return []
        position = f"{INPUT_CHANNEL}@{self.inputs_consumed}"
        obj: Any
        unreadable_time = self._after_last()
        try:
            obj = orjson.loads(line) if len(line) <= MAX_RECORD_BYTES else None
        except orjson.JSONDecodeError as exc:
            self.inputs_consumed += 1
            self.last_time_us = unreadable_time
            self.engine.reject_raw(reject(position, None, "invalid", f"line {self.line_number}: not JSON: {exc}"))
            return []
        if obj is None:
            self.inputs_consumed += 1
            self.last_time_us = unreadable_time
            self.engine.reject_raw(reject(position, None, "too-large", f"line {self.line_number} exceeds 1 MiB"))
            return []
        if isinstance(obj, dict) and obj.get("type") == "schedule":
            return self._schedule(obj)
        if isinstance(obj, dict):
            now = self._next_time(obj)
            self.last_time_us = now
            obj.setdefault("id", f"line-{self.line_number}")
            obj.setdefault("source", SIMULATE_SOURCE)
        else:
            now = self.last_time_us = unreadable_time
        decoded = decode_loaded(obj, append_time_us=now, position=position)  # obj: orjson's, ids as str
        self.inputs_consumed += 1
        if isinstance(decoded, InputRejected):
            self.engine.reject_raw(decoded)
        else:
            self.engine.apply(decoded)
        return []

    def _schedule(self, obj: dict[str, Any]) -> list[OutputEvent]:
        now = self._next_time(obj)
        self.last_time_us = now
        data = obj.get("data") or {}
        limit = data.get("max_allocations") if isinstance(data, dict) else None
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            self.engine.reject_raw(
                reject(
                    f"line-{self.line_number}", "schedule", "invalid",
                    f"line {self.line_number}: max_allocations must be a non-negative integer",
                )
            )
            limit = None
        return self.engine.cycle(now, self._position(), limit)

    def finish(self) -> list[OutputEvent]:
        """The end of the file: one last cycle."""
        now = self.last_time_us = self._after_last()
        return self.engine.cycle(now, self._position())


def simulate(lines: Iterable[bytes], config: SchedulerConfig | None = None) -> Iterator[OutputEvent]:
    """Every output of a simulation over ``lines``, in order."""
    sim = Simulation(config)
    for line in lines:
        yield from sim.feed(line)
    yield from sim.finish()
