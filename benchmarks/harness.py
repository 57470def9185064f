"""Shared pieces of the benchmark scripts: workload → engine, CPU and wall timing, result lines.

Every script prints one ``TARGET`` line per figure it measures: the figure, the target and
the ratio to it, and whether it is met. When ``EVSCHED_BENCH_RESULTS`` names a file, the
same figure is appended to it as a JSON line (``run_all.py`` collects them into the summary).

Timing: the core benchmarks are single-threaded and CPU-bound, so their headline figures
use the process's CPU time, which other processes on a shared machine disturb far less
than wall time; the wall time is printed beside it. On a quiet machine the two agree.
The measured sections run under the service's GC setting (``scheduler.service.gc_thresholds``), as every
``evsched`` command does; ``--default-gc`` measures with CPython's defaults instead.
"""

from __future__ import annotations

import contextlib
import gc
import os
import platform
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from events.codec import decode_input  # noqa: E402
from events.models import InputEvent  # noqa: E402
from scheduler.config import load_config  # noqa: E402
from scheduler.core.engine import Engine  # noqa: E402
from scheduler.service.gc_thresholds import tuned_gc  # noqa: E402
from scheduler.simulation.workload import WorkloadSpec, config_yaml, numbered, records  # noqa: E402
from scheduler.simulation.workload import events as generate  # noqa: E402

RESULTS_ENV = "EVSCHED_BENCH_RESULTS"


@dataclass
class Timing:
    """CPU and wall seconds of a timed section (filled when the section ends)."""

    cpu: float = 0.0
    wall: float = 0.0


@contextlib.contextmanager
def timed() -> Iterator[Timing]:
    """Time the body: ``with timed() as t: …`` then ``t.cpu``, ``t.wall``."""
    result = Timing()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    try:
        yield result
    finally:
        result.cpu = time.process_time() - cpu0
        result.wall = time.perf_counter() - wall0


PACKAGES = ("events", "projections", "scheduler", "replay")


def compile_bytecode() -> None:
    """Write the repository's bytecode (``__pycache__``), as ``pip install`` does for an installed evsched.

    Why: with ``PYTHONDONTWRITEBYTECODE`` set (as in some shells and containers) and no bytecode
    on disk, every timed ``evsched`` process parses the ~110 modules it imports again: about
    0.15 s of CPU per process (5% of a reference ``simulate`` run), which is not evsched's cost.
    ``py_compile`` writes even under that setting, and the timed processes read what it wrote.
    """
    import compileall

    for package in PACKAGES:
        compileall.compile_dir(str(ROOT / package), quiet=1)


def gc_setting(default_gc: bool) -> contextlib.AbstractContextManager[None]:
    """The service's GC thresholds, or CPython's defaults when ``default_gc``."""
    return tuned_gc(gc.get_threshold()) if default_gc else tuned_gc()


@contextlib.contextmanager
def profiled(path: str | None) -> Iterator[None]:
    """Profile the body with pyinstrument into ``path`` (text) when a path is given."""
    if not path:
        yield
        return
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.0005)
    profiler.start()
    try:
        yield
    finally:
        profiler.stop()
        Path(path).write_text(profiler.output_text(unicode=True, color=False))
        print(f"profile written to {path}")


def decoded(spec: WorkloadSpec) -> list[InputEvent]:
    """The spec's events, encoded and decoded as the service would read them."""
    out = []
    for raw in records(spec):
        event = decode_input(raw, append_time_us=0)
        assert isinstance(event, InputEvent), event
        out.append(event)
    return out


def write_workload_jsonl(spec: WorkloadSpec, path: Path) -> int:
    """The spec as an ``evsched submit`` file: its queue config as a ``config.updated`` line, then
    the numbered events; returns the number of lines."""
    lines = [orjson.dumps({"type": "config.updated", "data": {"yaml": config_yaml(spec)}})]
    lines += [orjson.dumps(e) for e in numbered(generate(spec))]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return len(lines)


def log_decisions(log_dir: Path) -> int:
    """How many ``allocation.decided`` outputs an embedded log holds (a benchmark that scheduled
    nothing measured nothing: its scripts print this, and ``smoke.py`` fails on 0)."""
    from events.log.file import FileLog

    with FileLog(log_dir, readonly=True) as log:
        return sum(1 for rec in log.iter_outputs() if b'"allocation.decided"' in rec.value)


def engine_with(spec: WorkloadSpec, events: list[InputEvent] | None = None, config: str | None = None) -> Engine:
    """An engine configured for the spec with every event applied (no cycle run yet).

    Without ``events`` the workload is generated, encoded, decoded and applied one event
    at a time, so a large workload never holds all its events in memory. Ends with a full
    collection: otherwise the collection that building millions of objects has made due
    lands in whatever is timed next (1.2 s of a 3 s cycle with 500,000 asks).
    """
    engine = Engine(load_config(config or config_yaml(spec)))
    with tuned_gc():
        if events is not None:
            for event in events:
                engine.apply(event)
        else:
            for obj in numbered(generate(spec)):
                decoded = decode_input(orjson.dumps(obj), append_time_us=0)
                assert isinstance(decoded, InputEvent), decoded
                engine.apply(decoded)
    gc.collect()
    return engine


def machine() -> str:
    """One line naming the machine: CPU model, cores, Python, load, and which core build runs."""
    model = platform.processor() or "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    load = ""
    with contextlib.suppress(OSError):
        load = f", load average {os.getloadavg()[0]:.1f} at start"
    from events.native import loaded_build

    return (f"{model}, {os.cpu_count()} CPUs, {platform.python_implementation()} {platform.python_version()}, "
            f"{platform.system()}{load}; core: {loaded_build()}")


def report(key: str, label: str, value: float, unit: str, target: float, *, at_least: bool = True,
           note: str = "", fmt: str = ",.0f") -> dict[str, Any]:
    """Print a ``TARGET`` line (figure, target, ratio, met) and record it for the summary.

    ``at_least``: the target is a floor (ratio = value / target, met when ≥ 1); otherwise a
    ceiling (ratio = value / target, met when ≤ 1).
    """
    ratio = value / target if target else float("inf")
    met = ratio >= 1.0 if at_least else ratio <= 1.0
    sign = "≥" if at_least else "≤"
    if met:
        verdict = "met"
    elif at_least:
        verdict = f"MISSED by {(1 - ratio) * 100:.0f}%"
    else:
        verdict = f"MISSED by {(ratio - 1) * 100:.0f}%"
    line = (f"TARGET {label}: {value:{fmt}} {unit} (target {sign} {target:{fmt}} {unit}; "
            f"ratio {ratio:.2f}x: {verdict})")
    if note:
        line += f" [{note}]"
    print(line, flush=True)
    entry = {"key": key, "label": label, "value": value, "unit": unit, "target": target, "at_least": at_least,
             "ratio": ratio, "met": met, "note": note}
    record(entry)
    return entry


def info(key: str, label: str, text: str, **values: Any) -> None:
    """Print and record a figure that has no target (a comparison, a context figure)."""
    print(f"INFO {label}: {text}", flush=True)
    record({"key": key, "label": label, "text": text, **values})


def record(entry: dict[str, Any]) -> None:
    """Append one JSON line to the results file, when one is configured."""
    path = os.environ.get(RESULTS_ENV)
    if path:
        with open(path, "ab") as f:
            f.write(orjson.dumps(entry) + b"\n")
