"""Planning parallel verify: where to cut the log into ranges so that the slowest range ends first.

A range starts at a snapshot (or the log's start) and ends at a later one (or the log's
end); parallel verify (``replay.verify_parallel``) runs one per worker, so its wall time is
the slowest range's. What a range costs, in seconds, on the model below:

- re-deriving its inputs: ``INPUT_S`` each, plus ``STATE_INPUT_S_PER_MB`` per MB of state
  the input meets (the size of the snapshots around it: later cycles walk more state);
- starting at a snapshot: reading, restoring and hashing it, ``RESTORE_S_PER_MB``;
- ending at a snapshot: hashing the engine re-derived up to it, ``END_HASH_S_PER_MB``.

Measured with the compiled core on ``benchmarks/verify.py``'s 200,000-event log (snapshots
of 2.4–24 MB every 20 cycles; benchmarks/RESULTS.md): 33 µs per input plus 0.21 µs per MB,
0.59 s to start at the 15.6 MB snapshot of cycle 120 (38 ms per MB) and 0.19 s to hash
the state there (12 ms per MB). Only the ratios matter, so the model holds on a faster or
slower machine; on the pure-Python core inputs cost relatively more and the plan errs
toward more work in later ranges.

``plan_ranges`` chooses the cuts that make the most expensive range cheapest (ties: the
more even spread, then fewer ranges, then earlier cuts), at most one range per worker,
each at least ``MIN_RANGE_INPUTS`` inputs and never leaving a last range of under half
that. Example: 100,000 inputs, snapshots every 10,000 inputs of negligible size, 2 workers:
one cut, at 50,000. Were the snapshots 3 MB per 10,000 inputs, the range after the cut
would first restore 15 MB there (0.57 s) and the cut moves to 60,000. On the benchmark's
log the plan cuts at cycle 100: 3.6 s before it, 3.7 s after (measured: 3.8 and 3.8).
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_RANGE_INPUTS = 20_000
RANGES_PER_JOB = 1  # more ranges than workers only add restores and hashes
MAX_PLANNED_BOUNDARIES = 200  # more snapshots than this: every k-th is considered (the plan is quadratic)

INPUT_S = 33e-6
STATE_INPUT_S_PER_MB = 0.21e-6
RESTORE_S_PER_MB = 0.038
END_HASH_S_PER_MB = 0.012
_MB = 1_000_000
# A plan so far, compared as a tuple: its slowest range, the sum of its ranges' squares, how
# many ranges, the cycles it cuts at.
_PlanKey = tuple[float, float, int, tuple[int, ...]]


@dataclass(frozen=True)
class Boundary:
    """A cut between ranges: after ``cycle``, restored from the snapshot at ``path`` (None: the start)."""

    cycle: int
    inputs: int  # input records consumed through ``cycle``, over all channels
    path: str | None = None
    state_bytes: int = 0  # the snapshot file's size: how large the state is there (0: unknown)


@dataclass(frozen=True)
class Range:
    """Cycles ``start.cycle + 1`` … ``end.cycle`` (to the end of the log when ``end`` is None)."""

    index: int
    start: Boundary
    end: Boundary | None

    @property
    def key(self) -> tuple[int, int | None]:
        """Identifies the work: the same cycles verified from the same start."""
        return (self.start.cycle, None if self.end is None else self.end.cycle)


def estimated_work(boundaries: list[Boundary], total_inputs: int) -> tuple[list[float], float]:
    """Seconds of re-deriving (restores and hashes aside) through each boundary, and through the end.

    Each input costs ``INPUT_S`` plus ``STATE_INPUT_S_PER_MB`` per MB of the state where it
    is applied: the mean of the snapshot sizes around it (after the last snapshot, the last size).
    """
    through: list[float] = []
    inputs, size, work = 0, 0, 0.0
    for b in boundaries:
        work += (b.inputs - inputs) * (INPUT_S + STATE_INPUT_S_PER_MB * (size + b.state_bytes) / 2 / _MB)
        through.append(work)
        inputs, size = b.inputs, b.state_bytes
    return through, work + max(0, total_inputs - inputs) * (INPUT_S + STATE_INPUT_S_PER_MB * size / _MB)


def range_cost(work_before: float, work_after: float, start: Boundary | None, end: Boundary | None) -> float:
    """Seconds a range takes: its inputs' work, restoring its start, hashing its end (None: the log's ends)."""
    cost = work_after - work_before
    if start is not None:
        cost += RESTORE_S_PER_MB * start.state_bytes / _MB
    if end is not None:
        cost += END_HASH_S_PER_MB * end.state_bytes / _MB
    return cost


def _considered(boundaries: list[Boundary], total_inputs: int) -> list[Boundary]:
    inside = [b for b in boundaries if 0 < b.inputs < total_inputs]
    step = -(-len(inside) // MAX_PLANNED_BOUNDARIES)
    return inside[step - 1 :: step] if step > 1 else inside


def plan_ranges(
    boundaries: list[Boundary], total_inputs: int, jobs: int, min_inputs: int = MIN_RANGE_INPUTS
) -> list[Range]:
    """The ranges whose slowest is fastest on the cost model (see the module docstring).

    ``boundaries`` are the usable snapshots in cycle order. A dynamic programme over the
    cut points: for each number of ranges and each point, the best way to reach it.
    """
    wanted = max(1, jobs * RANGES_PER_JOB)
    cuts = _considered(boundaries, total_inputs)
    through, total_work = estimated_work(cuts, total_inputs)
    # Points: 0 the start, 1..n the candidate cuts, n + 1 the end.
    points: list[Boundary | None] = [None, *cuts, None]
    inputs = [0, *(b.inputs for b in cuts), total_inputs]
    work = [0.0, *through, total_work]
    last = len(points) - 1

    def allowed(p: int, q: int) -> bool:
        if q == last:
            return True
        return inputs[q] - inputs[p] >= min_inputs and total_inputs - inputs[q] >= min_inputs // 2

    best: dict[int, _PlanKey] = {0: (0.0, 0.0, 0, ())}  # point → the best plan reaching it (ranges so far)
    answer: _PlanKey | None = None
    for _ in range(wanted):
        step: dict[int, _PlanKey] = {}
        for p, (slowest, squares, count, path) in best.items():
            for q in range(p + 1, last + 1):
                if not allowed(p, q):
                    continue
                cost = range_cost(work[p], work[q], points[p], points[q])
                cycles = path if q == last else (*path, _cycle(points[q]))
                key = (round(max(slowest, cost), 9), round(squares + cost * cost, 9), count + 1, cycles)
                if q == last:
                    answer = key if answer is None or key < answer else answer
                elif q not in step or key < step[q]:
                    step[q] = key
        best = step
    assert answer is not None  # one range, start to end, is always allowed
    by_cycle = {b.cycle: b for b in cuts}
    starts = [Boundary(0, 0), *(by_cycle[c] for c in answer[3])]
    ends: list[Boundary | None] = [*starts[1:], None]
    return [Range(i, start, end) for i, (start, end) in enumerate(zip(starts, ends, strict=True))]


def _cycle(point: Boundary | None) -> int:
    assert point is not None
    return point.cycle
