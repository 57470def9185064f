"""Conformance against apache/yunikorn-core v1.5.2: a sample of ``make conformance``.

Builds the Go harness (conformance/yunikorn) when Go is on the PATH; without Go the
sample skips with the reason, except under CI=true, where it fails. The families of
``conformance.known.KNOWN`` are left out (reason printed); any other disagreement must be
explained by a documented known difference (docs/conformance.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conformance.compare import Outcome, evsched_outcome, evsched_output, first_difference, parse_outcome
from conformance.generate import FAMILIES, TIMED, encode, generate
from conformance.known import KNOWN, too_small_asks, too_small_asks_dropped, victim_picked_twice
from conformance.run import agrees, harness_output, judge, report, run
from events.times import format_time, parse_time
from tests.go_harness import built_harness

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = 50


@pytest.fixture(scope="module")
def harness() -> Path:
    return built_harness("the yunikorn-core conformance sample")


def test_sample_agrees_except_known_differences(harness: Path, capsys: pytest.CaptureFixture[str]) -> None:
    families = [f for f in FAMILIES if f not in KNOWN]
    with capsys.disabled():
        for family, key in KNOWN.items():
            print(f"\nconformance: family {family} left out: known difference {key}")
    results = run(harness, SAMPLE, 0, families, None)
    text = report(results)
    assert not [r for r in results if r.new], text
    assert {r.family for r in results} == set(families)
    assert sum(r.difference is None for r in results) > len(results) // 2, text


def test_harness_decides_the_golden_fence_scenario_like_evsched(harness: Path) -> None:
    scenario = (ROOT / "tests" / "golden" / "scenarios" / "fence_and_offsets.jsonl").read_bytes()
    ours = evsched_outcome(scenario)
    theirs = parse_outcome(harness_output(harness, scenario))
    assert theirs.decisions == ours.decisions
    assert [d[2] for d in theirs.decisions] == ["s1", "q1", "q2", "e1", "e2"]
    # the last line is 5 minutes later in the log: yunikorn-core's 30 s Completing timer runs
    # on the log's clock too (evclock), so app shop is Completed and gone on both sides
    assert "shop" not in ours.state["apps"] and "shop" not in theirs.state["apps"]
    assert theirs.app_states["shop"][-2:] == ("Completing", "Completed") == ours.app_states["shop"][-2:]
    assert first_difference(ours, theirs) is None


def _at(seconds: float, line: dict[str, Any]) -> dict[str, Any]:
    return {**line, "time": format_time(round(seconds * 1_000_000))}


CLOCKED: list[dict[str, Any]] = [
    {"type": "config.updated", "data": {"yaml": "partitions:\n  - name: default\n    queues:\n      - name: root\n"
                                                "        submitacl: '*'\n        queues:\n          - name: a\n"}},
    {"type": "node.added", "data": {"node_id": "n1", "capacity": {"vcore": 4000, "memory": 4000}}},
    {"type": "node.added", "data": {"node_id": "n2", "capacity": {"vcore": 4000, "memory": 4000}}},
    {"type": "app.added", "data": {"app_id": "fill", "queue": "root.a", "user": "u"}},
    {"type": "ask.added", "data": {"app_id": "fill", "ask_id": "f1", "resources": {"vcore": 3000}, "priority": 2}},
    {"type": "ask.added", "data": {"app_id": "fill", "ask_id": "f2", "resources": {"vcore": 2000}, "priority": 1}},
    {"type": "schedule"},
    {"type": "app.added", "data": {"app_id": "big", "queue": "root.a", "user": "u"}},
    {"type": "ask.added", "data": {"app_id": "big", "ask_id": "b", "resources": {"vcore": 3000}}},
]


def _clocked(*tail: tuple[float, dict[str, Any]]) -> bytes:
    return encode([_at(i / 1000, line) for i, line in enumerate(CLOCKED)] + [_at(t, line) for t, line in tail])


def test_the_log_drives_yunikorns_clock(harness: Path) -> None:
    """The harness's yunikorn-core reads the log's time (conformance/patch_clock.py, evclock):
    the 2 s reservation delay (application.go:tryNodes, ``askAge > reservationDelay``) and the
    30 s Completing timer (application.go:setStateTimer) run out in log time, however fast
    the machine — each scenario runs in well under a second of wall time."""
    schedule: dict[str, Any] = {"type": "schedule"}
    early = parse_outcome(harness_output(harness, _clocked((1.9, schedule))))
    assert early.reservations == ()  # 1.9 s of log time: not yet
    late = parse_outcome(harness_output(harness, _clocked((2.1, schedule))))
    assert [r[0] for r in late.reservations] == ["reserved"]  # the cycle at 2.1 s reserves
    def release(app_id: str, ask_id: str) -> dict[str, Any]:
        return {"type": "allocation.released", "data": {"app_id": app_id, "ask_id": ask_id}}

    free: list[tuple[float, dict[str, Any]]] = [
        (2.1, schedule), (3.0, release("fill", "f1")), (3.0, release("fill", "f2")), (3.1, schedule),
        (4.0, release("big", "b"))]
    waiting = parse_outcome(harness_output(harness, _clocked(*free, (33.9, schedule))))
    assert waiting.app_states["big"][-1] == "Completing"  # 29.9 s after it ended
    done = parse_outcome(harness_output(harness, _clocked(*free, (34.1, schedule))))
    assert done.app_states["big"][-1] == "Completed" and "big" not in done.state["apps"]
    for scenario in (_clocked((1.9, schedule)), _clocked((2.1, schedule)), _clocked(*free, (34.1, schedule))):
        assert agrees(harness, scenario)


def test_harness_reports_a_changed_decision(harness: Path) -> None:
    lines = generate("fences", 3)
    assert agrees(harness, encode(lines))
    # one more node, sorting first: both sides still decide alike...
    node = {"type": "node.added", "data": {"node_id": "a0", "capacity": {"vcore": 64000, "memory": 64000}}}
    bigger = [lines[0], node, *lines[1:]]
    assert agrees(harness, encode(bigger))
    # ...and a decision the harness did not make is a difference
    theirs = parse_outcome(harness_output(harness, encode(lines)))
    assert theirs.decisions
    changed = Outcome(theirs.decisions[1:], theirs.state)
    assert first_difference(parse_outcome(evsched_output(encode(lines))), changed) is not None


def test_generator_is_deterministic_and_tie_free() -> None:
    for family in FAMILIES:
        a, b = generate(family, 11), generate(family, 11)
        assert a == b
        priorities = [line["data"]["priority"] for line in a if line["type"] == "ask.added"]
        assert len(priorities) == len(set(priorities)) and 0 not in priorities
        conf = json.loads(a[0]["data"]["yaml"])
        assert conf["partitions"][0]["queues"][0]["name"] == "root"


def test_first_difference_names_the_state_field() -> None:
    state = {"apps": {"a": {"state": "Running"}}, "queues": {}, "nodes": {}}
    other = {"apps": {"a": {"state": "Starting"}}, "queues": {}, "nodes": {}}
    diff = first_difference(Outcome((), state), Outcome((), other))
    assert diff == 'state apps.a.state: evsched "Running", yunikorn "Starting"'
    assert first_difference(Outcome((), state), Outcome((), state)) is None


def test_harness_preempts_like_evsched_in_the_golden_preemption_scenario(harness: Path) -> None:
    """yunikorn-core v1.5.2 picks the same single victim (f3 on n1) for the under-guarantee
    ``PreemptLowerPriority`` ask, and allocates the ask there once f3 is released."""
    scenario = (ROOT / "tests" / "golden" / "scenarios" / "preemption.jsonl").read_bytes()
    ours = parse_outcome(evsched_output(scenario))
    theirs = parse_outcome(harness_output(harness, scenario))
    assert theirs.decisions == ours.decisions
    assert [(d[2], d[3]) for d in theirs.decisions if d[1] != "be"] == [("c1", "n1")]
    assert [d[2] for d in theirs.decisions if d[3] == "(preempted)"] == ["f3"]


def test_known_required_node_difference_drops_only_the_asks_that_can_never_fit() -> None:
    """known.py narrows required-node-too-small to its cause: an ask whose required node never
    has the capacity for it goes; one whose node is merely busy, or grows, stays."""
    lines: list[dict[str, Any]] = [
        {"type": "node.added", "data": {"node_id": "n1", "capacity": {"vcore": 2000}}},
        {"type": "node.added", "data": {"node_id": "n2", "capacity": {"vcore": 2000}}},
        {"type": "node.updated", "data": {"node_id": "n2", "capacity": {"vcore": 8000}}},
        {"type": "ask.added", "data": {"app_id": "a", "ask_id": "never", "resources": {"vcore": 4000},
                                       "required_node": "n1"}},
        {"type": "ask.added", "data": {"app_id": "a", "ask_id": "later", "resources": {"vcore": 4000},
                                       "required_node": "n2"}},
        {"type": "ask.added", "data": {"app_id": "a", "ask_id": "fits", "resources": {"vcore": 1000},
                                       "required_node": "n1"}},
        {"type": "allocation.released", "data": {"app_id": "a", "ask_id": "never"}},
    ]
    assert too_small_asks(lines) == {("a", "never")}
    kept = [line["data"].get("ask_id") for line in too_small_asks_dropped(lines)]
    assert kept == [None, None, None, "later", "fits"]


def test_a_victim_picked_twice_is_recognised_in_yunikorns_outcome() -> None:
    ours = Outcome(((1, "a", "k1", "n1"), (2, "a", "k1", "(preempted)"), (3, "b", "k2", "(preempted)")), {})
    theirs = Outcome(((1, "a", "k1", "n1"), (2, "a", "k1", "(preempted)"), (3, "a", "k1", "(preempted)")), {})
    assert victim_picked_twice(ours, theirs)
    assert not victim_picked_twice(ours, ours)
    earlier = Outcome(((1, "a", "k1", "n2"), *theirs.decisions[1:]), {})  # they differ before: not this cause
    assert not victim_picked_twice(earlier, theirs)


def test_time_driven_families_span_minutes_to_hours_of_log_time() -> None:
    """Every line carries its log time, never going back; the TIMED families pass the 2 s
    reservation delay in every scenario and 5 minutes (Starting -> Running) in most, up to
    hours."""
    spans: list[float] = []
    for family in FAMILIES:
        for seed in range(20):
            times = [parse_time(line["time"]) for line in generate(family, seed)]
            assert times == sorted(times), (family, seed)
            if family in TIMED:
                spans.append((times[-1] - times[0]) / 1e6)
    assert min(spans) > 2
    assert sum(span > 300 for span in spans) > len(spans) // 2
    assert max(spans) > 3600


def test_a_reserved_asks_map_order_tie_is_judged_undecided_not_new(harness: Path) -> None:
    """``preemption-delay`` seed 73: yunikorn-core walks an app's three reservations in Go map
    order (``tryReservedAllocate``) and shows evsched's order (ask order) about one run in 8;
    the judge runs the harness until it does (docs/conformance.md, *Ties*)."""
    scenario = encode(generate("preemption-delay", 73))
    difference, known, undecided = judge(scenario, lambda s: parse_outcome(harness_output(harness, s)))
    assert difference is None and known is None
    assert undecided in (0, 2)  # 0: yunikorn happened to give evsched's outcome in every run
