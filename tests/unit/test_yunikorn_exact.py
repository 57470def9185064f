"""Rules where the core follows YuniKorn v1.5.2 exactly (the audit's findings), one test each."""

from __future__ import annotations

from tests.sim import SCHEDULE, app, ask, node, of_type, placements, root_queues, run

FAIR_NO_PRIORITY = root_queues("""
          - name: a
            properties: {application.sort.policy: fair, application.sort.priority: disabled}
""")


def test_fair_with_priority_disabled_sorts_by_share_then_priority() -> None:
    """YuniKorn ``sorters.go:sortApplicationsByFairnessAndPriority``: (usage share, priority), no
    submission time in between — the younger P5 app goes before the older P0 app at equal share."""
    lines = [node("n1", vcore=1000, memory=1000), app("old", "root.a"), app("young", "root.a"),
             ask("old", "o1", priority=0), ask("young", "y1", priority=5), SCHEDULE]
    outputs, _ = run(lines, FAIR_NO_PRIORITY)
    assert placements(outputs) == [("y1", "n1")]


def test_fair_with_priority_disabled_share_still_comes_first() -> None:
    """YuniKorn ``sortApplicationsByFairnessAndPriority``: a lower share wins over a higher priority."""
    lines = [node("n1", vcore=3000, memory=3000), app("busy", "root.a"), app("idle", "root.a"),
             ask("busy", "b0"), {**SCHEDULE, "data": {"max_allocations": 1}},
             ask("busy", "b1", priority=9), ask("idle", "i1", priority=0),
             {**SCHEDULE, "data": {"max_allocations": 1}}]
    outputs, _ = run(lines, FAIR_NO_PRIORITY)
    assert placements(outputs)[:2] == [("b0", "n1"), ("i1", "n1")]
