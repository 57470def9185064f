"""Rules where the core follows YuniKorn v1.5.2 exactly (the audit's findings), one test each."""

from __future__ import annotations

import re

import pytest

from scheduler.config import ConfigError, load_config
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


def _cfg(children: str, partition_extra: str = "") -> str:
    return root_queues(children).replace("  - name: default\n", "  - name: default\n" + partition_extra, 1)


def test_zero_entry_in_max_forbids_that_type() -> None:
    """YuniKorn ``queue.go:setResources`` keeps 0 entries of a max with a positive entry, and
    ``internalHeadRoom``/``FitInMaxUndef`` then refuse any request of that type (B1)."""
    config = root_queues("""
          - name: a
            resources: {max: {vcore: 10, memory: 10G, nvidia.com/gpu: 0}}
""")
    gpu_ask = ask("x", "gpu1", vcore=1000, memory=1000)
    gpu_ask["data"]["resources"]["nvidia.com/gpu"] = 1
    gpu_node = node("n1", vcore=8000, memory=8 * 10**9)
    gpu_node["data"]["capacity"]["nvidia.com/gpu"] = 4
    outputs, state = run([gpu_node, app("x", "root.a"), gpu_ask, ask("x", "cpu1"), SCHEDULE], config)
    assert placements(outputs) == [("cpu1", "n1")]
    assert state["apps"]["x"]["pending"]["nvidia.com/gpu"] == 1


def test_all_zero_max_means_not_set() -> None:
    """YuniKorn ``setResources``: only a max with a positive entry is set; all zeros = no limit."""
    config = root_queues("""
          - name: a
            resources: {max: {vcore: 0, memory: 0}}
""")
    outputs, _ = run([node("n1"), app("x", "root.a"), ask("x", "k"), SCHEDULE], config)
    assert placements(outputs) == [("k", "n1")]


def test_system_node_critical_is_the_kubernetes_value() -> None:
    """Kubernetes ``SystemPriorityClasses``: system-node-critical = SystemCriticalPriority + 1000 (B5)."""
    lines = [node("n1"), app("x"), ask("x", "k", priority=2_000_001_000, priority_class="system-node-critical"),
             SCHEDULE]
    outputs, _ = run(lines)
    assert of_type(outputs, "input.rejected") == []
    assert placements(outputs) == [("k", "n1")]


def test_priority_class_value_and_policy_are_immutable() -> None:
    """Kubernetes ``ValidatePriorityClassUpdate``: value and preemptionPolicy never change (B12)."""
    upsert = {"type": "priorityclass.upserted", "data": {"name": "batch", "value": 10}}
    lines = [upsert, {**upsert, "data": {"name": "batch", "value": 999}},
             {**upsert, "data": {"name": "batch", "value": 10, "preemption_policy": "PreemptLowerPriority"}},
             {**upsert, "data": {"name": "batch", "value": 10, "global_default": True}},
             node("n1"), app("x"), ask("x", "k"), SCHEDULE]
    outputs, _ = run(lines)
    assert [r["reason"] for r in of_type(outputs, "input.rejected")] == ["priority-class", "priority-class"]
    assert of_type(outputs, "allocation.decided")[0]["priority"] == 10  # the default flag did change


def test_stateaware_admits_every_starting_app_with_pending() -> None:
    """YuniKorn 1.5 ``sorters.go:stateAwareFilter``: every non-Accepted app with pending is kept;
    only Accepted apps are limited (B6). Two apps reach Starting under fifo, then the leaf
    becomes stateaware: the younger Starting app is scheduled although the older one waits."""
    fifo = root_queues("""
          - name: a
""")
    gated = "- name: a\n            properties: {application.sort.policy: stateaware}\n"
    stateaware = fifo.replace("- name: a\n", gated)
    lines = [node("n1", vcore=2000), app("A", "root.a"), app("B", "root.a"), ask("A", "a1"), ask("B", "b1"),
             SCHEDULE, {"type": "config.updated", "data": {"yaml": stateaware}},
             node("n2"), ask("B", "b2"), SCHEDULE]
    outputs, state = run(lines, fifo)
    assert [d["ask_id"] for d in of_type(outputs, "allocation.decided")] == ["a1", "b1", "b2"]
    assert state["apps"]["B"]["state"] == "Running"


def test_stateaware_disable_tag_key_any_case_any_non_empty_value() -> None:
    """YuniKorn ``application.go`` l.189 ``GetTag(AppTagStateAwareDisable) != ""`` with ``GetTag``
    matching the key with ``strings.EqualFold`` (B7): both apps go Running on their first allocation."""
    lines = [node("n1"), app("A", tags={"Application.StateAware.Disable": "true"}),
             app("B", tags={"application.stateaware.disable": "yes"}),
             app("C", tags={"application.stateaware.disable": ""}),
             ask("A", "a1"), ask("B", "b1"), ask("C", "c1"), SCHEDULE]
    _, state = run(lines)
    assert {k: v["state"] for k, v in state["apps"].items()} == {"A": "Running", "B": "Running", "C": "Starting"}


def test_node_sort_policy_type_is_case_sensitive() -> None:
    """YuniKorn ``configvalidator.go:checkNodeSortingPolicy`` → ``SortingPolicyFromString``, an exact
    switch: ``Fair`` is an undefined policy and the config is rejected (B8)."""
    for bad in ("Fair", "BINPACKING"):
        with pytest.raises(ConfigError, match="undefined policy"):
            load_config(_cfg("          - name: a\n", f"    nodesortpolicy: {{type: {bad}}}\n"))
    assert load_config(_cfg("          - name: a\n", "    nodesortpolicy: {type: binpacking}\n"))


@pytest.mark.parametrize(
    ("acl", "user", "groups", "admitted"),
    [
        ("* devs", "carol", [], True),  # the user list is exactly "*": everyone
        ("alice ops,*", "carol", [], False),  # "*" among other groups is not a wildcard (and is invalid)
        ("alice *", "carol", [], True),  # the group list is exactly "*": everyone
        ("1bob", "1bob", [], False),  # invalid user names are ignored
        ("alice 1ops", "carol", ["1ops"], False),  # invalid group names are ignored
        ("al.ice@x", "al.ice@x", [], True),
    ],
)
def test_acl_corner_cases(acl: str, user: str, groups: list[str], admitted: bool) -> None:
    """YuniKorn ``security/acl.go:NewACL``, ``setUsers`` and ``setGroups`` (B10)."""
    config = root_queues("""
          - name: a
""").replace("submitacl: '*'", f"submitacl: '{acl}'")
    outputs, state = run([app("x", "root.a", user=user, groups=groups)], config)
    assert ("x" in state["apps"]) is admitted
    assert [r["reason"] for r in of_type(outputs, "input.rejected")] == ([] if admitted else ["acl-denied"])


def test_app_removed_emits_completing() -> None:
    """YuniKorn ``partition.go:removeApplication`` → ``RemoveAllAllocations`` → CompleteApplication:
    the app leaves Starting for Completing, as an output (B11); a New app has no transition."""
    lines = [node("n1"), app("x"), app("fresh"), ask("x", "k1"), ask("x", "k2", vcore=10**9), SCHEDULE,
             {"type": "app.removed", "data": {"app_id": "x"}}, {"type": "app.removed", "data": {"app_id": "fresh"}}]
    outputs, state = run(lines)
    changes = [(c["app_id"], c["from"], c["to"]) for c in of_type(outputs, "app.state_changed")]
    assert changes[-1] == ("x", "Starting", "Completing")
    assert state["apps"] == {} and state["queues"]["root.default"]["running_apps"] == 0


def test_completed_app_leaves_queue_and_partition() -> None:
    """YuniKorn ``partition.go:moveTerminatedApp`` (``app.UnSetQueue``, ``delete(pc.applications)``):
    a Completed app is gone; its id may be used again (``AddApplication`` checks active apps only) (B2)."""
    lines = [node("n1"), {**app("x"), "time": "1970-01-01T00:00:00Z"}, ask("x", "k"), SCHEDULE,
             {"type": "allocation.released", "data": {"app_id": "x", "ask_id": "k"}},
             {**SCHEDULE, "time": "1970-01-01T00:00:31Z"}, app("x"), ask("x", "k2"), SCHEDULE]
    outputs, state = run(lines)
    assert of_type(outputs, "input.rejected") == []
    changes = [(c["from"], c["to"]) for c in of_type(outputs, "app.state_changed")]
    assert ("Completing", "Completed") in changes and changes[-1] == ("Accepted", "Starting")
    assert state["apps"]["x"]["state"] == "Starting"


def test_completed_app_does_not_pin_its_queue() -> None:
    """YuniKorn ``moveTerminatedApp``: once Completed the app no longer holds its queue, so a config
    without that queue applies (B2)."""
    two = root_queues("""
          - name: a
          - name: b
""")
    lines = [node("n1"), {**app("x", "root.a"), "time": "1970-01-01T00:00:00Z"}, ask("x", "k"), SCHEDULE,
             {"type": "allocation.released", "data": {"app_id": "x", "ask_id": "k"}},
             {**SCHEDULE, "time": "1970-01-01T00:00:31Z"},
             {"type": "config.updated", "data": {"yaml": two.replace("          - name: a\n", "")}}]
    outputs, state = run(lines, two)
    assert of_type(outputs, "input.rejected") == []
    assert "root.a" not in state["queues"]


def test_required_node_may_be_unschedulable() -> None:
    """YuniKorn 1.5 ``application.go:tryAllocate`` takes the required node from ``getNodeFn`` (all
    nodes) without an ``IsSchedulable`` check: a DaemonSet pod reaches a cordoned node (B4)."""
    lines = [node("n1", schedulable=False), node("n2"), app("x"), ask("x", "ds", required_node="n1"),
             ask("x", "free"), SCHEDULE]
    outputs, _ = run(lines)
    assert sorted(placements(outputs)) == [("ds", "n1"), ("free", "n2")]


def _placement(rules: str) -> str:
    """root.a (leaf), root.p (``parent: true``), root.ns (children, not marked a parent)."""
    return _cfg("          - name: a\n          - name: p\n            parent: true\n"
                "          - name: ns\n            queues:\n              - name: ns2\n",
                f"    placementrules:\n{rules}")


@pytest.mark.parametrize(
    ("rules", "problem"),
    [
        ("      - name: 1bogus\n", "invalid rule name"),
        ("      - name: user\n        parent: {name: 'bad-name'}\n", "invalid rule name"),
        ("      - name: user\n        filter: {type: maybe}\n", "invalid rule filter type"),
        ("      - name: user\n        filter: {users: ['a b']}\n", "invalid rule filter user"),
        ("      - name: fixed\n        value: root.nonexistent.q\n", "create is 'false'"),
        ("      - name: fixed\n        value: root.p\n", "not a leaf"),
        ("      - name: user\n        parent: {name: fixed, value: root.a}\n", "not a parent"),
        ("      - name: tag\n        value: namespace\n        parent: {name: fixed, value: root.ns}\n",
         "not a parent"),
        ("      - name: fixed\n        value: root.a.x\n        create: true\n", "last queue (a)"),
        ("      - name: fixed\n        value: x\n        parent: {name: fixed, value: root.p}\n", "create is 'false'"),
        ("      - name: fixed\n        value: root.a\n        parent: {name: fixed, value: root.p}\n",
         "illegal fully qualified"),
    ],
)
def test_placement_rules_are_validated(rules: str, problem: str) -> None:
    """YuniKorn ``configvalidator.go:checkPlacementRules``, ``checkPlacementRule``,
    ``checkPlacementFilter`` and ``checkQueueHierarchyForPlacement`` (B9). The latter reads
    only ``QueueConfig.Parent``: root.ns has children but no ``parent: true``, so as the
    fixed parent of a dynamic rule it is refused ("references a queue (root.ns) which is
    not a leaf")."""
    with pytest.raises(ConfigError, match=re.escape(problem)):
        load_config(_placement(rules))


@pytest.mark.parametrize(
    "rules",
    [
        "      - name: provided\n        create: true\n",
        "      - name: tag\n        value: namespace\n        create: true\n",
        "      - name: fixed\n        value: root.a\n",
        "      - name: fixed\n        value: a\n",
        "      - name: user\n        parent: {name: fixed, value: root.p}\n"
        "        filter: {type: Allow, users: ['^dev.*']}\n",
        "      - name: fixed\n        value: root.p.new\n        create: true\n",
        "      - name: fixed\n        value: root.ns\n",  # not marked a parent: passes the check
    ],
)
def test_valid_placement_rules_are_accepted(rules: str) -> None:
    """YuniKorn ``checkPlacementRules`` accepts these (placement itself is not applied)."""
    assert load_config(_placement(rules))


TWO = root_queues("""
          - name: a
            resources: {max: {vcore: 3}}
          - name: b
""")
WITHOUT_A = TWO.replace("          - name: a\n            resources: {max: {vcore: 3}}\n", "")


def test_dropped_queue_with_apps_drains() -> None:
    """YuniKorn ``partition.go:updateQueues`` → ``MarkQueueForRemoval``: the config applies, the queue
    keeps its apps (which keep scheduling, under its old max) but takes no new app, and it is
    removed once empty (B3)."""
    lines = [node("n1", vcore=10_000), app("x", "root.a"), ask("x", "k1"), SCHEDULE,
             {"type": "config.updated", "data": {"yaml": WITHOUT_A}},
             ask("x", "k2"), ask("x", "k3"), ask("x", "k4"), app("late", "root.a"), SCHEDULE]
    outputs, state = run(lines, TWO)
    assert len(of_type(outputs, "config.applied")) == 1
    assert [d["ask_id"] for d in of_type(outputs, "allocation.decided")] == ["k1", "k2", "k3"]  # max 3 vcore
    assert [r["reason"] for r in of_type(outputs, "input.rejected")] == ["unknown-queue"]
    assert "root.a" in state["queues"] and state["apps"]["x"]["queue"] == "root.a"
    outputs, state = run([*lines, {"type": "app.removed", "data": {"app_id": "x"}}, SCHEDULE], TWO)
    assert "root.a" not in state["queues"]


def test_draining_queue_survives_a_snapshot() -> None:
    """Snapshots hold the draining queues (their settings come from the config they were last in)."""
    import orjson

    from scheduler.core.snapshot import dump, load
    from scheduler.simulation.simulate import Simulation
    sim = Simulation(load_config(TWO))
    for line in [node("n1", vcore=10_000), app("x", "root.a"), ask("x", "k1"), SCHEDULE,
                 {"type": "config.updated", "data": {"yaml": WITHOUT_A}}, SCHEDULE]:
        sim.feed(orjson.dumps(line))
    restored = load(orjson.loads(orjson.dumps(dump(sim.engine))))
    assert restored.digest() == sim.engine.digest()
    assert restored.state.partitions["default"].queues["root.a"].max == {"vcore": 3000}


def test_a_removed_app_that_holds_nothing_completes_at_once() -> None:
    """YuniKorn 1.5 ``partition.go:removeApplication``: ``RemoveAllocationAsk("")`` moves an app
    holding no allocation to Completing, then ``RemoveAllAllocations`` (nothing pending) sends
    ``CompleteApplication`` again: Completed at once. An app holding allocations takes that
    event from Running to Completing, and its state timer is cleared: it ends there."""
    lines = [node("n1"), app("idle"), ask("idle", "i1", vcore=9000), app("busy"), ask("busy", "b1"), SCHEDULE,
             {"type": "app.removed", "data": {"app_id": "idle"}}, {"type": "app.removed", "data": {"app_id": "busy"}}]
    outputs, state = run(lines)
    changes = [(o["app_id"], o["to"]) for o in of_type(outputs, "app.state_changed")]
    assert changes[-3:] == [("idle", "Completing"), ("idle", "Completed"), ("busy", "Completing")]
    assert state["apps"] == {}
