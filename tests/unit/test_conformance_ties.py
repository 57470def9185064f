"""How ``conformance.run`` judges a scenario where yunikorn-core's outcome depends on Go's map order.

``preemption-delay`` seed 73 (seed 0 of ``make conformance``) is such a scenario: in its
cycle 19 one app holds three reservations, and ``Application.tryReservedAllocate`` walks
them in map order; evsched takes them in ask order, which yunikorn-core v1.5.2 shows about
one run in 8. 16 harness runs missed it one time in 8 and the run called it NEW; a
disagreement is now confirmed over up to ``CONFIRM_RUNS`` runs before it is called NEW.
The harness is stood in for by outcomes evsched itself computes (the judge's logic is under
test here, not yunikorn-core); the real harness runs the scenario in test_conformance.py.
"""

from __future__ import annotations

import orjson
import pytest

from conformance.compare import Outcome, evsched_outcome, parse_outcome
from conformance.generate import encode, generate
from conformance.run import CONFIRM_RUNS, MAX_RUNS, judge

SCENARIO = encode(generate("preemption-delay", 73))


def _other_outcome() -> Outcome:
    """A real outcome that is not evsched's for SCENARIO (the release that frees cycle 19's node left out)."""
    lines = SCENARIO.splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if b'"allocation.released"' in line and b'"app01-k4"' in line)
    other = evsched_outcome(b"".join(lines[:cut] + lines[cut + 1:]))
    assert other != evsched_outcome(SCENARIO)
    return other


class Harness:
    """Gives ``other`` until run ``ours_at`` (1-based), evsched's outcome on that run and after; counts runs."""

    def __init__(self, ours: Outcome, other: Outcome, ours_at: int | None) -> None:
        self.ours, self.other, self.ours_at, self.runs = ours, other, ours_at, 0

    def __call__(self, scenario: bytes) -> Outcome:
        assert scenario == SCENARIO  # a known difference's re-run of another scenario would fail here
        self.runs += 1
        return self.ours if self.ours_at is not None and self.runs >= self.ours_at else self.other


@pytest.mark.parametrize("ours_at", [MAX_RUNS + 1, 40, CONFIRM_RUNS])
def test_a_rare_tie_outcome_seen_after_the_first_runs_is_no_difference(ours_at: int) -> None:
    ours = evsched_outcome(SCENARIO)
    harness = Harness(ours, _other_outcome(), ours_at)
    difference, known, undecided = judge(SCENARIO, harness, ours=ours)
    assert difference is None and known is None
    assert undecided == 2  # yunikorn showed both outcomes: the scenario counts as yunikorn-undecided
    assert harness.runs == ours_at  # it stopped at the run that showed evsched's outcome


def test_a_difference_is_called_new_only_after_every_confirming_run() -> None:
    ours = evsched_outcome(SCENARIO)
    harness = Harness(ours, _other_outcome(), None)
    difference, known, undecided = judge(SCENARIO, harness, ours=ours)
    assert difference is not None and known is None and undecided == 0
    assert harness.runs == CONFIRM_RUNS


def test_an_agreeing_scenario_runs_the_harness_only_the_asked_times() -> None:
    ours = evsched_outcome(SCENARIO)
    harness = Harness(ours, _other_outcome(), 1)
    assert judge(SCENARIO, harness, runs=2, ours=ours) == (None, None, 0)
    assert harness.runs == 2


def test_a_reservation_ended_and_made_again_in_one_cycle_counts_as_neither() -> None:
    """The harness sees reservations between allocation steps only: a reservation a preemption
    attempt cancels (YUNIKORN-3092) and the ask makes again on the same node later in the same
    step is invisible there, so ``parse_outcome`` drops such a pair on both sides; a pair across
    cycles, or on another node, stays."""
    def line(kind: str, node: str, **extra: object) -> bytes:
        return orjson.dumps({"type": kind, "data": {"app_id": "a", "ask_id": "k", "node_id": node, **extra}})

    done = b'{"type":"cycle.completed","data":{"cycle":1,"decisions":0}}'
    evsched = [line("ask.reserved", "n1", cycle=1), done,
               line("ask.unreserved", "n1", reason="preemption-cancelled"), line("ask.reserved", "n1", cycle=2), done]
    harness = [line("ask.reserved", "n1", cycle=1), done, done]
    assert parse_outcome(b"\n".join(evsched)).reservations == parse_outcome(b"\n".join(harness)).reservations
    moved = [*evsched[:3], line("ask.reserved", "n2", cycle=2), done]
    later = [*evsched[:3], done, line("ask.reserved", "n1", cycle=3), done]
    for kept in (moved, later):
        assert ("unreserved", -1, "a", "k", "n1") in parse_outcome(b"\n".join(kept)).reservations
