"""User/group limits, mirroring YuniKorn v1.5.2 ``pkg/scheduler/ugm`` (manager_test.go) and the
ugm headroom/CanRunApp checks of ``Application.tryAllocate``/``Queue.TryAllocate``."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.config import load_config
from scheduler.simulation.simulate import Simulation
from tests.oracles.user_usage import comparable, fold_usage
from tests.sim import SCHEDULE, app, ask, node, of_type, placements, root_queues, run

LIMITS = root_queues("""
- name: shared
  limits:
    - limit: alice
      users: [alice]
      maxresources: {vcore: 2}
    - limit: devs
      groups: [devs]
      maxresources: {vcore: 3}
    - limit: everyone else
      users: ['*']
      maxresources: {vcore: 5}
      maxapplications: 1
- name: other
""")


def _usage(lines: list[dict[str, Any]], config: str) -> tuple[Simulation, list[Any]]:
    sim = Simulation(load_config(config))
    outputs = []
    for line in lines:
        outputs.extend(sim.feed(orjson.dumps(line)))
    outputs.extend(sim.finish())
    return sim, outputs


def test_user_at_maxresources_gets_nothing_more_while_another_user_does() -> None:
    # TestUserGroupHeadroom / TestUserGroupLimit: the user's headroom stops alice at 2 vcore;
    # bob, in the same queue under the wildcard limit, keeps getting resources.
    lines = [
        node("n1", vcore=20_000, memory=20_000),
        app("a", "root.shared", user="alice"), app("b", "root.shared", user="bob"),
        *[ask("a", f"a{i}") for i in range(4)], *[ask("b", f"b{i}") for i in range(4)],
        SCHEDULE,
    ]
    outputs, state = run(lines, LIMITS)
    got = sorted(a for a, _ in placements(outputs))
    assert got == ["a0", "a1", "b0", "b1", "b2", "b3"]
    assert state["apps"]["a"]["pending"]["vcore"] == 2000
    # The same asks in a queue without limits all fit.
    outputs, _ = run([*lines[:1], app("a", "root.other", user="alice"), *[ask("a", f"a{i}") for i in range(4)],
                      SCHEDULE], LIMITS)
    assert len(placements(outputs)) == 4


def test_named_user_beats_the_wildcard_and_wildcard_maxapplications_holds_apps_in_accepted() -> None:
    # TestUseWildCard (most specific wins) + TestCanRunApp (maxapplications of the wildcard).
    lines = [
        node("n1", vcore=20_000, memory=20_000),
        app("b1", "root.shared", user="bob"), app("b2", "root.shared", user="bob"),
        app("a1", "root.shared", user="alice"), app("a2", "root.shared", user="alice"),
        ask("b1", "b1-0"), ask("b2", "b2-0"), ask("a1", "a1-0"), ask("a2", "a2-0"),
        SCHEDULE,
    ]
    outputs, state = run(lines, LIMITS)
    assert sorted(a for a, _ in placements(outputs)) == ["a1-0", "a2-0", "b1-0"]
    assert state["apps"]["b2"]["state"] == "Accepted"  # bob may run one app (wildcard)
    # Once b1's allocation is released and it completes, b2 may start.
    more = [{"type": "allocation.released", "data": {"app_id": "b1", "ask_id": "b1-0"}},
            {"type": "app.removed", "data": {"app_id": "b1"}}, SCHEDULE]
    outputs, state = run([*lines, *more], LIMITS)
    assert "b2-0" in [a for a, _ in placements(outputs)]


def test_group_limit_resolves_leaf_upwards_first_configured_group() -> None:
    # TestGetGroup (ensureGroupInternal): carol's first group with a limit on the path is devs.
    # Users named nowhere and not under '*' users are limited only by their group.
    config = root_queues("""
- name: shared
  limits:
    - limit: devs
      groups: [devs]
      maxresources: {vcore: 3}
""")
    lines = [
        node("n1", vcore=20_000, memory=20_000),
        app("c", "root.shared", user="carol", groups=["other", "devs"]),
        app("d", "root.shared", user="dave", groups=["devs"]),
        app("e", "root.shared", user="erin", groups=["ops"]),
        *[ask(x, f"{x}{i}") for x in "cde" for i in range(3)],
        SCHEDULE,
    ]
    outputs, _ = run(lines, config)
    got = [a for a, _ in placements(outputs)]
    assert sum(1 for a in got if a[0] in "cd") == 3  # the devs group shares 3 vcore
    assert sum(1 for a in got if a[0] == "e") == 3  # erin's group is not tracked


def test_an_app_without_groups_is_in_a_group_named_after_its_user() -> None:
    """YuniKorn ``security/usergroup.go:ConvertUGI`` resolves a user sent without groups through
    the default (no-)resolver, ``usergroup_no_resolver.go``: ``noLookupUser`` sets the primary
    gid to the user's name and ``noLookupGroupID`` names the group by it — so a group limit
    naming the user, or the ``*`` group limit, applies (``ugm`` tracks that group)."""
    config = root_queues("""
- name: named
  limits:
    - limit: carol as a group
      groups: [carol]
      maxresources: {vcore: 1}
- name: wild
  limits:
    - limit: ops
      groups: [ops]
      maxresources: {vcore: 100}
    - limit: any group
      groups: ['*']
      maxresources: {vcore: 2}
""")
    lines = [node("n1", vcore=20_000, memory=20_000),
             app("c", "root.named", user="carol"), app("d", "root.wild", user="dave"),
             app("e", "root.named", user="carol", groups=["ops"]),
             *[ask(a, f"{a}{i}") for a in "cde" for i in range(3)], SCHEDULE]
    outputs, state = run(lines, config)
    got = sorted(k for k, _ in placements(outputs))
    assert got == ["c0", "d0", "d1", "e0", "e1", "e2"]  # e names its group: the carol limit is not its
    assert state["apps"]["c"]["pending"]["vcore"] == 2000


def test_partition_limits_apply_at_root() -> None:
    # checkLimitsStructure: partition limits become root's.
    config = """
partitions:
  - name: default
    limits:
      - limit: per user
        users: ['*']
        maxresources: {vcore: 1}
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
          - name: b
"""
    lines = [node("n1", vcore=20_000, memory=20_000), app("x", "root.a", user="u"), app("y", "root.b", user="u"),
             app("z", "root.b", user="v"), ask("x", "x0"), ask("y", "y0"), ask("z", "z0"), SCHEDULE]
    outputs, _ = run(lines, config)
    got = sorted(a for a, _ in placements(outputs))
    assert len(got) == 2 and "z0" in got  # u's 1 vcore counts across a and b: one of x0, y0


def test_limits_with_dynamic_queues_and_the_yunikorn_default_rule() -> None:
    config = """
partitions:
  - name: default
    placementrules:
      - {name: tag, value: namespace, create: true}
    queues:
      - name: root
        submitacl: '*'
        limits:
          - limit: per user
            users: ['*']
            maxresources: {vcore: 2}
"""
    lines = [node("n1", vcore=20_000, memory=20_000),
             {"type": "app.added", "data": {"app_id": "x", "user": "u", "tags": {"namespace": "n1"}}},
             {"type": "app.added", "data": {"app_id": "y", "user": "u", "tags": {"namespace": "n2"}}},
             *[ask(a, f"{a}{i}") for a in "xy" for i in range(2)], SCHEDULE]
    outputs, _ = run(lines, config)
    assert len(placements(outputs)) == 2
    assert of_type(outputs, "input.rejected") == []


USERS = ["alice", "bob", "carol"]
GROUPS = [[], ["devs"], ["ops", "devs"], ["ops"]]
PROPERTY_CONFIG = """
partitions:
  - name: default
    placementrules:
      - {name: provided, create: true}
      - {name: user, create: true, parent: {name: fixed, value: users}}
    limits:
      - {limit: ops, groups: [ops], maxresources: {vcore: 6}, maxapplications: 3}
      - {limit: wild, groups: ['*'], maxresources: {vcore: 8}}
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: users
            parent: true
            childtemplate: {resources: {max: {vcore: 5}}}
            limits:
              - {limit: alice, users: [alice], maxresources: {vcore: 2}, maxapplications: 2}
              - {limit: devs, groups: [devs], maxresources: {vcore: 4}}
              - {limit: any, users: ['*'], maxresources: {vcore: 3}, maxapplications: 1}
          - name: fixed
"""

_step = st.one_of(
    st.tuples(st.just("app"), st.integers(0, 3), st.integers(0, 2), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("ask"), st.integers(0, 3), st.integers(0, 3), st.integers(1, 3)),
    st.tuples(st.just("release"), st.integers(0, 3), st.integers(0, 3)),
    st.tuples(st.just("remove"), st.integers(0, 3)),
    st.tuples(st.just("schedule"),),
    st.tuples(st.just("config"), st.booleans()),
)


def _line(step: tuple[Any, ...]) -> dict[str, Any]:
    kind = step[0]
    if kind == "app":
        data: dict[str, Any] = {"app_id": f"a{step[1]}", "user": USERS[step[2]], "groups": GROUPS[step[3]]}
        if step[4]:
            data["queue"] = "root.fixed"
        return {"type": "app.added", "data": data}
    if kind == "ask":
        return ask(f"a{step[1]}", f"k{step[2]}", vcore=step[3] * 1000, memory=1)
    if kind == "release":
        return {"type": "allocation.released", "data": {"app_id": f"a{step[1]}", "ask_id": f"k{step[2]}"}}
    if kind == "remove":
        return {"type": "app.removed", "data": {"app_id": f"a{step[1]}"}}
    if kind == "config":
        text = PROPERTY_CONFIG if step[1] else PROPERTY_CONFIG.replace("vcore: 2}", "vcore: 4}")
        return {"type": "config.updated", "data": {"yaml": text}}
    return SCHEDULE


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_step, max_size=40))
def test_tracked_usage_equals_a_fold_and_never_exceeds_a_limit(steps: list[tuple[Any, ...]]) -> None:
    # The incremental tracker (IncreaseTrackedResource/DecreaseTrackedResource) equals a
    # from-scratch fold after every input, and no allocation ever takes a user or group past
    # a maxresources limit.
    sim = Simulation(load_config(PROPERTY_CONFIG))
    for line in [node("n1", vcore=50_000, memory=50_000)] + [_line(s) for s in steps] + [SCHEDULE]:
        sim.feed(orjson.dumps(line))
        part = sim.engine.state.partitions["default"]
        assert part.limits is not None
        assert comparable(part.limits.usage) == comparable(fold_usage(list(part.apps.values())))
        for (kind, name, path), usage in part.limits.usage.items():
            if kind == "user":
                found = part.limits.index.user_limit(path, name)
                limit = found[1] if found else None
            else:
                limit = part.limits.index.group_limit(path, name)
            if limit is not None:
                for rtype, cap in limit[0].items():
                    assert usage.resources.get(rtype, 0) <= cap, (kind, name, path)
