"""Placement rules and dynamic queues, mirroring YuniKorn v1.5.2 ``pkg/scheduler/placement``."""

from __future__ import annotations

from typing import Any

from tests.sim import SCHEDULE, app, ask, node, of_type, placements, root_queues, run

# YuniKorn's own default configuration (pkg/common/configs/config.go DefaultSchedulerConfig),
# with a child template on root so the per-namespace queues get settings.
YUNIKORN_DEFAULT = root_queues(rules="""
    - name: tag
      value: namespace
      create: true
""", root="""
    childtemplate:
      maxapplications: 1
      properties: {application.sort.policy: fair}
      resources:
        max: {vcore: 2}
""")


def _app(app_id: str, user: str = "alice", queue: str = "", **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"app_id": app_id, "user": user, **extra}
    if queue:
        data["queue"] = queue
    return {"type": "app.added", "data": data}


def _placed(outputs: list[dict[str, Any]]) -> dict[str, tuple[str, bool]]:
    return {d["app_id"]: (d["queue"], d["created"]) for d in of_type(outputs, "app.placed")}


def _rejected(outputs: list[dict[str, Any]]) -> list[str]:
    return [d["reason"] for d in of_type(outputs, "input.rejected")]


def test_default_config_places_apps_in_per_namespace_queues_from_the_template() -> None:
    # TestTagRulePlace (tag rule, create) + partition_test TestAddAppWithPlacement-like flow.
    lines = [
        node("n1", vcore=10_000, memory=10_000),
        _app("a1", tags={"namespace": "team-a"}), _app("a2", tags={"namespace": "team-a"}),
        _app("b1", tags={"namespace": "team-b"}),
        *[ask(a, f"{a}-{i}") for a in ("a1", "a2", "b1") for i in range(3)],
        SCHEDULE,
    ]
    outputs, state = run(lines, YUNIKORN_DEFAULT)
    assert _placed(outputs) == {
        "a1": ("root.team-a", True), "a2": ("root.team-a", False), "b1": ("root.team-b", True)
    }
    leaf = state["queues"]["root.team-a"]
    # The template's max (2 vcore) and maxapplications (1) hold: a2 waits in Accepted.
    assert leaf["allocated"]["vcore"] == 2000
    assert state["apps"]["a2"]["state"] == "Accepted"
    assert sorted(a for a, _ in placements(outputs)) == ["a1-0", "a1-1", "b1-0", "b1-1"]


def test_dynamic_queue_is_removed_with_its_last_app_and_created_again() -> None:
    lines = [
        _app("a1", tags={"namespace": "ns"}), _app("a2", tags={"namespace": "ns"}),
        {"type": "app.removed", "data": {"app_id": "a1"}},
    ]
    _, state = run(lines, YUNIKORN_DEFAULT)
    assert "root.ns" in state["queues"]
    _, state = run([*lines, {"type": "app.removed", "data": {"app_id": "a2"}}], YUNIKORN_DEFAULT)
    assert "root.ns" not in state["queues"]
    outputs, state = run([*lines, {"type": "app.removed", "data": {"app_id": "a2"}},
                          _app("a3", tags={"namespace": "ns"})], YUNIKORN_DEFAULT)
    assert _placed(outputs)["a3"] == ("root.ns", True)


def test_tag_missing_and_no_default_queue_rejects_with_no_placement() -> None:
    # TestManagerPlaceApp_Error / PlaceApplication: no rule matched and no root.default.
    outputs, state = run([_app("x")], YUNIKORN_DEFAULT)
    assert _rejected(outputs) == ["no-placement"]
    assert of_type(outputs, "app.state_changed") == [{"app_id": "x", "from": "New", "to": "Rejected"}]
    assert "x" not in state["apps"]


MANAGER = """
partitions:
  - name: default
    placementrules:
      - name: user
        create: false
        parent: {name: fixed, value: testparent}
      - name: provided
        create: true
      - name: tag
        value: namespace
        create: true
    queues:
      - name: root
        queues:
          - name: testparent
            submitacl: "*"
            parent: true
            queues:
              - name: testchild
          - name: fixed
            submitacl: "other-user "
            parent: true
"""


def test_manager_place_app() -> None:
    # TestManagerPlaceApp, step by step (placement_test.go). Its rules go to UpdateRules
    # directly; through a config, configvalidator.go:checkQueueHierarchyForPlacement refuses
    # testparent as the fixed parent of the user rule unless it is marked `parent: true`.
    lines = [
        _app("app1", user="testchild"),  # user rule, existing queue, acl allowed
        _app("app2", user="other-user"),  # user rule new queue: no create flag, nothing else matches
        _app("app3", user="other-user", queue="root.fixed.leaf"),  # provided: acl allowed, created
        _app("app4", user="unknown-user", queue="root.fixed.other"),  # provided: acl denied
        _app("app5", user="unknown-user", tags={"namespace": "root.fixed.leaf"}),  # tag: existing, acl denied
        _app("app6", user="other-user", tags={"namespace": "root.fixed.leaf"}),  # tag: existing, acl allowed
        _app("app7", user="other-user", queue="root.fixed"),  # provided: a parent queue
    ]
    outputs, state = run(lines, MANAGER)
    assert _placed(outputs) == {
        "app1": ("root.testparent.testchild", False),
        "app3": ("root.fixed.leaf", True),
        "app6": ("root.fixed.leaf", False),
    }
    assert _rejected(outputs) == ["no-placement"] * 4
    assert sorted(state["apps"]) == ["app1", "app3", "app6"]


PARENTS = root_queues("""
    - name: testparent
      parent: true
    - name: leaf
""", rules="""
    - name: provided
      create: true
      parent: {name: fixed, value: testparent}
    - name: user
      create: true
      filter: {type: deny, users: [denied]}
""", root="childtemplate: {resources: {max: {vcore: 1}}}")


def test_provided_rule_parent_user_rule_dot_and_filter() -> None:
    # TestProvidedRuleParent (unqualified name under the parent rule's queue),
    # TestUserRulePlace (a dot in the user name becomes _dot_), TestAllowUser (deny filter).
    lines = [
        _app("p1", queue="unqualified"),
        _app("p2", queue="root.leaf"),  # fully qualified: the parent rule is not run
        _app("u1", user="first.last"),
        _app("u2", user="denied"),
        node("n1", vcore=10_000, memory=10_000),
        ask("p1", "big", vcore=1500), ask("p1", "small", vcore=1000), ask("p2", "leaf", vcore=1500),
        SCHEDULE,
    ]
    outputs, _ = run(lines, PARENTS)
    assert _placed(outputs) == {
        "p1": ("root.testparent.unqualified", True),
        "p2": ("root.leaf", False),
        "u1": ("root.first_dot_last", True),
    }
    assert _rejected(outputs) == ["no-placement"]
    # the template is root's, inherited by testparent (YuniKorn inherits templates downwards)
    assert sorted(a for a, _ in placements(outputs)) == ["leaf", "small"]  # max vcore 1 on p1's queue only


def test_parent_rule_naming_a_leaf_rejects_the_app() -> None:
    # TestProvidedRuleParent: "parent rule returned a leaf queue" is an error, not a skip.
    # The parent comes from a tag at run time (a fixed parent naming a leaf fails validation).
    config = PARENTS.replace("parent: {name: fixed, value: testparent}", "parent: {name: tag, value: team}")
    outputs, _ = run([_app("p1", queue="x", tags={"team": "leaf"})], config)
    rejected = of_type(outputs, "input.rejected")
    assert [r["reason"] for r in rejected] == ["no-placement"]
    assert "leaf queue" in rejected[0]["message"]


def test_without_rules_an_app_without_queue_goes_to_root_default() -> None:
    # buildRules: no rules → implicit provided rule; PlaceApplication falls back to root.default.
    outputs, state = run([_app("x"), app("y", "root.default")], root_queues("- name: default"))
    assert _placed(outputs) == {"x": ("root.default", False)}
    assert state["apps"]["x"]["queue"] == "root.default" and state["apps"]["y"]["queue"] == "root.default"
    outputs, _ = run([_app("x")], root_queues("- name: other"))
    assert _rejected(outputs) == ["no-placement"]


def test_config_update_replaces_nothing_and_keeps_dynamic_queues() -> None:
    lines = [
        node("n1", vcore=10_000, memory=10_000),
        _app("a1", tags={"namespace": "ns"}), ask("a1", "k1", vcore=1500), ask("a1", "k2", vcore=1500), SCHEDULE,
        {"type": "config.updated", "data": {"yaml": YUNIKORN_DEFAULT.replace("vcore: 2", "vcore: 5")}},
        _app("a2", tags={"namespace": "ns"}), ask("a2", "k3"), SCHEDULE,
    ]
    outputs, state = run(lines, YUNIKORN_DEFAULT)
    assert _rejected(outputs) == []
    assert of_type(outputs, "config.applied")
    assert state["apps"]["a1"]["queue"] == "root.ns"
    assert _placed(outputs)["a2"] == ("root.ns", False)
    # re-created from the new template: max 5 vcore lets k2 in; a2 still held by maxapplications 1
    assert [a for a, _ in placements(outputs)] == ["k1", "k2"]
    assert state["queues"]["root.ns"]["allocated"]["vcore"] == 3000


def test_invalid_dynamic_queue_name_is_rejected() -> None:
    # NewDynamicQueue: QueueNameRegExp
    outputs, state = run([_app("x", tags={"namespace": "bad name!"})], YUNIKORN_DEFAULT)
    assert _rejected(outputs) == ["no-placement"]
    assert "x" not in state["apps"]
