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
difference it shows (``conformance.known``) or NEW; the exit status is 1 only when a NEW
one is found — never for yunikorn's own nondeterminism. ``--exclude-known`` leaves out the
families listed in ``conformance.known.KNOWN`` (the reason is printed).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
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
from conformance.known import KNOWN, classify
from conformance.shrink import write_minimal

MAX_RUNS = 16  # harness runs of a scenario once two disagree or none is evsched's


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


def yunikorn_outcomes(harness: Path, scenario: bytes, runs: int = 2, want: Outcome | None = None) -> list[Outcome]:
    """The distinct outcomes of ``runs`` harness runs, or of ``MAX_RUNS`` once two differ or
    while none matches ``want`` (evsched's outcome: a tie may have gone the other way in every
    run so far)."""
    seen: list[Outcome] = []
    n = 0

    def matched() -> bool:
        return want is None or any(first_difference(want, o) is None for o in seen)

    while n < runs or ((len(seen) > 1 or not matched()) and n < MAX_RUNS):
        outcome = parse_outcome(harness_output(harness, scenario))
        n += 1
        if outcome not in seen:
            seen.append(outcome)
    return seen


def verdict(ours: Outcome, theirs: list[Outcome]) -> str | None:
    """None when evsched's outcome is one of yunikorn's; else the first difference from the
    first of them."""
    differences = [first_difference(ours, t) for t in theirs]
    return None if None in differences else differences[0]


def agrees(harness: Path, scenario: bytes, runs: int = 2) -> bool:
    """evsched decides as yunikorn-core does (one of its ways, where it decides several)."""
    ours = evsched_outcome(scenario)
    return verdict(ours, yunikorn_outcomes(harness, scenario, runs, ours)) is None


def check(harness: Path, family: str, seed: int, out: Path | None, runs: int = 2) -> Result:
    """Generate, run both sides, compare; a disagreeing scenario is written under ``out``."""
    scenario = encode(generate(family, seed))
    ours = evsched_outcome(scenario)
    theirs = yunikorn_outcomes(harness, scenario, runs, ours)
    difference = verdict(ours, theirs)
    undecided = len(theirs) if len(theirs) > 1 else 0
    if difference is not None and undecided:
        difference += f" (yunikorn undecided: {undecided} outcomes, none evsched's)"
    path = None
    if difference is not None and out is not None:
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{family}-{seed}.jsonl"
        path.write_bytes(scenario)
    known = None
    if difference is not None:
        def outcomes(s: bytes) -> tuple[Outcome, list[Outcome]]:
            mine = evsched_outcome(s)
            return mine, yunikorn_outcomes(harness, s, runs, mine)

        known = classify(scenario, outcomes)
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
    outcomes = yunikorn_outcomes(harness, scenario, runs, mine)
    difference = verdict(mine, outcomes)
    print("evsched:\n" + ours.decode() + "yunikorn:\n" + theirs.decode())
    if len(outcomes) > 1:
        print(f"yunikorn undecided: {len(outcomes)} outcomes in {MAX_RUNS} runs")
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
