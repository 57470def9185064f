"""Limits, app lifecycle, ACLs, priority classes and input rejection, through the core."""

from __future__ import annotations

from typing import Any

import pytest

from tests.sim import SCHEDULE, app, ask, node, of_type, placements, root_queues, run

TWO_LEAVES = root_queues("""
          - name: parent
            maxapplications: 2
            resources: {max: {vcore: 3}}
            queues:
              - name: a
                maxapplications: 1
                resources: {max: {vcore: 2}}
              - name: b
                maxapplications: 2
""")


def test_queue_max_is_enforced_at_every_level() -> None:
    lines = [node("n1", vcore=10_000, memory=10_000), app("x", "root.parent.a"), app("y", "root.parent.b"),
             *[ask("x", f"x{i}") for i in range(3)], *[ask("y", f"y{i}") for i in range(3)], SCHEDULE]
    outputs, state = run(lines, TWO_LEAVES)
    assert state["queues"]["root.parent.a"]["allocated"]["vcore"] == 2000
    assert state["queues"]["root.parent"]["allocated"]["vcore"] == 3000
    assert len(of_type(outputs, "allocation.decided")) == 3


def test_max_applications_holds_back_accepted_apps_only() -> None:
    lines = [node("n1", vcore=100_000, memory=100_000), app("x1", "root.parent.a"), app("x2", "root.parent.a"),
             ask("x1", "x1-0", vcore=100), ask("x1", "x1-1", vcore=100), ask("x2", "x2-0", vcore=100), SCHEDULE]
    outputs, state = run(lines, TWO_LEAVES)
    assert [d["ask_id"] for d in of_type(outputs, "allocation.decided")] == ["x1-0", "x1-1"]
    assert state["apps"]["x2"]["state"] == "Accepted"
    assert state["queues"]["root.parent.a"]["running_apps"] == 1


def test_root_max_is_the_cluster() -> None:
    # The cluster has no gpu at all: root's max counts it as 0, so the gpu ask never fits.
    lines = [node("n1", vcore=1000, memory=1000), app("a"), ask("a", "gpu", vcore=1, memory=1), ask("a", "cpu")]
    lines[2]["data"]["resources"]["gpu"] = 1
    outputs, state = run([*lines, SCHEDULE])
    assert of_type(outputs, "input.rejected") == []
    assert placements(outputs) == [("cpu", "n1")]
    assert state["apps"]["a"]["pending"] == {"gpu": 1, "memory": 1, "vcore": 1}


def test_app_lifecycle_transitions() -> None:
    lines = [
        node("n1", vcore=10_000, memory=10_000),
        {**app("a"), "time": "1970-01-01T00:00:00Z"},
        ask("a", "k1"), ask("a", "k2"), ask("a", "k3", vcore=10**9),
        {**SCHEDULE, "data": {"max_allocations": 1}},
        SCHEDULE,
        {"type": "ask.removed", "data": {"app_id": "a", "ask_id": "k3"}},
        {"type": "allocation.released", "data": {"app_id": "a", "ask_id": "k1"}},
        {"type": "allocation.released", "data": {"app_id": "a", "ask_id": "k2"}, "time": "1970-01-01T00:01:00Z"},
        {**SCHEDULE, "time": "1970-01-01T00:01:29Z"},
        {**SCHEDULE, "time": "1970-01-01T00:01:30Z"},
    ]
    outputs, state = run(lines)
    changes = [(c["from"], c["to"]) for c in of_type(outputs, "app.state_changed")]
    assert changes == [("New", "Accepted"), ("Accepted", "Starting"), ("Starting", "Running"),
                       ("Running", "Completing"), ("Completing", "Completed")]
    assert "a" not in state["apps"]  # a Completed app leaves the partition (YuniKorn moveTerminatedApp)


def test_new_ask_while_completing_resumes_running() -> None:
    lines = [node("n1"), app("a"), ask("a", "k1"), SCHEDULE,
             {"type": "allocation.released", "data": {"app_id": "a", "ask_id": "k1"}},
             ask("a", "k2"), SCHEDULE]
    outputs, state = run(lines)
    changes = [(c["from"], c["to"]) for c in of_type(outputs, "app.state_changed")]
    assert changes[-2:] == [("Starting", "Completing"), ("Completing", "Running")]
    assert state["apps"]["a"]["state"] == "Running"


def test_stateaware_disable_tag_runs_at_once() -> None:
    lines = [node("n1"), app("a", tags={"application.stateaware.disable": "true"}), ask("a", "k"), SCHEDULE]
    outputs, state = run(lines)
    assert state["apps"]["a"]["state"] == "Running"
    assert [(c["from"], c["to"]) for c in of_type(outputs, "app.state_changed")][-2:] == [
        ("Accepted", "Starting"), ("Starting", "Running")]


ACL_CONFIG = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: ' '
        queues:
          - name: open
            submitacl: '*'
          - name: team
            submitacl: 'alice devs'
            queues:
              - name: leaf
          - name: admins
            adminacl: 'root'
          - name: closed
"""


@pytest.mark.parametrize(
    ("queue", "user", "groups", "ok", "reason"),
    [
        ("root.open", "anyone", [], True, None),
        ("root.team.leaf", "alice", [], True, None),
        ("root.team.leaf", "bob", ["devs"], True, None),
        ("root.team.leaf", "bob", ["ops"], False, "acl-denied"),
        ("root.admins", "root", [], True, None),
        ("root.closed", "alice", [], False, "acl-denied"),
        ("ROOT.Open", "anyone", [], True, None),  # queue names are case-insensitive
        ("root.team", "alice", [], False, "not-a-leaf"),
        ("root.nope", "alice", [], False, "unknown-queue"),
    ],
)
def test_submit_acls(queue: str, user: str, groups: list[str], ok: bool, reason: str | None) -> None:
    outputs, state = run([app("a", queue, user=user, groups=groups)], ACL_CONFIG)
    rejected = of_type(outputs, "input.rejected")
    if ok:
        assert rejected == [] and "a" in state["apps"]
    else:
        assert [r["reason"] for r in rejected] == [reason]
        assert of_type(outputs, "app.state_changed") == [{"app_id": "a", "from": "New", "to": "Rejected"}]
        assert "a" not in state["apps"]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"priority_class": "high"}, 100),
        ({"priority_class": "system-node-critical"}, 2_000_001_000),
        ({"priority": 100, "priority_class": "high"}, 100),
        ({"priority": 7}, 7),
        ({}, 42),  # the global default class
        ({"priority": 5, "priority_class": "high"}, "priority-class"),
        ({"priority_class": "nope"}, "priority-class"),
        ({"priority": 2**31}, "priority-range"),
    ],
)
def test_ask_priority_resolution(fields: dict[str, Any], expected: int | str) -> None:
    lines = [
        {"type": "priorityclass.upserted", "data": {"name": "high", "value": 100}},
        {"type": "priorityclass.upserted", "data": {"name": "dflt", "value": 42, "global_default": True}},
        app("a"), ask("a", "k", vcore=10**9, **fields),
    ]
    outputs, state = run(lines)
    rejected = of_type(outputs, "input.rejected")
    if isinstance(expected, int):
        assert rejected == [] and state["apps"]["a"]["priority"] == expected
    else:
        assert [r["reason"] for r in rejected] == [expected]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ({"name": "system-mine", "value": 1}, "priority-class"),
        ({"name": "huge", "value": 1_000_000_001}, "priority-range"),
        ({"name": "second-default", "value": 1, "global_default": True}, "priority-class"),
    ],
)
def test_priority_class_rules(data: dict[str, Any], reason: str) -> None:
    lines = [{"type": "priorityclass.upserted", "data": {"name": "d", "value": 1, "global_default": True}},
             {"type": "priorityclass.upserted", "data": data}]
    outputs, _ = run(lines)
    assert [r["reason"] for r in of_type(outputs, "input.rejected")] == [reason]


def test_deleted_class_keeps_admitted_priority() -> None:
    lines = [{"type": "priorityclass.upserted", "data": {"name": "high", "value": 100}},
             app("a"), ask("a", "k", vcore=10**9, priority_class="high"),
             {"type": "priorityclass.deleted", "data": {"name": "high"}}]
    _, state = run(lines)
    assert state["apps"]["a"]["priority"] == 100


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ({"type": "ask.added", "data": {"app_id": "ghost", "ask_id": "k", "resources": {"vcore": 1}}}, "unknown-app"),
        ({"type": "ask.removed", "data": {"app_id": "a", "ask_id": "ghost"}}, "unknown-ask"),
        ({"type": "allocation.released", "data": {"app_id": "a", "ask_id": "ghost"}}, "unknown-ask"),
        ({"type": "node.updated", "data": {"node_id": "ghost", "schedulable": False}}, "unknown-node"),
        ({"type": "node.removed", "data": {"node_id": "ghost"}}, "unknown-node"),
        ({"type": "app.removed", "data": {"app_id": "ghost"}}, "unknown-app"),
        ({"type": "ask.added", "data": {"app_id": "a", "ask_id": "k", "resources": {"vcore": -1}}}, "invalid"),
        ({"type": "ask.added", "data": {"app_id": "a", "ask_id": "k", "resources": {}}}, "invalid"),
        ({"type": "ask.added", "data": {"app_id": "a", "ask_id": "k", "resources": {"vcore": 1}, "x": 1}}, "invalid"),
        ({"type": "bogus.type", "data": {}}, "unknown-type"),
        ({"type": "node.added", "data": {"node_id": "n1", "capacity": {"vcore": 1}}}, "node-exists"),
        ({"type": "app.added", "data": {"app_id": "a", "queue": "root.default", "user": "u"}}, "app-exists"),
        ({"type": "config.updated", "data": {"yaml": "partitions: 7"}}, "config-invalid"),
        ({"type": "node.added", "time": "yesterday", "data": {"node_id": "n2", "capacity": {}}}, "invalid"),
    ],
)
def test_bad_inputs_are_rejected_and_change_nothing(line: dict[str, Any], reason: str) -> None:
    base = [node("n1"), app("a")]
    _, before = run(base)
    outputs, after = run([*base, line])
    assert [r["reason"] for r in of_type(outputs, "input.rejected")] == [reason]
    assert after == before


def test_duplicate_inputs_are_dropped_and_reported() -> None:
    line = {**node("n1"), "id": "same", "source": "rm"}
    outputs, state = run([line, line, {**line, "source": "other-rm", "data": {"node_id": "n2", "capacity": {}}}])
    assert [r["reason"] for r in of_type(outputs, "input.rejected")] == ["duplicate"]
    assert sorted(state["nodes"]) == ["n1", "n2"]


def test_node_removal_revokes_its_allocations() -> None:
    lines = [node("n1"), app("a"), ask("a", "k"), SCHEDULE, {"type": "node.removed", "data": {"node_id": "n1"}}]
    outputs, state = run(lines)
    assert of_type(outputs, "allocation.revoked") == [
        {"app_id": "a", "ask_id": "k", "node_id": "n1", "reason": "node-removed"}]
    assert state["apps"]["a"]["allocated"] == {} and state["queues"]["root"]["allocated"] == {}


def test_occupied_resources_reduce_what_fits() -> None:
    lines = [node("n1", vcore=2000, occupied={"vcore": 1500}), app("a"), ask("a", "k", vcore=1000), SCHEDULE]
    outputs, _ = run(lines)
    assert placements(outputs) == []


def test_config_update_applies_or_is_rejected_whole() -> None:
    good = "partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: '*'\n" \
           "        queues:\n          - name: default\n          - name: extra\n"
    lines = [app("a"), {"type": "config.updated", "data": {"yaml": good}}, app("b", "root.extra")]
    outputs, state = run(lines)
    assert len(of_type(outputs, "config.applied")) == 1
    assert state["apps"]["b"]["queue"] == "root.extra"
    # A queue holding an app may not become a parent: the whole update is rejected.
    retyping = good.replace("          - name: default\n", "          - name: default\n            parent: true\n")
    outputs, state = run([app("a"), ask("a", "k", vcore=10**9), {"type": "config.updated", "data": {"yaml": retyping}}])
    assert [r["reason"] for r in of_type(outputs, "input.rejected")] == ["config-invalid"]
    assert state["apps"]["a"]["queue"] == "root.default" and "root.extra" not in state["queues"]
