"""yunikorn-1.9 queue rules beyond the fair order itself: an explicit zero guarantee in the fair
share (``resources.go:getFairShare``, ``queue.go:setResources``) and the unschedulable-ask
backoff (``application.go:tryAllocate``, ``queue.go:TryAllocate``; docs/semantics.md#yunikorn-19)."""

from __future__ import annotations

from typing import Any

from scheduler.config import load_config
from tests.sim import SCHEDULE, app, ask, node, of_type, root_queues, run
from tests.unit.test_rules_profile import decisions, then_one_each


def config(rules: str, a_guaranteed: str, a_props: str = "", b_props: str = "") -> str:
    return root_queues(f"""
        - name: a
          resources: {{guaranteed: {a_guaranteed}}}
          properties: {{{a_props}}}
        - name: b
          properties: {{{b_props}}}
    """, partition=f"rules: {rules}")


def test_a_zero_beside_a_positive_guarantee_is_kept_for_the_fair_share() -> None:
    def leaf_a(guaranteed: str) -> Any:
        return load_config(config("yunikorn-1.9", guaranteed)).partitions[0].root.children[0]

    kept = leaf_a("{vcore: 16, memory: 0}")
    assert dict(kept.guaranteed) == {"vcore": 16_000} and kept.zero_guaranteed == ("memory",)
    # zeros only: YuniKorn ignores the guarantee (StrictlyGreaterThanZero), so no type is kept
    assert leaf_a("{memory: 0}").zero_guaranteed == () and dict(leaf_a("{memory: 0}").guaranteed) == {}
    assert leaf_a("{vcore: 16}").zero_guaranteed == ()


def used_memory_guaranteed_zero() -> list[dict[str, Any]]:
    """a holds 100m/100 of a 16-core node, b 200m/200; a's guarantee is 16 cores and memory 0.
    Without the zero a's share is 100/16000 (its vcore or memory against the fair max) and b's
    200/16000: a goes first. With it a's memory counts 1.0 under 1.9: b goes first."""
    return then_one_each({"vcore": 16_000, "memory": 16_000}, {"vcore": 100, "memory": 100},
                         {"vcore": 200, "memory": 200})


def test_under_1_9_a_used_type_guaranteed_zero_counts_one_in_the_fair_share() -> None:
    after, _ = run(used_memory_guaranteed_zero(), config("yunikorn-1.9", "{vcore: 16, memory: 0}"))
    assert decisions(after)[2:] == [("b2", 2), ("a2", 3)]
    without_zero, _ = run(used_memory_guaranteed_zero(), config("yunikorn-1.9", "{vcore: 16}"))
    assert decisions(without_zero)[2:] == [("a2", 2), ("b2", 3)]
    # 1.5 reads a zero guarantee as none (getShares: a total of 0 gives the raw usage)
    before, _ = run(used_memory_guaranteed_zero(), config("yunikorn-1.5", "{vcore: 16, memory: 0}"))
    plain, _ = run(used_memory_guaranteed_zero(), config("yunikorn-1.5", "{vcore: 16}"))
    assert decisions(before) == decisions(plain)


def at(seconds: float, line: dict[str, Any]) -> dict[str, Any]:
    from events.times import format_time

    return {**line, "time": format_time(int(seconds * 1_000_000))}


BACKOFF = "application.unschedasks.backoff: '1', application.unschedasks.backoff.delay: 10s"


def one_too_big_then_a_small_one() -> list[dict[str, Any]]:
    """a1 (first by priority) fits the cluster's headroom but no node, a2 fits: with a backoff of
    1 the app backs off at a1 for 10 s (a2 is a further request)."""
    return [
        at(0, node("n1", vcore=2000, memory=2000)), at(0, node("n2", vcore=2000, memory=2000)),
        at(0, app("A", "root.a")),
        at(0, ask("A", "a1", vcore=3000, memory=100, priority=10)), at(0, ask("A", "a2", vcore=500, memory=100)),
        at(0.5, SCHEDULE), at(5, SCHEDULE), at(11, SCHEDULE),
    ]


def test_under_1_9_an_app_backs_off_after_its_unschedulable_asks() -> None:
    outs, _ = run(one_too_big_then_a_small_one(), config("yunikorn-1.9", "{vcore: 1}", a_props=BACKOFF))
    # at 0.5 s until 10.5 s; skipped at 5 s; at 11 s a1 (no node could ever hold it, none to
    # reserve) counts again: until 21 s
    assert of_type(outs, "app.backed_off") == [{"app_id": "A", "asks": 1, "until": "1970-01-01T00:00:10.500000Z"},
                                               {"app_id": "A", "asks": 1, "until": "1970-01-01T00:00:21Z"}]
    assert [d for d in decisions(outs) if d[0] == "a2"] == []
    # the backoff is 1.9's (YUNIKORN-3115): 1.5 has none, and off (the default) nothing waits
    for rules, props in (("yunikorn-1.5", BACKOFF), ("yunikorn-1.9", "")):
        outs, _ = run(one_too_big_then_a_small_one(), config(rules, "{vcore: 1}", a_props=props))
        assert of_type(outs, "app.backed_off") == [] and ("a2", 1) in decisions(outs)


def test_the_backoff_is_inherited_and_counts_only_asks_no_node_takes() -> None:
    # set on root, read by the leaf; a1 over the queue's headroom (a max) does not count
    root_props = config("yunikorn-1.9", "{vcore: 1}").replace(
        "        submitacl: '*'\n", f"        submitacl: '*'\n        properties: {{{BACKOFF}}}\n")
    outs, _ = run(one_too_big_then_a_small_one(), root_props)
    assert [d["app_id"] for d in of_type(outs, "app.backed_off")] == ["A", "A"]
    capped = root_props.replace("resources: {guaranteed: {vcore: 1}}", "resources: {max: {vcore: 2}}")
    outs, _ = run(one_too_big_then_a_small_one(), capped)
    assert of_type(outs, "app.backed_off") == [] and ("a2", 1) in decisions(outs)


def test_no_backoff_when_nothing_follows_the_unschedulable_ask() -> None:
    # a2 first (higher priority) is placed; a1, the last request (a2's allocation sorts before it), fails
    lines = one_too_big_then_a_small_one()
    lines[4] = at(0, ask("A", "a2", vcore=500, memory=100, priority=20))
    outs, _ = run(lines, config("yunikorn-1.9", "{vcore: 1}", a_props=BACKOFF))
    assert of_type(outs, "app.backed_off") == [] and decisions(outs)[0] == ("a2", 1)


def test_backoff_values_are_checked_and_a_1_5_partition_is_warned() -> None:
    from scheduler.config.properties import property_problems

    errors, _ = property_problems(load_config(config("yunikorn-1.9", "{vcore: 1}", a_props=(
        "application.unschedasks.backoff: '-1', application.unschedasks.backoff.delay: '0s'"))))
    assert errors == [
        "queue root.a: application.unschedasks.backoff: '-1' is not a whole number from 0 (off) to "
        "18446744073709551615",
        "queue root.a: application.unschedasks.backoff.delay: '0s' is not a positive Go duration such as "
        "\"30s\" or \"1m30s\""]
    _, warnings = property_problems(load_config(config("yunikorn-1.5", "{vcore: 1}", a_props=BACKOFF)))
    assert any("read only under the rules profile yunikorn-1.9" in w for w in warnings)
    spec = load_config(config("yunikorn-1.9", "{vcore: 1}", a_props=BACKOFF)).partitions[0].root.children[0]
    assert (spec.unsched_backoff, spec.backoff_delay_us) == (1, 10_000_000)
    bad = load_config(config("yunikorn-1.9", "{vcore: 1}", a_props=(
        "application.unschedasks.backoff: x, application.unschedasks.backoff.delay: soon")))
    assert (bad.partitions[0].root.children[0].unsched_backoff,
            bad.partitions[0].root.children[0].backoff_delay_us) == (0, 30_000_000)  # as YuniKorn: off, 30 s


def test_a_backed_off_log_folds_snapshots_and_verifies(tmp_path: Any) -> None:
    from replay.reader import open_file_log
    from replay.verify import verify
    from scheduler.core import snapshot
    from tests.unit.test_fact_fold import START_US, _live_and_recovered, _next_cycle

    lines = one_too_big_then_a_small_one()[:-3]
    records = [{"id": f"i{n}", "source": "rm", "type": line["type"], "time": line["time"], "data": line["data"]}
               for n, line in enumerate(lines)]
    for r in records:
        r["time"] = r["time"].replace("1970-01-01", "2001-09-09")  # after START_US
    live, recovered, _ = _live_and_recovered(records, 10, 1_000, config("yunikorn-1.9", "{vcore: 1}", a_props=BACKOFF))
    app = live.state.partitions["default"].apps["A"]
    assert app.backoff_until_us > START_US
    assert recovered.digest_mismatches == []
    assert snapshot.dump(recovered.engine) == snapshot.dump(live)
    assert snapshot.dump(snapshot.load(snapshot.dump(live))) == snapshot.dump(live)
    assert _next_cycle(recovered.engine) == _next_cycle(live)
    from tests.explain_logdrive import LogDriver

    with LogDriver(tmp_path / "log", config("yunikorn-1.9", "{vcore: 1}", a_props=BACKOFF)) as drv:
        drv.submit(*[{k: v for k, v in line.items() if k != "time"} for line in lines])
        drv.cycle()
        drv.cycle()
    with open_file_log(tmp_path / "log") as source:
        assert verify(source).ok


def several_asks_requiring_one_node() -> list[dict[str, Any]]:
    """x1 fills n1 to 1 core free (n2 gives the cluster headroom); a1 and b1 (2 cores each)
    require n1, c1 (half a core) too; then x1 ends."""
    return [
        node("n1", vcore=4000, memory=4000), node("n2", vcore=8000, memory=8000), app("X", "root.b"),
        ask("X", "x1", vcore=3000, memory=100, required_node="n1"),
        SCHEDULE,
        app("A", "root.a"), app("B", "root.b"), app("C", "root.b"),
        ask("A", "a1", vcore=2000, memory=100, required_node="n1"),
        ask("B", "b1", vcore=2000, memory=100, required_node="n1"),
        ask("C", "c1", vcore=500, memory=100, required_node="n1"),
        SCHEDULE,
        {"type": "allocation.released", "data": {"app_id": "X", "ask_id": "x1"}}, SCHEDULE,
    ]


def test_under_1_9_several_required_node_asks_reserve_one_node() -> None:
    after, state = run(several_asks_requiring_one_node(), config("yunikorn-1.9", "{vcore: 1}"))
    # 1.9 (node.go:Reserve allows several required-node reservations; tryRequiredNode reserves a
    # node other required-node asks hold even when the ask fits: tryNode refuses a node reserved
    # for another ask): a1, b1 and c1 all hold n1; c1, reserved, fits and is placed by the
    # reserved step; once x1 ends a1 goes, and b1 (no longer fitting) still holds n1
    assert [(d["ask_id"], d["node_id"]) for d in of_type(after, "ask.reserved")] == [
        ("a1", "n1"), ("b1", "n1"), ("c1", "n1")]
    assert decisions(after) == [("x1", 1), ("c1", 2), ("a1", 3)]
    assert [(d["ask_id"], d["reason"]) for d in of_type(after, "ask.unreserved")] == [
        ("c1", "allocated"), ("a1", "allocated")]
    assert state["nodes"]["n1"]["reserved_for"] == "B/b1"
    before, state = run(several_asks_requiring_one_node(), config("yunikorn-1.5", "{vcore: 1}"))
    # 1.5: one reservation per node; an app whose required node another required-node ask holds ends its turn
    # in cycle 2 (b1, c1 wait); in cycle 3 a1 and b1 fill n1 and c1 reserves it
    assert [d["ask_id"] for d in of_type(before, "ask.reserved")] == ["a1", "c1"]
    assert decisions(before) == [("x1", 1), ("a1", 3), ("b1", 3)]


def test_shared_reservations_fold_snapshot_and_end_with_their_node(tmp_path: Any) -> None:
    from events.times import format_time
    from replay.reader import open_file_log
    from replay.verify import verify
    from scheduler.core import snapshot
    from tests.explain_logdrive import LogDriver
    from tests.unit.test_fact_fold import START_US, _live_and_recovered, _next_cycle

    lines = several_asks_requiring_one_node()[:-2]
    records = [{"id": f"i{n}", "source": "rm", "type": line["type"], "data": line.get("data", {}),
                "time": format_time(START_US + n)}
               for n, line in enumerate(lines) if line["type"] != "schedule"]
    cfg = config("yunikorn-1.9", "{vcore: 1}")
    live, recovered, _ = _live_and_recovered(records, 3, 1_000, cfg)
    n1 = live.state.partitions["default"].nodes["n1"]
    assert n1.reservations() == [("A", "a1"), ("B", "b1")]
    assert recovered.digest_mismatches == []
    assert snapshot.dump(recovered.engine) == snapshot.dump(live)
    again = snapshot.load(snapshot.dump(live))
    assert again.state.partitions["default"].nodes["n1"].reservations() == [("A", "a1"), ("B", "b1")]
    assert _next_cycle(recovered.engine) == _next_cycle(live)
    with LogDriver(tmp_path / "log", cfg) as drv:
        drv.submit(*[line for line in lines if line["type"] != "schedule"])
        drv.cycle()
        drv.submit({"type": "node.removed", "data": {"node_id": "n1"}})
        drv.cycle()
    with open_file_log(tmp_path / "log") as source:
        assert verify(source).ok
    import orjson

    from events.log.file import FileLog

    with FileLog(tmp_path / "log", readonly=True) as log:
        outs = [orjson.loads(r.value) for r in log.iter_outputs()]
    ended = sorted((o["data"]["ask_id"], o["data"]["reason"]) for o in outs if o["type"] == "ask.unreserved")
    assert ended == [("a1", "node-removed"), ("b1", "node-removed"), ("c1", "allocated")]


def test_quota_preemption_keys_parse_under_1_9_with_a_warning_and_are_refused_under_1_5() -> None:
    from scheduler.config import ConfigError
    from scheduler.config.properties import property_problems

    def with_quota(rules: str) -> str:
        return config(rules, "{vcore: 1}", a_props="quota.preemption.delay: 30s").replace(
            "    queues:\n", "    preemption: {enabled: true, quotapreemptionenabled: true}\n    queues:\n", 1)

    loaded = load_config(with_quota("yunikorn-1.9"))
    assert loaded.partitions[0].quota_preemption
    errors, warnings = property_problems(loaded)
    assert errors == [] and warnings == []  # implemented (scheduler.core.quota_preemption): no warning
    without = load_config(with_quota("yunikorn-1.9").replace(", quotapreemptionenabled: true", ""))
    assert any(w.startswith("queue root.a: quota.preemption.delay is read only with")
               for w in property_problems(without)[1])
    try:
        load_config(with_quota("yunikorn-1.5"))
    except ConfigError as exc:
        assert "quotapreemptionenabled': unknown key under the rules profile yunikorn-1.5" in str(exc)
    else:
        raise AssertionError("a yunikorn-1.5 partition took quotapreemptionenabled")


def test_explain_pending_names_the_backoff() -> None:
    import orjson

    from replay.explain.pending import explain_pending
    from scheduler.simulation.simulate import Simulation

    sim = Simulation(load_config(config("yunikorn-1.9", "{vcore: 1}", a_props=BACKOFF)))
    for line in one_too_big_then_a_small_one()[:-2]:  # through the cycle at 0.5 s
        sim.feed(orjson.dumps(line))
    why = explain_pending(sim.engine, "A", "a2")
    assert [r["rule"] for r in why.reasons][:1] == ["docs/semantics.md#yunikorn-19 (unschedulable-ask backoff)"]
    assert "backs off until 1970-01-01T00:00:10.500000Z" in why.reasons[0]["message"]
