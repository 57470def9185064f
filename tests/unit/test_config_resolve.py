"""Resolved specs: property inheritance, derived priority/sort fields, resources, lookups."""

from __future__ import annotations

import copy
import pickle
import textwrap

import pytest

from scheduler.config import PartitionSpec, QueueSpec, find_queue, load_config


def partition(queues: str, extra: str = "") -> PartitionSpec:
    body = textwrap.indent(textwrap.dedent(queues).strip("\n"), "      ")
    tail = textwrap.indent(textwrap.dedent(extra).strip("\n"), "    ") if extra else ""
    return load_config(f"partitions:\n  - name: default\n    queues:\n{body}\n{tail}\n").partitions[0]


def queue(p: PartitionSpec, path: str) -> QueueSpec:
    found = find_queue(p, path)
    assert found is not None, path
    return found


TREE = """
- name: root
  properties:
    application.sort.priority: disabled
    priority.offset: "7"
    priority.policy: fence
    team: infra
  queues:
  - name: Parent
    properties: {priority.offset: "3", priority.policy: FENCE, preemption.policy: fence}
    queues:
    - name: quiet
    - name: loud
      properties: {application.sort.priority: Enabled, team: ml}
      queues:
      - name: leaf
  - name: off
    properties: {preemption.policy: disabled, application.sort.policy: fair}
    queues:
    - name: leaf
      properties: {application.sort.policy: Fair}
"""

# path -> (sort_priority, priority_offset, priority_fence, app_sort_policy, effective properties)
EXPECTED = [
    (
        "root",
        False,
        0,
        False,
        "fifo",
        {
            "application.sort.priority": "disabled",
            "priority.offset": "7",
            "priority.policy": "fence",
            "team": "infra",
        },
    ),
    (
        "root.parent",
        False,
        3,
        True,
        "fifo",
        {
            "application.sort.priority": "disabled",
            "priority.offset": "3",
            "priority.policy": "FENCE",
            "preemption.policy": "fence",
            "team": "infra",
        },
    ),
    (
        "root.parent.quiet",
        False,
        0,
        False,
        "fifo",
        {"application.sort.priority": "disabled", "team": "infra"},
    ),
    (
        "root.parent.loud",
        True,
        0,
        False,
        "fifo",
        {"application.sort.priority": "Enabled", "team": "ml"},
    ),
    (
        "root.parent.loud.leaf",
        True,
        0,
        False,
        "fifo",
        {"application.sort.priority": "Enabled", "team": "ml"},
    ),
    (
        "root.off",
        False,
        0,
        False,
        "fair",
        {
            "application.sort.policy": "fair",
            "application.sort.priority": "disabled",
            "preemption.policy": "disabled",
            "team": "infra",
        },
    ),
    (
        "root.off.leaf",
        False,
        0,
        False,
        "fifo",
        {
            "application.sort.policy": "Fair",
            "application.sort.priority": "disabled",
            "preemption.policy": "disabled",
            "team": "infra",
        },
    ),
]


@pytest.mark.parametrize(
    ("path", "sort_prio", "offset", "fence", "app_sort", "props"),
    EXPECTED,
    ids=[e[0] for e in EXPECTED],
)
def test_inheritance(
    path: str, sort_prio: bool, offset: int, fence: bool, app_sort: str, props: dict[str, str]
) -> None:
    q = queue(partition(TREE), path)
    assert (q.sort_priority, q.priority_offset, q.priority_fence, q.app_sort_policy) == (
        sort_prio,
        offset,
        fence,
        app_sort,
    )
    assert dict(q.properties) == props
    assert list(q.properties) == sorted(props)


OFFSETS = [
    ('"10"', 10),
    ('"-3"', -3),
    ('"+4"', 4),
    ("010", 10),  # decimal, as written (Go reads the text, not YAML 1.1 octal)
    ('"2147483647"', 2147483647),
    ('"-2147483648"', -2147483648),
    ('"2147483648"', 0),
    ('"-2147483649"', 0),
    ('""', 0),
    ("~", 0),
    ('" 5"', 0),
    ('"1_0"', 0),
    ('"0x10"', 0),
    ('"1.5"', 0),
    ('"abc"', 0),
    ("5", 5),  # a YAML int is converted to its text
]


@pytest.mark.parametrize(("raw", "expected"), OFFSETS)
def test_priority_offset_parsing(raw: str, expected: int) -> None:
    p = partition(f"- name: a\n  properties: {{priority.offset: {raw}}}")
    assert queue(p, "root.a").priority_offset == expected


POLICIES = [
    ("priority.policy", "fence", "priority_fence", True),
    ("priority.policy", "Fence", "priority_fence", True),
    ("priority.policy", "default", "priority_fence", False),
    ("priority.policy", "bogus", "priority_fence", False),
    ("application.sort.priority", "DISABLED", "sort_priority", False),
    ("application.sort.priority", "enabled", "sort_priority", True),
    ("application.sort.priority", "off", "sort_priority", True),
    ("application.sort.priority", "''", "sort_priority", True),
    ("application.sort.policy", "fair", "app_sort_policy", "fair"),
    ("application.sort.policy", "stateaware", "app_sort_policy", "stateaware"),
    ("application.sort.policy", "fifo", "app_sort_policy", "fifo"),
    ("application.sort.policy", "StateAware", "app_sort_policy", "fifo"),  # case-sensitive
    ("application.sort.policy", "''", "app_sort_policy", "fifo"),
    ("application.sort.policy", "random", "app_sort_policy", "fifo"),
]


@pytest.mark.parametrize(("key", "value", "field", "expected"), POLICIES)
def test_property_values_fall_back_to_defaults(key: str, value: str, field: str, expected: object) -> None:
    p = partition(f"- name: a\n  properties: {{{key}: {value}}}")
    assert getattr(queue(p, "root.a"), field) == expected


def test_defaults_without_properties() -> None:
    q = queue(partition("- name: a"), "root.a")
    assert (q.sort_priority, q.priority_offset, q.priority_fence, q.app_sort_policy) == (
        True,
        0,
        False,
        "fifo",
    )
    assert q.properties == {}


def test_non_string_property_values_become_text() -> None:
    p = partition("- name: a\n  properties: {n: 5, b: yes, z: ~, f: 1.50, 3: x}")
    assert dict(queue(p, "root.a").properties) == {
        "3": "x",
        "b": "yes",
        "f": "1.50",
        "n": "5",
        "z": "",
    }


def test_resolved_queue_fields() -> None:
    p = partition(
        """
        - name: Team
          submitacl: 'alice,bob devs'
          adminacl: ' '
          maxapplications: 10
          resources:
            guaranteed: {vcore: 500m, memory: 0, gpu: 1}
            max: {memory: 0, disk: 0}
          queues:
          - name: Leaf
            maxapplications: 10
          - name: Marked
            parent: true
            maxapplications: 1
        """
    )
    team = queue(p, "ROOT.team")
    assert (team.name, team.path, team.is_leaf) == ("team", "root.team", False)
    assert (team.submit_acl, team.admin_acl, team.max_applications) == ("alice,bob devs", " ", 10)
    assert list(team.guaranteed.items()) == [("gpu", 1), ("vcore", 500)]  # zeros dropped, sorted
    assert team.max == {}  # all-zero max means "not set"
    leaf, marked = team.children
    assert (leaf.name, leaf.path, leaf.is_leaf, leaf.submit_acl) == (
        "leaf",
        "root.team.leaf",
        True,
        None,
    )
    assert (marked.path, marked.is_leaf) == ("root.team.marked", False)


def test_children_keep_config_order() -> None:
    p = partition("- name: z\n- name: a\n- name: m")
    assert [q.name for q in p.root.children] == ["z", "a", "m"]


NODE_SORT = [
    ("", "fair", {"memory": 1.0, "vcore": 1.0}),
    ("nodesortpolicy: {type: ''}", "fair", {"memory": 1.0, "vcore": 1.0}),
    ("nodesortpolicy: {type: binpacking}", "binpacking", {"memory": 1.0, "vcore": 1.0}),
    ("nodesortpolicy: {type: fair, resourceweights: {}}", "fair", {"memory": 1.0, "vcore": 1.0}),
    ("nodesortpolicy: {resourceweights: {vcore: 4, gpu: 0.5}}", "fair", {"gpu": 0.5, "vcore": 4.0}),
]


@pytest.mark.parametrize(("extra", "policy", "weights"), NODE_SORT)
def test_node_sort_policy(extra: str, policy: str, weights: dict[str, float]) -> None:
    p = partition("- name: a", extra)
    assert (p.node_sort_policy, dict(p.resource_weights)) == (policy, weights)


FIND = [
    ("root", "root"),
    ("ROOT.A.B", "root.a.b"),
    ("root.a", "root.a"),
    ("root.b", None),
    ("a.b", None),
    ("root.a.b.c", None),
    ("", None),
    ("root.", None),
]


@pytest.mark.parametrize(("path", "found"), FIND)
def test_find_queue(path: str, found: str | None) -> None:
    p = partition("- name: A\n  queues: [{name: B}]")
    result = find_queue(p, path)
    assert (result.path if result else None) == found


def test_specs_are_immutable_hashable_and_picklable() -> None:
    cfg = load_config(
        "partitions:\n  - queues:\n    - name: a\n      properties: {x: y}\n      resources: {max: {memory: 1}}\n"
    )
    q = cfg.partitions[0].root.children[0]
    with pytest.raises(AttributeError):
        q.name = "b"  # type: ignore[misc]
    with pytest.raises(TypeError):
        q.properties["x"] = "z"  # type: ignore[index]
    assert hash(cfg) == hash(copy.deepcopy(cfg))
    assert pickle.loads(pickle.dumps(cfg)) == cfg
    assert q.max == {"memory": 1}
