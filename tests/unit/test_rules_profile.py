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
from tests.sim import SCHEDULE, app, ask, node, of_type, root_queues, run


def config(rules: str = "", leaf_props: str = "") -> str:
    return root_queues(f"""
        - name: a
          properties: {{{leaf_props}}}
        - name: b
        - name: default
    """, partition=f"rules: {rules}" if rules else "")


def decisions(outputs: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(d["ask_id"], d["cycle"]) for d in of_type(outputs, "allocation.decided")]


def test_the_key_parses_defaults_and_refuses_what_it_does_not_know() -> None:
    assert load_config(config()).partitions[0].rules is RulesProfile.YUNIKORN_1_5
    assert load_config(config("yunikorn-1.5")).partitions[0].rules is RulesProfile.YUNIKORN_1_5
    assert load_config(config("yunikorn-1.9")).partitions[0].rules is RulesProfile.YUNIKORN_1_9
    with pytest.raises(ConfigError) as caught:
        load_config(config("yunikorn-2.0"))
    assert any("rules" in r and "'yunikorn-2.0'" in r and "yunikorn-1.9" in r for r in caught.value.reasons)


def then_one_each(capacity: dict[str, int], a1: dict[str, int], b1: dict[str, int]) -> list[dict[str, Any]]:
    """Node n1 of ``capacity``; apps A (root.a) and B (root.b) placed a1 and b1 in one cycle; then
    a2 and b2 (100/100 each), one decision a cycle: the fair queue order says which goes first."""
    return [
        node("n1", **capacity), app("A", "root.a"), app("B", "root.b"),
        ask("A", "a1", **a1), ask("B", "b1", **b1), SCHEDULE,
        ask("A", "a2", vcore=100, memory=100), ask("B", "b2", vcore=100, memory=100),
        {**SCHEDULE, "data": {"max_allocations": 1}}, SCHEDULE,
    ]


def two_queues_one_at_a_time() -> list[dict[str, Any]]:
    """a uses 10% of the vcores and 20% of the memory, b 50% and 1%: 1.5 compares raw usage
    (b's 5,000 < a's 20,000, b first), 1.9 shares of the cluster (a's 0.2 < b's 0.5, a first)."""
    return then_one_each({"vcore": 10_000, "memory": 100_000}, {"vcore": 1000, "memory": 20_000},
                         {"vcore": 5000, "memory": 1000})


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


def test_an_unknown_required_node_passes_to_the_next_ask_under_1_9() -> None:
    lines = [node("n1"), app("A", "root.a"), ask("A", "a1", priority=10, required_node="later"),
             ask("A", "a2", priority=5), SCHEDULE]
    before, _ = run(lines, config())
    after, _ = run(lines, config("yunikorn-1.9"))
    assert decisions(before) == []  # 1.5: the app's turn ends at a1 (tryAllocate returns nil)
    assert decisions(after) == [("a2", 1)]  # 1.9: tryRequiredNode returns nil, tryAllocate continues


def test_whatif_previews_the_upgrade_to_1_9(tmp_path: Path) -> None:
    from replay.whatif import whatif

    with LogDriver(tmp_path / "log", config()) as drv:
        drv.submit(*two_queues_one_at_a_time()[:5])
        drv.cycle()
        drv.submit(ask("A", "a2", vcore=100, memory=100), ask("B", "b2", vcore=100, memory=100))
        drv.cycle()
        drv.submit(app("C", "root.nope"), ask("C", "c1", vcore=100, memory=100))
        drv.cycle()
    with open_file_log(tmp_path / "log") as source:
        report = whatif(source, None, profile=RulesProfile.YUNIKORN_1_9)
    assert report.recorded_profiles == {"yunikorn-1.5": 3}
    # cycle 2: b2 went first under 1.5, a2 under 1.9; cycle 3: C lands in root.default instead of being refused
    assert report.queue_orders() == [(2, ["root.b", "root.a"], ["root.a", "root.b"]), (3, [], ["root.default"])]
    text = "\n".join(report.lines())
    made = "the cycles were made under yunikorn-1.5: 3 cycles"
    assert f"rules profile: every partition under yunikorn-1.9; {made}" in text
    assert "  C/c1: not placed -> cycle 3 on n1 in root.default" in text
    assert "  cycle 2: root.b > root.a  ->  root.a > root.b" in text
    assert report.rejections_before > report.rejections_after
    assert ("Accepted > Starting > Running", "Accepted > Running", 2) in report.state_changes()  # A and B
    assert "  2 apps: Accepted > Starting > Running  ->  Accepted > Running" in text
    with open_file_log(tmp_path / "log") as source:
        same = whatif(source, None, profile=RulesProfile.YUNIKORN_1_5)
    assert same.differing() == 0 and same.queue_orders() == []


def test_the_page_and_explain_name_the_profile(tmp_path: Path) -> None:
    from replay.explain.from_log import explain_from_log
    from replay.explain.text import render_explanation
    from scheduler.core.engine import Engine
    from scheduler.http.views import partitions_view

    assert partitions_view(Engine(load_config(config("yunikorn-1.9"))))[0]["rulesProfile"] == "yunikorn-1.9"
    assert partitions_view(Engine(load_config(config())))[0]["rulesProfile"] == "yunikorn-1.5"
    with LogDriver(tmp_path / "log", config("yunikorn-1.9")) as drv:
        drv.submit(*two_queues_one_at_a_time()[:5])
        drv.cycle()
    with open_file_log(tmp_path / "log") as source:
        explanation = explain_from_log(source, "default-1-1")
    assert explanation.verified and explanation.profile == "yunikorn-1.9"
    assert "Rules profile: yunikorn-1.9 (docs/semantics.md#rules-profiles)" in render_explanation(explanation)


def at(seconds: float) -> str:
    from events.times import format_time

    return format_time(int(seconds * 1_000_000))


def held_past_the_headroom() -> list[dict[str, Any]]:
    """a3 reserves n1 at 3 s (no node has 2 cores free; the cluster has); then n2 shrinks and the
    cluster's headroom is 1 core: a3 no longer fits it, and its reservation ages."""
    return [
        {**node("n1", vcore=4000), "time": at(0)}, {**node("n2", vcore=4000), "time": at(0)},
        {**app("A", "root.a"), "time": at(0)},
        {**ask("A", "a1", vcore=3000, priority=3), "time": at(0)},
        {**ask("A", "a2", vcore=3000, priority=2), "time": at(0)},
        {**ask("A", "a3", vcore=2000, priority=1), "time": at(0)}, {**SCHEDULE, "time": at(0)},
        {**SCHEDULE, "time": at(3)},
        {"type": "node.updated", "data": {"node_id": "n2", "capacity": {"vcore": 3000, "memory": 4000}}, "time": at(4)},
        {**SCHEDULE, "time": at(3 + 3600)}, {**SCHEDULE, "time": at(3.1 + 3600)},
    ]


def test_a_reservation_short_of_headroom_ends_after_60_minutes_of_log_time_under_1_9() -> None:
    before, _ = run(held_past_the_headroom(), config())
    after, _ = run(held_past_the_headroom(), config("yunikorn-1.9"))
    assert [(r["ask_id"], r["node_id"]) for r in of_type(before, "ask.reserved")] == [("a3", "n1")]
    assert of_type(before, "ask.unreserved") == []  # 1.5 has no timeout
    cycles = {o["id"].split("-")[0] for o in after if o["type"] == "ask.unreserved"}
    assert [(r["ask_id"], r["reason"]) for r in of_type(after, "ask.unreserved")] == [("a3", "timeout")]
    assert cycles == {"4"}  # exactly 60 minutes after the reservation (cycle 3) is not yet past it


def test_replay_verifies_and_recovery_folds_a_reservation_timeout(tmp_path: Path) -> None:
    from scheduler.core.snapshot import dump, load

    lines = held_past_the_headroom()
    with LogDriver(tmp_path / "log", config("yunikorn-1.9")) as drv:
        for line in lines:
            if line["type"] == "schedule":
                drv.now_us = max(drv.now_us, int(parse_seconds(line["time"]) * 1_000_000)) - 1000
                drv.cycle()
                if drv.engine.cycle_number == 2:
                    held = load(dump(drv.engine))  # the snapshot keeps the reservation's log time
                    assert held.state.partitions["default"].apps["A"].asks["a3"].reserved_us > 0
            else:
                drv.submit({k: v for k, v in line.items() if k != "time"})
    with open_file_log(tmp_path / "log") as source:
        report = verify(source)
        unreserved = [r.value for r in source.iter_outputs() if b"ask.unreserved" in r.value]
    assert report.ok and report.cycles == 4
    assert len(unreserved) == 1 and b'"timeout"' in unreserved[0]


def parse_seconds(text: str) -> float:
    from events.times import parse_time

    return parse_time(text) / 1_000_000


def test_config_check_warns_that_stateaware_is_fifo_under_1_9() -> None:
    from scheduler.config.check import check_config

    props = "application.sort.policy: stateaware"
    code, lines = check_config(config("yunikorn-1.9", leaf_props=props).encode())
    assert code == 0 and any("stateaware is fifo under the rules profile yunikorn-1.9" in line for line in lines)
    code, lines = check_config(config(leaf_props=props).encode())
    assert code == 0 and not any("stateaware" in line for line in lines)


def test_the_reservation_timeout_is_checked_after_each_step_too() -> None:
    lines = [*held_past_the_headroom()[:8],  # a3 holds n1 since 3 s; the cluster's headroom is 2 cores
             {**app("B", "root.b"), "time": at(3700)},
             {**ask("B", "b1", vcore=1000, priority=9), "time": at(3700)},  # fits n2, leaves 1 core of headroom
             {**SCHEDULE, "time": at(3700)}]
    outputs, _ = run(lines, config("yunikorn-1.9"))
    ends = [(o["id"].split("-")[0], o["data"]["ask_id"], o["data"]["reason"])
            for o in outputs if o["type"] == "ask.unreserved"]
    assert decisions(outputs)[-1] == ("b1", 3)
    assert ends == [("3", "a3", "timeout")]  # in the cycle that opened with enough headroom for a3
