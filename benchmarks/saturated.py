"""Full clusters side by side with yunikorn-core (v1.5.2, or v1.9.0 under yunikorn-1.9): cycle time, growth, ratio.

Every benchmark before this one measured a cluster where everything fits. Real clusters are
full: most asks do not fit, many queues have pending work, reservations pile up, shapes
vary. Each *shape* below is a workload generator (importable: ``SHAPES[name].build(size)``
returns a ``Workload``), run at three sizes spanning 10×:

* ``leaves``: n static sibling leaves, each one app with one ask of 1–6 × 250m/256 MiB;
  n/16 nodes of 64 cores / 8 GiB (memory runs out: about half the asks never fit).
* ``dynamic``: n apps, each tagged with its own team; a ``tag`` placement rule with
  ``create: true`` makes one leaf per team; asks of 8–15 cores on n/16 nodes of 64 cores
  (a third fit in cycle 1, the rest never). The apply time (every input) is printed too.
* ``reserve``: n request shapes, one ask each, every one bigger than any of 50,000 nodes,
  old enough to reserve (2 s of log time); nothing changes between cycles.
* ``distinct``: n nodes already full (occupied: 1 core free of 64), 25,000 waiting asks
  whose shapes are all distinct and none fits.
* ``release``: n nodes, each filled by one filler allocation (cycle 1); then n asks of half
  a node, old enough to reserve, reserve every node (cycle 2); then every filler is
  released at once: the timed cycle allocates the n reserved asks.
* ``preempt``: n under-guarantee leaves (a preemption storm): 2n nodes filled by a
  best-effort leaf (cycle 1), then two priority asks per leaf that may preempt
  (``preemption.delay: 1ns``): the timed cycle preempts for them.

The timed part: evsched (the compiled core unless ``EVSCHED_PURE_PYTHON=1``) feeds the
workload's lines to ``evsched simulate``'s ``Simulation`` (untimed ``schedule`` lines first),
then times the ``schedule`` line of the *first* cycle and of ``--steady`` more cycles 1 ms
apart with nothing changed in between (a full cluster's usual cycle), as ``evsched
simulate`` and the service run them (state digest included), under the service's GC
setting. yunikorn-core gets the same lines through the conformance harness's ``-bench``
mode (``make conformance-harness``): its first cycle is the loop of scheduling steps until
one makes no progress (evsched's one cycle), each steady cycle one more step. CPU seconds
are compared (the steadier figure on a shared machine; wall is printed beside). yunikorn-core's
first cycle grows faster than n² on the shapes with many waiting queues (each step tries every
waiting ask of every queue ahead of the one that fits, on every node): a first cycle past
``--budget`` (120 CPU seconds) is stopped and shown as ``>120``, its ratio as an upper bound (``<``). Both sides'
allocations (and preemption victims, `+Np`) in the first cycle are printed (`decided ev/yk`).

Printed per shape × size: first and steady cycle, evsched ÷ yunikorn, and the growth
exponent log(t₂/t₁)/log(n₂/n₁) from the size before; then the targets of issue 32 —
every cycle ≤ 0.5× yunikorn's, ≤ 1 s at the named sizes, exponent ≤ 1.3 between the two
largest sizes — each met or missed. Then ``--window``: the service's input rate (decode
and apply) per million events from one source through 5,000,000 (the duplicate-id window).

``--rules yunikorn-1.9`` runs every shape with evsched's partition under that rules profile
(``rules: yunikorn-1.9``, docs/semantics.md#rules-profiles) against the harness built on
yunikorn-core v1.9.0 (``make conformance-harness-1.9``; ``make bench-saturated
PROFILE=yunikorn-1.9`` passes both). The same targets hold under either profile.

    python benchmarks/saturated.py --harness BIN [--rules yunikorn-1.9] [--only leaves,dynamic] [--steady 2] [--tiny]
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from events.codec import decode_input  # noqa: E402
from events.models import AllocationDecided, AllocationRevoked, InputEvent  # noqa: E402
from events.times import format_time  # noqa: E402
from scheduler.config import load_config  # noqa: E402
from scheduler.config.profiles import DEFAULT_PROFILE, PROFILE_NAMES  # noqa: E402
from scheduler.core.engine import Engine  # noqa: E402
from scheduler.service.gc_thresholds import tuned_gc  # noqa: E402
from scheduler.simulation.simulate import Simulation  # noqa: E402

GI = 1 << 30
MI = 1 << 20
RESERVE_DELAY_US = 2_000_000  # YuniKorn's reservation delay, in log time for evsched
Line = dict[str, Any]


@dataclass
class Workload:
    """One shape at one size: the lines to feed (config first; ``schedule`` lines are untimed
    setup cycles), then the time of the timed first cycle (steady cycles follow 1 ms apart)."""

    shape: str
    size: int
    lines: list[Line]
    cycle_us: int
    harness_args: tuple[str, ...] = ()  # extra yunikorn-harness flags (e.g. the reservation delay)

    def jsonl(self) -> bytes:
        return b"".join(orjson.dumps(line) + b"\n" for line in self.lines)

    def jsonl_under(self, rules: str) -> bytes:
        """``evsched simulate``'s input: the lines under ``rules`` (``under_rules``), then the timed cycle."""
        timed = {"type": "schedule", "time": format_time(self.cycle_us)}
        return b"".join(orjson.dumps(under_rules(line, rules)) + b"\n" for line in [*self.lines, timed])


class _Lines:
    """Builds a workload's lines with explicit, increasing log times (1 µs apart)."""

    def __init__(self, yaml: str) -> None:
        self.now = 0
        self.lines: list[Line] = []
        self.add("config.updated", {"yaml": yaml})

    def add(self, kind: str, data: dict[str, Any]) -> None:
        self.lines.append({"type": kind, "time": format_time(self.now), "data": data})
        self.now += 1

    def schedule(self, at_us: int) -> None:
        self.now = max(self.now, at_us)
        self.lines.append({"type": "schedule", "time": format_time(self.now)})
        self.now += 1

    def node(self, node_id: str, vcore: int, memory: int, occupied: dict[str, int] | None = None) -> None:
        data: dict[str, Any] = {"node_id": node_id, "capacity": {"vcore": vcore, "memory": memory}}
        if occupied:
            data["occupied"] = occupied
        self.add("node.added", data)

    def app(self, app_id: str, queue: str | None, tags: dict[str, str] | None = None) -> None:
        data: dict[str, Any] = {"app_id": app_id, "user": "u"}
        if queue is not None:
            data["queue"] = queue
        if tags:
            data["tags"] = tags
        self.add("app.added", data)

    def ask(self, app_id: str, ask_id: str, vcore: int, memory: int, **extra: Any) -> None:
        self.add("ask.added", {"app_id": app_id, "ask_id": ask_id,
                               "resources": {"vcore": vcore, "memory": memory}, **extra})


def _config(leaves: str = "", head: str = "") -> str:
    return ("partitions:\n  - name: default\n" + head + "    queues:\n      - name: root\n"
            "        submitacl: '*'\n" + (("        queues:\n" + leaves) if leaves else ""))


def sibling_leaves(n: int) -> Workload:
    """``n`` static leaves, one app and one ask of 1–6 × 250m/256 MiB each; n/16 nodes of 64 cores/8 GiB."""
    rng = random.Random(32)
    b = _Lines(_config("".join(f"          - name: q{i}\n" for i in range(n))))
    for i in range(max(1, n // 16)):
        b.node(f"n{i:05d}", 64_000, 8 * GI)
    for i in range(n):
        k = rng.randint(1, 6)
        b.app(f"a{i}", f"root.q{i}")
        b.ask(f"a{i}", "k", 250 * k, 256 * MI * k)
    return Workload("leaves", n, b.lines, b.now + 1000)


def dynamic_leaves(n: int) -> Workload:
    """``n`` apps, one team each, placed by a ``tag`` rule that creates a leaf per team; asks of
    8–15 cores on n/16 nodes of 64 cores (a third fit)."""
    rng = random.Random(32)
    head = "    placementrules:\n      - name: tag\n        value: team\n        create: true\n"
    b = _Lines(_config(head=head))
    for i in range(max(1, n // 16)):
        b.node(f"n{i:05d}", 64_000, 256 * GI)
    for i in range(n):
        b.app(f"a{i}", None, {"team": f"team-{i}"})
        b.ask(f"a{i}", "k", 1000 * rng.randint(8, 15), GI)
    return Workload("dynamic", n, b.lines, b.now + 1000)


def reserve_shapes(n: int, nodes: int = 50_000) -> Workload:
    """``n`` asks of ``n`` distinct shapes, each bigger than every one of ``nodes`` nodes, old
    enough to reserve; nothing changes between cycles."""
    b = _Lines(_config("          - name: q\n"))
    for i in range(nodes):
        b.node(f"n{i:05d}", 64_000, 256 * GI)
    for i in range(n):
        b.app(f"a{i}", "root.q")
        b.ask(f"a{i}", "k", 65_000 + i, GI)
    return Workload("reserve", n, b.lines, b.now + RESERVE_DELAY_US + 1000)


def distinct_shapes(n: int, asks: int = 25_000) -> Workload:
    """``n`` full nodes (1 core of 64 free) and ``asks`` waiting asks of distinct shapes, none fits."""
    b = _Lines(_config("          - name: q\n"))
    for i in range(n):
        b.node(f"n{i:05d}", 64_000, 256 * GI, {"vcore": 63_000, "memory": 250 * GI})
    apps = max(1, asks // 100)
    for i in range(apps):
        b.app(f"a{i}", "root.q")
    for j in range(asks):
        b.ask(f"a{j % apps}", f"k{j}", 1001 + j, GI + j)
    return Workload("distinct", n, b.lines, b.now + 1000)


def mass_release(n: int) -> Workload:
    """``n`` nodes each filled by a filler (cycle 1), reserved by ``n`` half-node asks (cycle 2),
    then every filler released at once: the timed cycle allocates the reserved asks."""
    b = _Lines(_config("          - name: fill\n          - name: big\n"))
    for i in range(n):
        b.node(f"n{i:05d}", 16_000, 64 * GI)
    b.app("fill", "root.fill")
    for i in range(n):
        b.ask("fill", f"f{i}", 16_000, 64 * GI)
    b.schedule(b.now + 1000)
    for i in range(n):
        b.app(f"big{i}", "root.big")
        b.ask(f"big{i}", "k", 8_000, 32 * GI)
    b.schedule(b.now + RESERVE_DELAY_US + 1000)
    for i in range(n):
        b.add("allocation.released", {"app_id": "fill", "ask_id": f"f{i}"})
    return Workload("release", n, b.lines, b.now + 1000, ("-reservation-delay", "0s"))


def preemption_storm(n: int) -> Workload:
    """``n`` under-guarantee leaves, 2n nodes full of best-effort work (cycle 1), then two
    priority asks per leaf that may preempt: the timed cycle preempts for them."""
    leaves = "          - name: best\n            resources: {guaranteed: {vcore: 1000, memory: 1073741824}}\n"
    leaves += "".join(
        f"          - name: q{i}\n            resources: {{guaranteed: {{vcore: 4000, memory: 4294967296}}}}\n"
        f"            properties: {{preemption.delay: 1ns}}\n" for i in range(n))
    b = _Lines(_config(leaves))
    for i in range(2 * n):
        b.node(f"n{i:05d}", 4_000, 4 * GI)
    b.app("best", "root.best")
    for i in range(8 * n):
        b.ask("best", f"b{i}", 1_000, GI)
    b.schedule(b.now + 1000)
    for i in range(n):
        b.app(f"p{i}", f"root.q{i}")
        for k in range(2):
            b.ask(f"p{i}", f"k{k}", 1_000, GI, priority=1000, preempt_other=True)
    return Workload("preempt", n, b.lines, b.now + 10_000)


@dataclass(frozen=True)
class Shape:
    """A workload family: its generator, the sizes measured, the size the ≤ 1 s target names."""

    name: str
    build: Callable[[int], Workload]
    sizes: tuple[int, ...]
    tiny: int
    named: int | None = None  # the size at which a cycle must take ≤ 1 s (issue 32)
    apply_timed: bool = False  # print the apply time too
    yunikorn: str | None = None  # why yunikorn-core cannot run it (None: it can)


SHAPES: dict[str, Shape] = {s.name: s for s in (
    Shape("leaves", sibling_leaves, (200, 632, 2000), 32, named=2000),
    Shape("dynamic", dynamic_leaves, (2000, 6325, 20000), 32, named=20000, apply_timed=True),
    Shape("reserve", reserve_shapes, (100, 316, 1000), 3, named=1000),
    Shape("distinct", distinct_shapes, (800, 2530, 8000), 8),
    Shape("release", mass_release, (800, 2530, 8000), 8, named=8000),
    Shape("preempt", preemption_storm, (50, 158, 500), 4),
)}
YUNIKORN_VERSION = {"yunikorn-1.5": "v1.5.2", "yunikorn-1.9": "v1.9.0"}  # the harness each profile compares with
TINY_BUILD: dict[str, Callable[[int], Workload]] = {
    "reserve": lambda n: reserve_shapes(n, nodes=40),
    "distinct": lambda n: distinct_shapes(n, asks=40),
}


@dataclass
class Timing:
    """One side's figures for one workload (CPU and wall seconds)."""

    first_cpu: float
    first_wall: float
    decisions: int
    steady_cpu: list[float] = field(default_factory=list)
    steady_wall: list[float] = field(default_factory=list)
    apply_cpu: float = 0.0
    steady_decisions: int = 0
    preemptions: int = 0  # victims chosen in the first cycle
    timed_out: bool = False  # yunikorn-core did not finish within the budget (first_cpu: the budget)

    def outcome(self) -> str:
        if self.timed_out:
            return "—"
        return f"{self.decisions}" + (f"+{self.preemptions}p" if self.preemptions else "")

    @property
    def steady(self) -> float:
        return statistics.median(self.steady_cpu) if self.steady_cpu else math.nan


def _timed(body: Callable[[], Any]) -> tuple[Any, float, float]:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = body()
    return result, time.process_time() - cpu0, time.perf_counter() - wall0


def under_rules(line: Line, rules: str) -> Line:
    """A workload line with its config's partition under the rules profile ``rules`` (any other
    line, and the default profile, as they are). yunikorn-core gets the lines without the key."""
    if rules == DEFAULT_PROFILE.value or line["type"] != "config.updated":
        return line
    head = "  - name: default\n"
    yaml = line["data"]["yaml"]
    assert head in yaml, yaml  # every shape's config has the one partition (``_config``)
    return {**line, "data": {**line["data"], "yaml": yaml.replace(head, head + f"    rules: {rules}\n", 1)}}


def run_evsched(work: Workload, steady: int, rules: str = DEFAULT_PROFILE.value) -> Timing:
    """Feed the workload to ``Simulation`` (its partition under ``rules``) and time its first and
    ``steady`` more cycles (module docstring)."""
    lines = [orjson.dumps(under_rules(line, rules)) for line in work.lines]
    sim = Simulation()
    with tuned_gc():
        _, apply_cpu, _ = _timed(lambda: [sim.feed(raw) for raw in lines])
        gc.collect()
        cycles: list[tuple[int, int, float, float]] = []
        for k in range(1 + steady):
            raw = orjson.dumps({"type": "schedule", "time": format_time(work.cycle_us + 1000 * k)})
            outputs, cpu, wall = _timed(functools.partial(sim.feed, raw))
            cycles.append((sum(1 for o in outputs if isinstance(o.data, AllocationDecided)),
                           sum(1 for o in outputs if isinstance(o.data, AllocationRevoked)), cpu, wall))
    first = cycles[0]
    return Timing(first[2], first[3], first[0], [c[2] for c in cycles[1:]], [c[3] for c in cycles[1:]],
                  apply_cpu, sum(c[0] for c in cycles[1:]), first[1])


def run_yunikorn(binary: Path, work: Workload, steady: int, budget: float = 0.0) -> Timing:
    """The same lines through yunikorn-core (the harness's ``-bench`` mode); a first cycle that
    takes more than ``budget`` CPU seconds (0: no bound) is stopped there and reported as taking
    at least that long, without steady cycles."""
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as fh:
        fh.write(work.jsonl())
        fh.flush()
        proc = subprocess.run([str(binary), "-bench", "-idle", str(steady), "-budget", str(budget),
                               *work.harness_args, fh.name], capture_output=True, check=True)
    r = json.loads(proc.stdout)
    if r.get("timed_out"):
        return Timing(float(r["cpu_seconds"]), float(r["seconds"]), int(r["allocations"]),
                      apply_cpu=float(r["apply_seconds"]), timed_out=True)
    return Timing(float(r["cpu_seconds"]), float(r["seconds"]), int(r["allocations"]),
                  [float(x) for x in r["idle_cpu_seconds"]], [float(x) for x in r["idle_seconds"]],
                  float(r["apply_seconds"]), int(r["idle_allocations"]), int(r["preemptions"]))


# --- the duplicate-id window: the service's input rate through millions of events of one source ---

def window_rates(total: int, step: int) -> Iterator[tuple[int, float]]:
    """(events so far, events/s CPU over the last ``step``) while ``total`` inputs of one source are
    decoded and applied (each a new id; a node's occupied resources change, so the state stays
    one node and the window is what grows)."""
    engine = Engine(load_config(_config("          - name: q\n")))
    engine.apply(_decoded({"type": "node.added", "id": "n", "data": {"node_id": "n", "capacity": {"vcore": 4000}}}))
    with tuned_gc():
        done = 0
        while done < total:
            cpu0 = time.process_time()
            for i in range(done, done + step):
                raw = b'{"type":"node.updated","source":"rm","id":"e%d","time":"1970-01-01T00:00:01Z",' \
                      b'"data":{"node_id":"n","occupied":{"vcore":%d}}}' % (i, i % 1000)
                event = decode_input(raw, append_time_us=0)
                engine.apply(event)  # type: ignore[arg-type]  # always an InputEvent here
            done += step
            yield done, step / max(time.process_time() - cpu0, 1e-9)


def _decoded(obj: dict[str, Any]) -> InputEvent:
    obj = {"source": "rm", "time": "1970-01-01T00:00:00Z", **obj}
    event = decode_input(orjson.dumps(obj), append_time_us=0)
    assert isinstance(event, InputEvent), event
    return event


# --- the table ---

def _ratio(a: float, b: float) -> float:
    if math.isnan(b):  # not measured (yunikorn-core stopped at the budget, or not run)
        return math.nan
    return a / b if b > 0 else math.inf


def _exponent(t1: float, t2: float, n1: int, n2: int) -> float:
    if t1 <= 0 or t2 <= 0:
        return math.nan
    return math.log(t2 / t1) / math.log(n2 / n1)


def _fmt(x: float, spec: str = ".3f") -> str:
    return "—" if math.isnan(x) else ("inf" if math.isinf(x) else format(x, spec))


def measure(shape: Shape, sizes: tuple[int, ...], harness: Path | None, steady: int,
            build: Callable[[int], Workload] | None = None,
            budget: float = 0.0, rules: str = DEFAULT_PROFILE.value) -> list[tuple[int, Timing, Timing | None]]:
    """Every size of one shape through both sides (evsched under ``rules``; ``harness`` built
    against the matching yunikorn-core); prints a row per size as it goes."""
    rows: list[tuple[int, Timing, Timing | None]] = []
    for size in sizes:
        work = (build or shape.build)(size)
        ev = run_evsched(work, steady, rules)
        yk = (run_yunikorn(harness, work, steady, budget) if harness is not None and shape.yunikorn is None
              else None)
        rows.append((size, ev, yk))
        print(_row(shape, rows), flush=True)
    return rows


def _row(shape: Shape, rows: list[tuple[int, Timing, Timing | None]]) -> str:
    size, ev, yk = rows[-1]
    prev = rows[-2] if len(rows) > 1 else None
    exp_first = _exponent(prev[1].first_cpu, ev.first_cpu, prev[0], size) if prev else math.nan
    exp_steady = _exponent(prev[1].steady, ev.steady, prev[0], size) if prev else math.nan
    yk_first = yk.first_cpu if yk else math.nan
    yk_steady = yk.steady if yk else math.nan
    decisions = f"{ev.outcome()}/{yk.outcome() if yk else '—'}"
    over = yk is not None and yk.timed_out  # the figure is a lower bound, the ratio an upper one
    yk_text = (">" if over else "") + _fmt(yk_first, ".0f" if over else ".3f")
    ratio_text = ("<" if over else "") + _fmt(_ratio(ev.first_cpu, yk_first), ".2f")
    # steady cycles with nothing to do take microseconds on both sides: five decimals
    out = (f"{shape.name:<9} {size:>7,} | {ev.first_cpu:>8.3f} {ev.first_wall:>7.3f} {yk_text:>8} "
           f"{ratio_text:>6} {_fmt(exp_first, '.2f'):>5} | "
           f"{_fmt(ev.steady, '.5f'):>8} {_fmt(yk_steady, '.5f'):>8} {_fmt(_ratio(ev.steady, yk_steady), '.2f'):>6} "
           f"{_fmt(exp_steady, '.2f'):>5} | {decisions:>13}")
    if shape.apply_timed:
        out += f" | apply {ev.apply_cpu:.2f} s (yunikorn {_fmt(yk.apply_cpu if yk else math.nan, '.2f')} s wall)"
    return out


HEADER = (f"{'shape':<9} {'size':>7} | {'first cpu':>8} {'wall':>7} {'yk cpu':>8} {'ev/yk':>6} {'exp':>5} | "
          f"{'steady':>8} {'yk':>8} {'ev/yk':>6} {'exp':>5} | {'decided ev/yk':>13}")


def targets(shape: Shape, rows: list[tuple[int, Timing, Timing | None]]) -> list[str]:
    """Issue 32's targets for one shape, each ``met`` or ``MISSED``."""
    out = []
    ratios = [(r, size) for size, ev, yk in rows if yk is not None
              for r in (_ratio(ev.first_cpu, yk.first_cpu), _ratio(ev.steady, yk.steady)) if not math.isnan(r)]
    worst = max(ratios) if ratios else None
    if any(yk is not None and yk.timed_out for _, _, yk in rows):
        out.append(f"{shape.name}: yunikorn-core did not finish some sizes within the budget: "
                   "their ratios are upper bounds (`<`), their steady cycles not measured")
    if shape.yunikorn is not None:
        out.append(f"{shape.name}: yunikorn-core cannot run it: {shape.yunikorn}")
    elif worst is not None:
        out.append(f"{shape.name}: every cycle ≤ 0.5× yunikorn-core's: worst {worst[0]:.2f}× at {worst[1]:,}: "
                   + ("met" if worst[0] <= 0.5 else "MISSED"))
    if shape.named is not None:
        at = [ev for size, ev, _ in rows if size == shape.named]
        if at:
            slowest = max(at[0].first_cpu, max(at[0].steady_cpu, default=0.0))
            out.append(f"{shape.name}: ≤ 1 s per cycle at {shape.named:,}: {slowest:.3f} s: "
                       + ("met" if slowest <= 1.0 else "MISSED"))
    if len(rows) >= 2:
        (n1, a, _), (n2, b, _) = rows[-2], rows[-1]
        exps = [_exponent(a.first_cpu, b.first_cpu, n1, n2), _exponent(a.steady, b.steady, n1, n2)]
        worst_exp = max((e for e in exps if not math.isnan(e)), default=math.nan)
        out.append(f"{shape.name}: growth exponent ≤ 1.3 between {n1:,} and {n2:,}: {_fmt(worst_exp, '.2f')}: "
                   + ("met" if math.isnan(worst_exp) or worst_exp <= 1.3 else "MISSED"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--harness", type=Path, help="the Go harness (make conformance-harness, or "
                        "conformance-harness-1.9 with --rules yunikorn-1.9); none: evsched only")
    parser.add_argument("--rules", choices=PROFILE_NAMES, default=DEFAULT_PROFILE.value,
                        help="evsched's rules profile (the harness must be built against that yunikorn-core)")
    parser.add_argument("--only", help="comma-separated shapes (" + ",".join(SHAPES) + ",window)")
    parser.add_argument("--steady", type=int, default=2, help="steady cycles timed after the first (median shown)")
    parser.add_argument("--tiny", action="store_true", help="the smallest sizes (a smoke test; no figures)")
    parser.add_argument("--window", type=int, default=5_000_000, help="events of one source through the window")
    parser.add_argument("--budget", type=float, default=120.0,
                        help="CPU seconds yunikorn-core's first cycle may take before it is stopped (shown as ≥ it)")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else [*SHAPES, "window"]
    unknown = set(names) - {*SHAPES, "window"}
    if unknown:
        parser.error(f"unknown shapes: {', '.join(sorted(unknown))}")
    harness = importlib.import_module("harness")  # benchmarks/harness.py: the machine line
    print(f"machine: {harness.machine()}")
    print(f"load before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"rules: {args.rules} (evsched's partition; yunikorn-core {YUNIKORN_VERSION[args.rules]} harness: "
          f"{args.harness or 'not run'})")
    print("CPU seconds per cycle; steady = median of the cycles after the first; exp = growth exponent "
          "from the size before; ev/yk = evsched ÷ yunikorn-core")
    print(HEADER)
    verdicts: list[str] = []
    for name in names:
        if name == "window":
            continue
        shape = SHAPES[name]
        sizes = (shape.tiny, shape.tiny * 2) if args.tiny else shape.sizes
        rows = measure(shape, sizes, args.harness, args.steady, TINY_BUILD.get(name) if args.tiny else None,
                       args.budget, args.rules)
        verdicts += targets(shape, rows)
    if "window" in names:
        total = min(args.window, 20_000) if args.tiny else args.window
        step = total // 5 if args.tiny else 1_000_000
        print(f"\nduplicate-id window: {total:,} inputs of one source, decoded and applied; events/s CPU per "
              f"{step:,} (yunikorn-core has no such window)")
        rates = []
        for done, rate in window_rates(total, step):
            rates.append(rate)
            print(f"  through {done:>9,}: {rate:>9,.0f} events/s ({rate / rates[0]:.2f}× the first)", flush=True)
        worst = min(rates) / rates[0]
        verdicts.append(f"window: ≥ 0.9× the first million's events/s through {total:,}: worst {worst:.2f}×: "
                        + ("met" if worst >= 0.9 else "MISSED"))
    print(f"\ntargets (issue 32, {args.rules}):")
    for line in verdicts:
        print(f"  {line}")
    print(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
