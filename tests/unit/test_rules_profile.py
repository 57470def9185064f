"""Rules profiles (docs/semantics.md#rules-profiles): the partition-level ``rules`` key picks
YuniKorn 1.5's or 1.9's rules; the default keeps every log as it was; each cycle records the
profiles it ran under, and replay re-derives each cycle under its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from projections.policies import fair_max_share
from replay.reader import open_file_log
from replay.verify import verify
from scheduler.config import ConfigError, load_config
from scheduler.config.profiles import RulesProfile
from tests.explain_logdrive import LogDriver
from tests.sim import SCHEDULE, app, ask, node, of_type, run


def config(rules: str = "", leaf_props: str = "") -> str:
    rules_line = f"    rules: {rules}\n" if rules else ""
    return f"""
partitions:
  - name: default
{rules_line}    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            properties: {{{leaf_props}}}
          - name: b
          - name: default
"""


def decisions(outputs: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(d["ask_id"], d["cycle"]) for d in of_type(outputs, "allocation.decided")]


def test_the_key_parses_defaults_and_refuses_what_it_does_not_know() -> None:
    assert load_config(config()).partitions[0].rules is RulesProfile.YUNIKORN_1_5
    assert load_config(config("yunikorn-1.5")).partitions[0].rules is RulesProfile.YUNIKORN_1_5
    assert load_config(config("yunikorn-1.9")).partitions[0].rules is RulesProfile.YUNIKORN_1_9
    with pytest.raises(ConfigError) as caught:
        load_config(config("yunikorn-2.0"))
    assert any("rules" in r and "'yunikorn-2.0'" in r and "yunikorn-1.9" in r for r in caught.value.reasons)


def two_queues_one_at_a_time() -> list[dict[str, Any]]:
    """a uses 10% of the vcores and 20% of the memory, b 50% and 1%: 1.5 compares raw usage
    (b's 5,000 < a's 20,000, b first), 1.9 shares of the cluster (a's 0.2 < b's 0.5, a first)."""
    return [
        node("n1", vcore=10_000, memory=100_000), app("A", "root.a"), app("B", "root.b"),
        ask("A", "a1", vcore=1000, memory=20_000), ask("B", "b1", vcore=5000, memory=1000), SCHEDULE,
        ask("A", "a2", vcore=100, memory=100), ask("B", "b2", vcore=100, memory=100),
        {**SCHEDULE, "data": {"max_allocations": 1}}, SCHEDULE,
    ]


def test_the_fair_queue_order_is_1_9s_share_of_the_fair_max() -> None:
    before, _ = run(two_queues_one_at_a_time(), config())
    after, _ = run(two_queues_one_at_a_time(), config("yunikorn-1.9"))
    assert decisions(before) == [("a1", 1), ("b1", 1), ("b2", 2), ("a2", 3)]
    assert decisions(after) == [("a1", 1), ("b1", 1), ("a2", 2), ("b2", 3)]


def test_fair_max_share_follows_get_fair_share() -> None:
    # guarantee first, the fair max where none; a zero denominator counts 1.0 when used
    assert fair_max_share({"vcore": 2000, "memory": 10}, {"vcore": 4000}, {"memory": 100}) == (0.5,)
    assert fair_max_share({"vcore": 2000, "gpu": 1}, {}, {"vcore": 8000, "gpu": 0}) == (1.0,)
    assert fair_max_share({"gpu": 0}, {}, {"gpu": 0}) == (0.0,)
    assert fair_max_share({"vcore": 2000}, {}, {}) == (0.0,)  # neither: the type counts nothing
    assert fair_max_share({"vcore": -5, "memory": 30}, {}, {"vcore": 1, "memory": 60}) == (0.5,)


def test_a_queue_max_overrides_the_cluster_in_the_fair_max() -> None:
    capped = config("yunikorn-1.9").replace("          - name: b\n",
                                            "          - name: b\n            resources: {max: {vcore: 100m}}\n")
    lines = [
        node("n1", vcore=10_000, memory=100_000), app("A", "root.a"), app("B", "root.b"),
        ask("A", "a1", vcore=3000, memory=1000), ask("B", "b1", vcore=60, memory=1000), SCHEDULE,
        ask("A", "a2", vcore=10, memory=10), ask("B", "b2", vcore=10, memory=10),
        {**SCHEDULE, "data": {"max_allocations": 1}},
    ]
    # a: 3 of 10 vcores (0.3); b: 60m of its own 100m max (0.6) — a goes first; without
    # b's max, b's share is 60m of the cluster's 10 (0.006) and b goes first
    outputs, _ = run(lines, capped)
    assert decisions(outputs)[2:] == [("a2", 2), ("b2", 3)]
    outputs, _ = run(lines, config("yunikorn-1.9"))
    assert decisions(outputs)[2:] == [("b2", 2), ("a2", 3)]


def test_no_starting_state_under_1_9() -> None:
    lines = [node("n1"), app("A", "root.a"), ask("A", "a1"), ask("A", "a2"), SCHEDULE]
    before, _ = run(lines, config())
    after, _ = run(lines, config("yunikorn-1.9"))
    changes = [(c["from"], c["to"]) for c in of_type(before, "app.state_changed")]
    assert changes == [("New", "Accepted"), ("Accepted", "Starting"), ("Starting", "Running")]
    assert [(c["from"], c["to"]) for c in of_type(after, "app.state_changed")] == [("New", "Accepted"),
                                                                                 ("Accepted", "Running")]


def test_stateaware_schedules_as_fifo_under_1_9() -> None:
    lines = [node("n1", vcore=8000, memory=8000), app("A", "root.a"), app("B", "root.a"),
             ask("A", "a1"), ask("B", "b1"), SCHEDULE]
    props = "application.sort.policy: stateaware"
    before, _ = run(lines, config(leaf_props=props))
    after, _ = run(lines, config("yunikorn-1.9", leaf_props=props))
    assert decisions(before) == [("a1", 1)]  # B waits while A is Starting
    assert decisions(after) == [("a1", 1), ("b1", 1)]


def test_placement_falls_back_to_root_default_under_1_9() -> None:
    lines = [node("n1"), app("A", "root.nope"), ask("A", "a1"), SCHEDULE]
    before, _ = run(lines, config())
    after, _ = run(lines, config("yunikorn-1.9"))
    assert [r["reason"] for r in of_type(before, "input.rejected")] == ["unknown-queue", "unknown-app"]
    assert of_type(after, "input.rejected") == []
    assert [(p["app_id"], p["queue"]) for p in of_type(after, "app.placed")] == [("A", "root.default")]
    assert decisions(after) == [("a1", 1)]


def test_placement_skips_a_draining_queue_under_1_9() -> None:
    without_a = config("yunikorn-1.9").replace("          - name: a\n            properties: {}\n", "")
    lines = [node("n1"), app("A", "root.a"), ask("A", "a1"), SCHEDULE,
             {"type": "config.updated", "data": {"yaml": without_a}}, app("B", "root.a"), SCHEDULE]
    outputs, _ = run(lines, config("yunikorn-1.9"))
    assert [(p["app_id"], p["queue"]) for p in of_type(outputs, "app.placed")] == [
        ("A", "root.a"), ("B", "root.default")]


def test_each_cycle_records_its_profiles_only_when_not_the_default() -> None:
    lines = [node("n1"), app("A", "root.a"), ask("A", "a1"), SCHEDULE,
             {"type": "config.updated", "data": {"yaml": config("yunikorn-1.9")}}, ask("A", "a2"), SCHEDULE,
             {"type": "config.updated", "data": {"yaml": config("yunikorn-1.5")}}, SCHEDULE]
    outputs, _ = run(lines, config())
    completed = of_type(outputs, "cycle.completed")
    assert ["profiles" in c for c in completed][:3] == [False, True, False]
    assert completed[1]["profiles"] == {"default": "yunikorn-1.9"}


def test_replay_verify_rederives_each_cycle_under_its_own_profile(tmp_path: Path) -> None:
    with LogDriver(tmp_path / "log", config()) as drv:
        drv.submit(*two_queues_one_at_a_time()[:5])
        drv.cycle()
        drv.submit({"type": "config.updated", "data": {"yaml": config("yunikorn-1.9")}},
                   ask("A", "a2", vcore=100, memory=100), ask("B", "b2", vcore=100, memory=100))
        drv.cycle()
        drv.cycle()
    with open_file_log(tmp_path / "log") as source:
        report = verify(source)
    assert report.ok and report.cycles == 3
