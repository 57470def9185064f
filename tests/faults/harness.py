"""Fault-injection harness: a seeded SIGKILL campaign against ``evsched run``, and the checks on its log.

``kill_campaign`` starts the service again and again on one log and SIGKILLs it at random
(seeded) points of the work: a share of the kills land during start-up and recovery (where a
cycle cut short is being completed), the rest while cycles are being written. Each life is
paced by the progress the service itself reports (``run -v``, ``tests.progress``): when it
is ready it says how many inputs wait, the campaign plans a random share of them for the
life and kills it as soon as the life's cycle lines show that share consumed (as the next
cycle begins), or, for half of them, once the next cycle says it is writing its outputs. A
start-up kill lands once the life has logged a random number of the lines earlier lives
logged before they were ready (none: before the interpreter is up). So the kills spread
over the whole workload on a fast machine as on a slow or busy one.

Between the line that shows a life's share consumed and the kill, the life keeps deciding:
how far it overshoots depends on the machine's speed and load, and the overshoot can eat the
rest of the work before the campaign has made its kills. A caller that needs the kill count
whatever the speed holds back a tail of its inputs (``tail_held_back``): the campaign plans
over what is submitted, a life that consumes all of it and stops (``--once``) is not the
workload finished but just the next life started, and once nothing submitted is left every
further life is killed in start-up (an idle kill). The caller submits the tail afterwards
and runs the last, uninterrupted life over it.

``judge`` checks what docs/contract.md §3 promises of the outputs however often the writer died:
cycles completed as 1, 2, 3 … (a copy only if identical), every input consumed, and a
decision id written twice only with identical content; it returns the decisions with the
copies dropped.
"""

from __future__ import annotations

import functools
import os
import random
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from scheduler.simulation.workload import WorkloadSpec
from tests.cli import evsched_argv
from tests.contracts.log_contract import run
from tests.kafka_broker import KafkaTopics
from tests.kafka_run import decisions, open_log, read_all, spawn_run, unique
from tests.logdrive import workload_records
from tests.procs import fixed_batch
from tests.progress import READY, Seen, ServiceWatch

ROOT = Path(__file__).resolve().parents[2]
# 1 config + 4 priority classes + 5,000 nodes + 200 apps + 94,795 asks = 100,000 inputs, and
# room for every ask: ~95k decisions, so a lost or changed one cannot hide among pending asks.
FULL_SPEC = WorkloadSpec(nodes=5000, apps=200, asks=94_795, leaves=8, seed=5)
FULL_EVENTS = 100_000


def run_args(batch: int) -> list[str]:
    """``evsched run`` options of a campaign: ``--once``, cycles of exactly ``batch`` inputs
    (no growth on the backlog: the campaign needs its many cycles to kill in), and a
    snapshot every 10 cycles, so a restart re-derives about 10 cycles at most."""
    return ["--once", *fixed_batch(batch), "--snapshot-every", "10"]


STARTUP_SHARE = 0.2  # of the lives after the first, killed at a random moment of start-up / recovery


def fault_workload(spec: WorkloadSpec = FULL_SPEC) -> list[dict[str, Any]]:
    """The input records of a generated workload, its queue config first."""
    records = workload_records(spec)
    assert spec is not FULL_SPEC or len(records) == FULL_EVENTS
    return records


@dataclass(frozen=True)
class CampaignCase:
    """A kill campaign's workload, cycle size (inputs per cycle) and number of kills."""

    spec: WorkloadSpec
    batch: int
    kills: int


FULL_CASE = CampaignCase(FULL_SPEC, 500, 52)  # 200 cycles, ≥ 50 kills


def campaign_cases(small: CampaignCase, *, small_is_fast: bool = True) -> list[Any]:
    """``small`` (in the fast subset ``make test`` runs, if ``small_is_fast``) and the full
    100,000-event case (``slow``)."""
    return [pytest.param(small, id="small", marks=[] if small_is_fast else [pytest.mark.slow]),
            pytest.param(FULL_CASE, id="100k", marks=[pytest.mark.slow, pytest.mark.timeout(900)])]


@dataclass
class Campaign:
    """What a kill campaign did; ``finished`` is True when a life completed the work itself."""

    kills: int = 0
    in_startup: int = 0
    mid_stream: int = 0
    lives: int = 0
    torn_cycle_repairs: int = 0
    seconds: float = 0.0
    finished: bool = False

    def line(self) -> str:
        return (f"{self.kills} SIGKILLs in {self.lives} lives ({self.in_startup} in start-up/recovery, "
                f"{self.mid_stream} mid-stream), {self.torn_cycle_repairs} cycles cut short completed on "
                f"restart, {self.seconds:.0f} s")


class _Planner:
    """How much of the work the next life does: the inputs still waiting spread over the lives
    still planned, so the kills cover the whole workload and the work outlasts the campaign."""

    def __init__(self, kills: int) -> None:
        self.goal = kills + 10  # plan for more lives than kills: the work must outlast the campaign

    def inputs(self, waiting: int, kills_done: int, rng: random.Random) -> int:
        """A random number of inputs for a life that is ready with ``waiting`` inputs left."""
        lives_left = (1 - STARTUP_SHARE) * max(1, self.goal - kills_done)
        mean = max(1.0, waiting / lives_left)
        return rng.randint(1, max(1, round(2 * mean)))


def _consumed(share: int, seen: Seen) -> bool:
    return seen.inputs >= share


def _began_writing(writes_before: int, seen: Seen) -> bool:
    # A count, not "writing > written": a fast write's two lines often arrive in one poll.
    return seen.writes > writes_before


def _logged(lines: int, seen: Seen) -> bool:
    return seen.lines >= lines or seen.ready


def kill_campaign(args: list[str], workdir: Path, *, kills: int, seed: int, tail_held_back: bool = False) -> Campaign:
    """SIGKILL ``evsched run *args`` ``kills`` times, restarting it each time (see the module doc).

    Paced by what each life says it did (``-v``: ``tests.progress``), never by time: a
    mid-stream kill lands as soon as the life has consumed its planned share of the inputs (or
    once the next cycle begins writing its outputs); a
    start-up kill once the life has logged a random number of start-up lines (the stages an
    earlier life logged before it was ready). Without ``tail_held_back``, stops early if a life
    finishes the whole workload by itself (``finished``); with it (the caller submits the rest
    of its inputs after the campaign), a life that consumes everything submitted only means the
    next lives have nothing to do, and they are killed in start-up until the count is reached.
    """
    rng = random.Random(seed)
    plan = _Planner(kills)
    done = Campaign()
    startup_lines: int | None = None  # the most lines a life logged before it was ready: start-up's stages
    drained = False  # tail_held_back: a life consumed every submitted input
    began = time.monotonic()
    while done.kills < kills:
        err = workdir / f"life-{done.lives:03d}.err"
        proc = spawn_run([*args, "-v"], err)
        watch = ServiceWatch(proc, err)
        done.lives += 1
        if startup_lines is not None and (drained or rng.random() < STARTUP_SHARE):
            # Interpreter start, log open, snapshot load, re-derive, a cut-short cycle completed:
            # killed after a random number of the stages start-up reports (0: before the first).
            # With nothing left to do, before the last stage: a life that is ready stops at once.
            stage = rng.randint(0, max(0, startup_lines - 1) if drained else startup_lines)
            watch.wait(functools.partial(_logged, stage), f"{stage} start-up lines")
        elif watch.wait_ready():
            startup_lines = max(startup_lines or 0, watch.seen.startup_lines)
            drained = tail_held_back and watch.seen.waiting == 0
            share = plan.inputs(watch.seen.waiting, done.kills, rng)
            if watch.wait(functools.partial(_consumed, share), f"{share} inputs consumed") and rng.random() < 0.5:
                # Half the mid-stream kills aim at the next cycle's write (outputs partly sent).
                watch.wait(functools.partial(_began_writing, watch.seen.writes), "the next cycle writing")
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            done.kills += 1
            if READY in err.read_bytes():
                done.mid_stream += 1
            else:
                done.in_startup += 1
            continue
        text = err.read_text(errors="replace")
        assert proc.returncode == 0, f"life {done.lives} exited {proc.returncode}:\n{text[-3000:]}"
        if tail_held_back:  # it consumed everything submitted, not the workload: start the next life
            drained = True
            continue
        done.finished = True
        break
    done.torn_cycle_repairs = sum(b"was cut short" in p.read_bytes() for p in workdir.glob("life-*.err"))
    done.seconds = time.monotonic() - began
    return done


def finish_run(args: list[str], err_path: Path, timeout: float = 600) -> str:
    """Run the service to the end, uninterrupted; its stderr (asserting exit 0)."""
    with open(err_path, "wb") as err:
        proc = subprocess.run(evsched_argv("run", *args), cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=err, timeout=timeout)
    text = err_path.read_text(errors="replace")
    assert proc.returncode == 0, f"evsched run exited {proc.returncode}:\n{text[-3000:]}"
    return text


@dataclass
class Judged:
    """The outputs of a run, judged: unique decisions in order, cycles, copies written twice."""

    decisions: list[dict[str, Any]]
    cycles: int
    copies: int


def judge(outs: list[dict[str, Any]], input_end: Mapping[str, int]) -> Judged:
    """Check the outputs against docs/contract.md §3 (see the module doc); ``input_end``: the log's input end."""
    completed = unique([o["data"] for o in outs if o["type"] == "cycle.completed"], "cycle")
    assert [c["cycle"] for c in completed] == list(range(1, len(completed) + 1)), "cycles not 1, 2, 3, …"
    assert completed, "no cycle completed"
    # Summed over the channels: the rules changes travel on the admin channel beside the inputs.
    assert sum(completed[-1]["inputs_through"].values()) == sum(input_end.values()), "inputs left unprocessed"
    written = decisions(outs)
    kept = unique(written, "decision_id")  # asserts that every copy is identical
    return Judged(kept, len(completed), len(written) - len(kept))


def verify_log(log_args: list[str]) -> dict[str, Any]:
    """``evsched replay verify LOG-ARGS --no-snapshots --json``: every cycle re-derived from cycle 1
    and compared byte for byte; asserts exit 0 (no divergence) and returns the report."""
    proc = subprocess.run(
        evsched_argv("replay", "verify", *log_args, "--no-snapshots", "--json"),
        cwd=ROOT, capture_output=True, timeout=900,
    )
    assert proc.returncode == 0, f"replay verify exited {proc.returncode}:\n{proc.stdout[-3000:]!r}{proc.stderr!r}"
    report: dict[str, Any] = orjson.loads(proc.stdout)
    return report


def consumed(bootstrap: str, topics: KafkaTopics) -> int:
    """Inputs a Kafka log's last completed cycle has consumed (0 before the first)."""
    _, outs = read_all(bootstrap, topics)
    done = [o["data"]["inputs_through"] for o in outs if o["type"] == "cycle.completed"]
    return sum(done[-1].values()) if done else 0


def wait_consumed(
    bootstrap: str, topics: KafkaTopics, at_least: int, service: subprocess.Popen[bytes], timeout: float = 120
) -> int:
    """Wait until a running service has consumed ``at_least`` inputs (failing if it exits); the count."""
    deadline = time.monotonic() + timeout
    while (now := consumed(bootstrap, topics)) < at_least:
        assert service.poll() is None, f"the service exited ({service.returncode}) with {now} inputs consumed"
        assert time.monotonic() < deadline, f"only {now} of {at_least} inputs consumed within {timeout} s"
        time.sleep(0.2)
    return now


def output_values(bootstrap: str, topics: KafkaTopics) -> set[bytes]:
    """A Kafka log's output records as bytes (the canonical encoding the MQTT bridge publishes too)."""

    async def body() -> set[bytes]:
        async with open_log(bootstrap, topics) as log:
            return {r.value for r in await log.read_outputs(0)}

    values: set[bytes] = run(body())
    return values
