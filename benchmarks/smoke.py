"""``make bench-smoke``: every benchmark script run at a tiny size, failing when one errors or produces nothing.

A benchmark nobody runs breaks silently (``e2e.py`` reported "0 decisions" unnoticed once the
admin channel landed). So every script in this directory is registered in ``SMOKE`` with
arguments that make it finish in seconds and patterns for the counts it must print — the
decisions (allocations) it made, or for the scripts that make none the events, asks or
queries it measured. A run fails when the script exits non-zero, prints no such count, or
the count is 0. A script that is not registered fails too (``unregistered``), so a new
benchmark joins the smoke run with its first commit. Timings are printed but never judged:
the sizes are far too small for a figure to mean anything.

The tests (``tests/integration/test_bench_smoke.py``, part of ``make test``) run each entry
as a test case; this module's command line runs them all (or the named ones) directly:

    python benchmarks/smoke.py [NAME ...]

Arguments may name ``{tmp}`` (a fresh directory per run) and ``{harness}`` (the yunikorn-core
Go harness, ``make conformance-harness``). ``needs``: ``kafka`` — the script reaches a broker
through ``KAFKA_BOOTSTRAP_SERVERS`` when it is set (the tests pass their session broker), else
starts its own; ``go`` — the script needs the Go harness built (``go-1.9``: the one built against
yunikorn-core v1.9.0, ``make conformance-harness-1.9``); ``k8s`` — the Kubernetes binaries
(tests/kube_cluster.py builds them once). An entry whose ``script`` is set runs that script
under another name (a second configuration of the same benchmark).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Not benchmarks: the shared helpers and the runners.
NOT_SCRIPTS = frozenset({"harness", "baseline", "run_all", "smoke"})
TIMEOUT_S = 280.0  # a hung script fails rather than blocking the suite (within pytest's 300 s per test)


@dataclass(frozen=True)
class Smoke:
    """How one script runs tiny: its arguments and the count its output must show."""

    args: tuple[str, ...]
    # Regexes, each with one group: a count (digits, commas allowed). Each must match, every match > 0.
    # Anchor each on the words around its count: a bare r"([\d,]+) preemptions" also matched the
    # "0" after the point of a rate ("2,000.0 preemptions/s"), failing a run that had preempted.
    produced: tuple[str, ...]
    needs: str = ""  # "", "kafka", "go", "go-1.9" or "k8s"
    script: str = ""  # the script this entry runs ("": the entry's name)


SMOKE: dict[str, Smoke] = {
    "apply": Smoke(("--repeat", "1"), (r"== apply: ([\d,]+) input events",)),
    "core": Smoke(("--policy", "fair", "--nodes", "200", "--asks", "2000", "--apps", "20", "--leaves", "5",
                   "--repeat", "1", "--baseline-steps", "2"), (r"run \d+: ([\d,]+) decisions",)),
    # --shards: the sharded parts too (the tests' one broker stands in for the 3-node cluster)
    "e2e": Smoke(("--asks", "300", "--events", "400", "--runs", "1", "--rate", "100", "--seconds", "1",
                  "--no-core-rate", "--shards", "2", "--instances", "2"),
                 (r"([\d,]+) decisions, the last on the decisions topic", r"([\d,]+) decided"), needs="kafka"),
    # 3,000 asks: with 500 a quiet machine's run could take under 0.05 s, which the service prints as
    # "in 0.0 s" (http_overhead then has no rate to report).
    "http_overhead": Smoke(("--asks", "3000", "--runs", "1"), (r"\(([\d,]+) decisions, \d+ scrapes\)",)),
    # YuniKorn's column only where its binary is built already (its build: minutes, ~2 GB)
    "k8s": Smoke(("--nodes", "10", "--shapes", "2x20", "--creators", "2", "--no-build-yunikorn"),
                 (r"evsched: ([\d,]+) pods bound and Running",), needs="k8s"),
    "memory": Smoke(("--asks", "5000"), (r"with ([\d,]+) pending asks",)),
    "preemption": Smoke(("--nodes", "50", "--asks", "20"), (r"run \d+: ([\d,]+) preemptions",)),
    "recovery": Smoke(("--events", "2000", "--dir", "{tmp}", "--repeat", "1"), (r"([\d,]+) decisions, written by",)),
    "replay_queries": Smoke(("--events", "3000", "--batch", "500", "--window", "500", "--snapshot-every", "1"),
                            (r"log: \d+ cycles, ([\d,]+) decisions",)),
    "restart": Smoke(("--events", "2000"), (r"([\d,]+) decisions in the log",)),
    "saturated": Smoke(("--tiny", "--harness", "{harness}", "--window", "2000"),
                       (r"(?m)^leaves +\d+ \|.*\| +(\d+)/\d+$",), needs="go"),
    # every shape under the yunikorn-1.9 rules profile, against yunikorn-core v1.9.0; the storm must preempt
    "saturated-1.9": Smoke(("--tiny", "--rules", "yunikorn-1.9", "--harness", "{harness}", "--only",
                            "leaves,dynamic,reserve,distinct,release,preempt"),
                           (r"(?m)^leaves +\d+ \|.*\| +(\d+)/\d+$", r"(?m)^preempt +\d+ \|.*\| +\d+\+(\d+)p/"),
                           needs="go-1.9", script="saturated"),
    "scaling": Smoke(("--sizes", "200,400", "--decisions", "1000", "--baseline-steps", "1", "--plot", "",
                      "--skip", "asks"), (r"([\d,]+) decisions",)),
    "simulate": Smoke(("--nodes", "200", "--asks", "2000", "--apps", "20", "--repeat", "1"), (r"([\d,]+) decisions",)),
    "verify": Smoke(("--events", "3000", "--batch", "500", "--snapshots", "2", "--repeat", "1"),
                    (r"the log holds ([\d,]+) decisions",)),
    "vs_yunikorn": Smoke(("--harness", "{harness}", "--only", "yk-500"), (r"(?m)^yk-\d+ +([\d,]+) \|",), needs="go"),
    "wide_queues": Smoke(("--leaves", "50", "--repeat", "1"), (r"one cycle of ([\d,]+) decisions",)),
}


def scripts() -> list[str]:
    """Every benchmark script in this directory (by name, without ``.py``)."""
    return sorted(p.stem for p in HERE.glob("*.py") if p.stem not in NOT_SCRIPTS)


def unregistered() -> list[str]:
    """Scripts with no ``SMOKE`` entry (each is a failure of the smoke run)."""
    registered = {smoke.script or name for name, smoke in SMOKE.items()}
    return [name for name in scripts() if name not in registered]


@dataclass
class Outcome:
    """One script's smoke run: what it printed and the failure found in it (None: passed)."""

    name: str
    seconds: float
    output: str
    failure: str | None


def run(name: str, harness: Path | None = None, env: dict[str, str] | None = None) -> Outcome:
    """Run one registered script at its tiny size and judge it (exit code, a positive count)."""
    smoke = SMOKE[name]
    with tempfile.TemporaryDirectory(prefix=f"evsched-smoke-{name}-") as tmp:
        args = [a.format(tmp=tmp, harness=harness or "") for a in smoke.args]
        began = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, str(HERE / f"{smoke.script or name}.py"), *args], cwd=HERE.parent,
                                  capture_output=True, text=True, timeout=TIMEOUT_S, env=env or dict(os.environ))
        except subprocess.TimeoutExpired as exc:
            out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
            return Outcome(name, time.perf_counter() - began, out, f"did not finish in {TIMEOUT_S:.0f} s")
        seconds = time.perf_counter() - began
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        return Outcome(name, seconds, output, f"exited {proc.returncode}")
    for pattern in smoke.produced:
        counts = [int(found.replace(",", "")) for found in re.findall(pattern, proc.stdout)]
        if not counts:
            return Outcome(name, seconds, output, f"printed no count matching {pattern!r}")
        if not all(counts):
            return Outcome(name, seconds, output, f"produced nothing: a count matching {pattern!r} is 0")
    return Outcome(name, seconds, output, None)


def main(argv: list[str]) -> int:
    names = argv or sorted(SMOKE)
    failed = [f"{name}: not registered in benchmarks/smoke.py SMOKE" for name in unregistered()]
    build = HERE.parent / "conformance" / ".build"
    harnesses = {"go": build / "yunikorn-harness", "go-1.9": build / "yunikorn-harness-1.9"}
    for name in names:
        harness = harnesses.get(SMOKE[name].needs, harnesses["go"])
        if SMOKE[name].needs in harnesses and not harness.exists():
            target = harness.name.replace("yunikorn-", "conformance-")
            print(f"{name:<16} skipped: no Go harness at {harness} (make {target})")
            continue
        outcome = run(name, harness)
        print(f"{name:<16} {outcome.seconds:6.1f} s  {outcome.failure or 'ok'}", flush=True)
        if outcome.failure:
            print(outcome.output[-3000:])
            failed.append(f"{name}: {outcome.failure}")
    for line in failed:
        print("FAILED " + line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
