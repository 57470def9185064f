"""Test helper: write input records to a log and run the service's cycle protocol over them.

``write_inputs(log, items)`` appends input records (dicts are JSON-encoded, bytes are
written as they are). ``drive(log, batch_size)`` then plays the live service: it reads
the inputs after the last cycle, takes up to ``batch_size`` of them, runs
``run_logged_cycle`` with a made-up cycle time and appends the cycle's outputs
(``cycle.started`` … ``cycle.completed``) as one batch, until every input is consumed.
Works with ``FileLog`` and ``MemoryLog`` (anything with sync ``iter_inputs`` /
``iter_outputs`` plus ``append_*_sync`` or async ``append_*``).

``workload_records(spec)`` gives realistic input records (``scheduler.simulation.workload``);
``driven_file_log(path, spec, batch_size)`` writes them to a new FileLog and drives it: the log
most replay and HTTP tests read.
``copy_log(src, dst_dir, inputs=..., outputs=...)`` writes a new FileLog holding the
records of ``src`` — each input keeping its append time — after passing the lists of
records through the given functions: the way tests build tampered logs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson

from events.codec import encode_output
from events.log.file import FileLog
from events.log.port import LogRecord
from events.times import format_time
from scheduler.config import SchedulerConfig
from scheduler.core.engine import Engine
from scheduler.core.logged_cycle import advance, run_logged_cycle
from scheduler.simulation.workload import WorkloadSpec, config_yaml, events, numbered

__all__ = ["copy_log", "drive", "driven_file_log", "workload_records", "write_inputs"]


def _encode(item: dict[str, Any] | bytes) -> bytes:
    return item if isinstance(item, bytes) else orjson.dumps(item)


def write_inputs(log: Any, items: Iterable[dict[str, Any] | bytes]) -> None:
    """Append input records in one batch (dicts as JSON, bytes verbatim)."""
    records: list[tuple[bytes | None, bytes]] = [(None, _encode(item)) for item in items]
    if hasattr(log, "append_inputs_sync"):
        log.append_inputs_sync(records)
    else:
        asyncio.run(log.append_inputs(records))


def write_as_cluster(log: Any, items: Iterable[dict[str, Any] | bytes]) -> None:
    """``write_inputs`` as a cluster writes: the rules changes (config, priority classes) by the
    operator to the admin channel first, the rest to the inputs (what a service run expects)."""
    from events.models import ADMIN_TYPES

    items = list(items)
    admin = [i for i in items if isinstance(i, dict) and i.get("type") in ADMIN_TYPES]
    if admin:
        records: list[tuple[bytes | None, bytes]] = [(None, _encode(item)) for item in admin]
        if hasattr(log, "append_admin_sync"):
            log.append_admin_sync(records)
        else:
            asyncio.run(log.append_admin(records))
    write_inputs(log, [i for i in items if not (isinstance(i, dict) and i.get("type") in ADMIN_TYPES)])


def _append_outputs(log: Any, values: Sequence[bytes]) -> None:
    if hasattr(log, "append_outputs_sync"):
        log.append_outputs_sync(values)
    else:
        asyncio.run(log.append_outputs(values))


def drive(
    log: Any,
    batch_size: int,
    *,
    start_us: int = 1_000_000_000_000,
    step_us: int = 1_000_000,
    source: str = "evsched",
    config: SchedulerConfig | None = None,
    max_cycles: int | None = None,
    on_cycle: Callable[[Engine], None] | None = None,
) -> None:
    """Run cycles over every unconsumed input, ``batch_size`` records per cycle.

    Cycle ``k`` (1-based) runs at ``start_us + k * step_us``. The log must not hold any
    outputs yet (a fresh Engine is used; ``config`` replaces the built-in default, as a
    service embedding the config in its Engine would). Stops after ``max_cycles``.
    ``on_cycle(engine)`` is called after each cycle's outputs are appended.
    """
    if next(iter(log.iter_outputs()), None) is not None:
        raise ValueError("drive() needs a log without outputs")
    engine = Engine(config, source=source)
    positions: dict[str, int] = {}
    pending = list(log.iter_inputs(positions))
    cycles = 0
    while pending and (max_cycles is None or cycles < max_cycles):
        batch, pending = pending[:batch_size], pending[batch_size:]
        through = advance(positions, batch)
        channels = sorted(through)
        now = start_us + (engine.cycle_number + 1) * step_us
        outputs = run_logged_cycle(engine, batch, channels, now, positions, through)
        _append_outputs(log, [encode_output(o) for o in outputs])
        positions = through
        cycles += 1
        if on_cycle is not None:
            on_cycle(engine)


def driven_file_log(
    path: Path, spec: WorkloadSpec, batch_size: int, *, on_cycle: Callable[[Engine], None] | None = None
) -> Path:
    """A new FileLog at ``path`` holding ``spec``'s workload (config first), driven ``batch_size`` inputs a
    cycle until every input is consumed (``drive``; ``on_cycle`` as there); returns ``path``, closed."""
    with FileLog(path) as log:
        write_inputs(log, workload_records(spec))
        drive(log, batch_size, on_cycle=on_cycle)
    return path


def copy_log(
    src: Any,
    dst_dir: str | Path,
    *,
    inputs: Callable[[list[LogRecord]], list[LogRecord]] = lambda r: r,
    outputs: Callable[[list[bytes]], list[bytes]] = lambda r: r,
) -> FileLog:
    """A new FileLog at ``dst_dir`` with ``src``'s records, transformed; returned open.

    Inputs are appended one record at a time with the log clock set to the record's
    original append time, so records without a ``time`` decode the same way.
    """
    clock = [0]
    dst = FileLog(dst_dir, now_us=lambda: clock[0])
    for rec in inputs(list(src.iter_inputs())):
        clock[0] = rec.append_time_us
        (dst.append_admin_sync if rec.channel == "admin" else dst.append_inputs_sync)([(rec.key, rec.value)])
    values = outputs([rec.value for rec in src.iter_outputs()])
    dst.append_outputs_sync(values)
    return dst


def workload_records(spec: WorkloadSpec, *, with_config: bool = True, start_us: int = 0) -> list[dict[str, Any]]:
    """Input records of a generated workload (``scheduler.simulation.workload``), optionally preceded by
    its queue configuration as a ``config.updated`` input (as ``evsched run --config`` does)."""
    records = list(numbered(events(spec), start_us=start_us))
    if with_config:
        cfg = {"id": "config-0", "source": "evsched-cli", "time": format_time(start_us), "type": "config.updated",
               "data": {"yaml": config_yaml(spec)}}
        records.insert(0, cfg)
    return records
