"""The conformance run: random tie-free scenarios through evsched and through yunikorn-core.

Scenarios are spread evenly over the families of ``conformance.generate``; each runs
through ``evsched simulate`` (in process) and the Go harness (``conformance/yunikorn``,
built by ``make conformance``); the outcomes are compared (``conformance.compare``).
Prints agreement per family and, for each disagreement, the first difference and the path
of the scenario, written to ``--out`` so that it can be rerun alone:

    python -m conformance.run --harness BIN [--count 500] [--seed 0] [--out DIR]
                              [--family F ...] [--exclude-known] [--shrink]
    python -m conformance.run --harness BIN --scenario FILE.jsonl    # one file, both outputs diffed

yunikorn-core leaves some ties to Go's map order: each scenario runs through the harness
``--runs`` times (2), and when those disagree, or none of them is evsched's, up to
``MAX_RUNS`` times in all; the distinct
outcomes make the scenario *yunikorn-undecided*, and evsched must match one of them (a
miss is a difference like any other). Each disagreement is labelled with the known
difference it shows (``conformance.known``) or NEW. Before a disagreement is called NEW
the harness runs up to ``CONFIRM_RUNS`` times in all (and the known differences are
checked again with as many runs): an order Go's map iteration gives one run in 8 is missed
by 16 runs one time in 8, by 256 almost never (docs/conformance.md, *Ties*). The exit status
is 1 only when a NEW one is found — never for yunikorn's own nondeterminism.
``--exclude-known`` leaves out the families listed in ``conformance.known.KNOWN`` (the
reason is printed).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from conformance.compare import (
    DEFAULT_PROFILE,
    Outcome,
    evsched_outcome,
    evsched_output,
    first_difference,
    parse_outcome,
    use_profile,
)
from conformance.generate import FAMILIES, encode, generate
from conformance.known import KNOWN, Known, classify
from conformance.shrink import write_minimal

MAX_RUNS = 16  # harness runs of a scenario once two disagree or none is evsched's
# Harness runs in all before a disagreement no known difference explains is called NEW: an
# outcome Go's map order gives one run in 8 (a small map's iteration starts at one of its 8
# slots) is missed by 16 runs with probability (7/8)^16 = 12%, by 256 with 1e-15.
CONFIRM_RUNS = 256


@dataclass(frozen=True)
class Result:
    """One scenario's verdict."""

    family: str
    seed: int
    difference: str | None
    path: Path | None
    known: str | None = None
    undecided: int = 0  # distinct yunikorn outcomes seen (0 or 1: decided)

    @property
    def new(self) -> bool:
        """A disagreement that no known difference explains."""
        return self.difference is not None and self.known is None


def harness_output(harness: Path, scenario: bytes) -> bytes:
    """The Go harness's output for the scenario (its standard input)."""
    proc = subprocess.run([str(harness), "-"], input=scenario, capture_output=True, check=False, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"the harness failed ({proc.returncode}): {proc.stderr.decode(errors='replace')}")
    return proc.stdout


@dataclass
class Sampled:
    """The distinct outcomes of a scenario's harness runs so far, and how many runs that was."""

    outcomes: list[Outcome] = field(default_factory=list)
    runs: int = 0

    def matches(self, want: Outcome | None) -> bool:
        """``want`` (evsched's outcome) is one of them, or nothing is wanted."""
        return want is None or any(first_difference(want, o) is None for o in self.outcomes)

    def add(self, outcome: Outcome) -> None:
        self.runs += 1
        if outcome not in self.outcomes:
            self.outcomes.append(outcome)


def sample(run_once: Callable[[], Outcome], runs: int = 2, want: Outcome | None = None,
           so_far: Sampled | None = None) -> Sampled:
    """``runs`` runs, then up to ``MAX_RUNS`` in all while two outcomes differ or none
    matches ``want`` (evsched's outcome: a tie may have gone the other way in every run so far)."""
    seen = Sampled() if so_far is None else so_far
    while seen.runs < runs or ((len(seen.outcomes) > 1 or not seen.matches(want)) and seen.runs < MAX_RUNS):
        seen.add(run_once())
    return seen


def confirm(run_once: Callable[[], Outcome], want: Outcome, seen: Sampled) -> Sampled:
    """More runs, up to ``CONFIRM_RUNS`` in all, until one matches ``want``: what a disagreement
    is put through before it is called NEW (a rare draw of Go's map order is no difference)."""
    while seen.runs < CONFIRM_RUNS and not seen.matches(want):
        seen.add(run_once())
    return seen


def yunikorn_outcomes(harness: Path, scenario: bytes, runs: int = 2, want: Outcome | None = None) -> list[Outcome]:
    """The distinct outcomes of ``sample``'s harness runs of the scenario."""
    return sample(lambda: parse_outcome(harness_output(harness, scenario)), runs, want).outcomes


def verdict(ours: Outcome, theirs: list[Outcome]) -> str | None:
    """None when evsched's outcome is one of yunikorn's; else the first difference from the
    first of them."""
    differences = [first_difference(ours, t) for t in theirs]
    return None if None in differences else differences[0]


def agrees(harness: Path, scenario: bytes, runs: int = 2) -> bool:
    """evsched decides as yunikorn-core does (one of its ways, where it decides several)."""
    ours = evsched_outcome(scenario)
    return verdict(ours, yunikorn_outcomes(harness, scenario, runs, ours)) is None


def judge(scenario: bytes, run_harness: Callable[[bytes], Outcome], runs: int = 2,
          ours: Outcome | None = None) -> tuple[str | None, Known | None, int]:
    """The scenario's verdict against ``run_harness`` (one harness run's outcome): (the first
    difference or None, the known difference explaining it, how many distinct outcomes
    yunikorn showed when more than one, else 0).

    A disagreement that no known difference explains is confirmed first: the harness runs
    on (``confirm``) until evsched's outcome shows up or ``CONFIRM_RUNS`` runs are spent, and
    the known differences are checked again with their re-runs confirmed the same way.
    """
    mine = evsched_outcome(scenario) if ours is None else ours
    seen = sample(lambda: run_harness(scenario), runs, mine)
    difference = verdict(mine, seen.outcomes)
    known = None
    if difference is not None:
        def outcomes(s: bytes, sure: bool = False) -> tuple[Outcome, list[Outcome]]:
            if s == scenario:
                return mine, seen.outcomes  # sampled already
            theirs = evsched_outcome(s)
            sampled = sample(lambda: run_harness(s), runs, theirs)
            return theirs, (confirm(lambda: run_harness(s), theirs, sampled) if sure else sampled).outcomes

        known = classify(scenario, outcomes)
        if known is None:  # NEW unless it was a rare draw of yunikorn's own ties
            seen = confirm(lambda: run_harness(scenario), mine, seen)
            difference = verdict(mine, seen.outcomes)
            if difference is not None:
                known = classify(scenario, lambda s: outcomes(s, sure=True))
    undecided = len(seen.outcomes) if len(seen.outcomes) > 1 else 0
    if difference is not None and undecided:
        difference += f" (yunikorn undecided: {undecided} outcomes in {seen.runs} runs, none evsched's)"
    return difference, known, undecided


def check(harness: Path, family: str, seed: int, out: Path | None, runs: int = 2) -> Result:
    """Generate, run both sides, compare; a disagreeing scenario is written under ``out``."""
    scenario = encode(generate(family, seed))
    difference, known, undecided = judge(scenario, lambda s: parse_outcome(harness_output(harness, s)), runs)
    path = None
    if difference is not None and out is not None:
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{family}-{seed}.jsonl"
        path.write_bytes(scenario)
    return Result(family, seed, difference, path, known.key if known else None, undecided)


def plan(count: int, seed: int, families: list[str]) -> list[tuple[str, int]]:
    """``count`` (family, seed) pairs, round-robin over the families."""
    return [(families[i % len(families)], seed + i // len(families)) for i in range(count)]


def run(harness: Path, count: int, seed: int, families: list[str], out: Path | None, runs: int = 2) -> list[Result]:
    """Every planned scenario's result."""
    return [check(harness, f, s, out, runs) for f, s in plan(count, seed, families)]


def shrunk(harness: Path, result: Result) -> Result:
    """The result with its scenario shrunk to a minimal one (kept as FILE.min.jsonl)."""
    if result.path is None or result.difference is None or result.undecided or result.known:
        return result  # only a NEW difference is shrunk (a known one has its repro already)
    path, diff = write_minimal(lambda s: harness_output(harness, s), result.path)
    return Result(result.family, result.seed, f"{result.difference}; minimal: {diff}", path, result.known)


def report(results: list[Result]) -> str:
    """The agreement table (agree / known / yunikorn-undecided / new) and one line per disagreement.

    ``agree`` counts scenarios yunikorn decided one way, as evsched did; ``undecided`` those
    it decided several ways, one of them evsched's; ``known`` and ``new`` the disagreements.
    """
    total = Counter(r.family for r in results)
    agree = Counter(r.family for r in results if r.difference is None and not r.undecided)
    undecided = Counter(r.family for r in results if r.difference is None and r.undecided)
    known = Counter(r.family for r in results if r.difference is not None and not r.new)
    new = Counter(r.family for r in results if r.new)
    head = f"{'family':<20} {'agree':>6} {'known':>6} {'undecided':>9} {'new':>5} / {'total':<6}"
    lines = [head]
    for family in sorted(total, key=FAMILIES.index):
        lines.append(f"{family:<20} {agree[family]:>6} {known[family]:>6} {undecided[family]:>9} "
                     f"{new[family]:>5} / {total[family]:<6}")
    n, a, k, u, w = (sum(c.values()) for c in (total, agree, known, undecided, new))
    lines.append(f"{'all':<20} {a:>6} {k:>6} {u:>9} {w:>5} / {n:<6} "
                 f"({100 * (a + u) / max(n, 1):.1f}% agree, {100 * (a + u + k) / max(n, 1):.1f}% agree "
                 f"or a known difference)")
    for key, count in Counter(r.known for r in results if r.known).most_common():
        lines.append(f"known difference {key}: {count} scenarios")
    for r in results:
        if r.difference is not None:
            where = f" [{r.path}]" if r.path else ""
            label = f"known {r.known}" if r.known else "NEW"
            lines.append(f"DIFF ({label}) {r.family} seed {r.seed}: {r.difference}{where}")
    return "\n".join(lines)


def one_file(harness: Path, path: Path, runs: int) -> int:
    scenario = path.read_bytes()
    ours, theirs = evsched_output(scenario), harness_output(harness, scenario)
    mine = evsched_outcome(scenario)
    run_once = lambda: parse_outcome(harness_output(harness, scenario))  # noqa: E731
    seen = sample(run_once, runs, mine)
    if verdict(mine, seen.outcomes) is not None:
        seen = confirm(run_once, mine, seen)
    difference = verdict(mine, seen.outcomes)
    print("evsched:\n" + ours.decode() + "yunikorn:\n" + theirs.decode())
    if len(seen.outcomes) > 1:
        print(f"yunikorn undecided: {len(seen.outcomes)} outcomes in {seen.runs} runs")
    print("agree" if difference is None else f"first difference: {difference}")
    return 0 if difference is None else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--harness", type=Path, required=True, help="the built Go harness")
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--family", action="append", choices=FAMILIES, help="only these families (repeatable)")
    parser.add_argument("--exclude-known", action="store_true", help="leave out the known-difference families")
    parser.add_argument("--out", type=Path, help="where disagreeing scenarios are written")
    parser.add_argument("--scenario", type=Path, help="compare the two sides on this one file")
    parser.add_argument("--runs", type=int, default=2, help="harness runs per scenario (more once two differ)")
    parser.add_argument("--profile", choices=("yunikorn-1.5", "yunikorn-1.9"), default=DEFAULT_PROFILE,
                        help="evsched's rules profile; the harness must be built against that yunikorn-core")
    parser.add_argument("--shrink", action="store_true",
                        help="shrink each disagreeing scenario written to --out into a minimal FILE.min.jsonl")
    args = parser.parse_args(argv)
    use_profile(args.profile)
    if args.scenario:
        return one_file(args.harness, args.scenario, args.runs)
    families = list(args.family or FAMILIES)
    if args.exclude_known:
        for family in [f for f in families if f in KNOWN]:
            print(f"skipped family {family}: known difference: {KNOWN[family]}")
            families.remove(family)
    if not families:
        print("no family left to run", file=sys.stderr)
        return 2
    results = run(args.harness, args.count, args.seed, families, args.out, args.runs)
    if args.shrink:
        results = [shrunk(args.harness, r) for r in results]
    print(report(results))
    return 1 if any(r.new for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
