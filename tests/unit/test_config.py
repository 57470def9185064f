"""Config loading: every validation rule, hostile YAML, root insertion, checksum, the CLI check."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import pytest

from scheduler.cli.config_arg import check_config_file
from scheduler.config import (
    DEFAULT_CONFIG_YAML,
    ConfigError,
    default_config,
    find_queue,
    load_config,
)


def part(queues: str, extra: str = "") -> str:
    """A one-partition document; ``queues`` is the YAML list under ``queues:``."""
    body = textwrap.indent(textwrap.dedent(queues).strip("\n"), "      ")
    tail = textwrap.indent(textwrap.dedent(extra).strip("\n"), "    ") if extra else ""
    return f"partitions:\n  - name: default\n    queues:\n{body}\n{tail}\n"


def reasons_of(text: str | bytes) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(text)
    assert info.value.reasons, "a ConfigError always has reasons"
    return info.value.reasons


# (case id, YAML, fragment expected in one of the reasons)
INVALID = [
    # unknown keys, anywhere
    ("unknown-top-key", part("- name: root") + "extra: 1\n", "top level: key 'extra': unknown key"),
    ("unknown-partition-key", part("- name: root", "statedumpfilepath: x"), "'statedumpfilepath'"),
    (
        "unknown-queue-key",
        part("- name: a\n  maxapps: 1"),
        "queue 'root.a': key 'maxapps': unknown",
    ),
    ("key-is-case-sensitive", part("- name: a\n  Parent: true"), "key 'Parent': unknown key"),
    (
        "unknown-resources-key",
        part("- name: a\n  resources: {min: {memory: 1}}"),
        "key 'resources.min': unknown key",
    ),
    (
        "unknown-nested-queue-key",
        part("- name: root\n  queues:\n  - name: b\n    queues: [{name: c, sla: 1}]"),
        "queue 'root.b.c': key 'sla': unknown key",
    ),
    (
        "unknown-childtemplate-key",
        part("- name: a\n  childtemplate: {parent: true}"),
        "key 'childtemplate.parent'",
    ),
    ("unknown-limit-key", part("- name: a\n  limits: [{users: [x], max: 1}]"), "limits.0.max"),
    (
        "unknown-nodesort-key",
        part("- name: a", "nodesortpolicy: {kind: fair}"),
        "nodesortpolicy.kind",
    ),
    (
        "unknown-placement-key",
        part("- name: a", "placementrules: [{name: tag, filter: {type: allow, other: 1}}]"),
        "placementrules.0.filter.other",
    ),
    ("unknown-preemption-key", part("- name: a", "preemption: {delay: 1}"), "preemption.delay"),
    # wrong types
    (
        "parent-not-bool",
        part("- name: a\n  parent: 'true'"),
        "expected true or false, found 'true'",
    ),
    (
        "maxapps-string",
        part("- name: a\n  maxapplications: '5'"),
        "expected a non-negative integer",
    ),
    ("maxapps-negative", part("- name: a\n  maxapplications: -1"), "found '-1'"),
    ("maxapps-float", part("- name: a\n  maxapplications: 1.5"), "non-negative integer"),
    ("queues-not-list", part("- name: a\n  queues: b"), "key 'queues': expected a list, found 'b'"),
    ("properties-list", part("- name: a\n  properties: [a]"), "expected a mapping, found a list"),
    ("property-value-map", part("- name: a\n  properties: {a: {b: c}}"), "expected a string"),
    ("acl-list", part("- name: a\n  submitacl: [a]"), "key 'submitacl': expected a string"),
    ("partitions-not-list", "partitions: {name: x}\n", "key 'partitions': expected a list"),
    (
        "queue-not-mapping",
        part("- just-a-name"),
        "key 'queues.0': expected a mapping, found 'just-a-name'",
    ),
    ("weight-string", part("- name: a", "nodesortpolicy: {resourceweights: {v: x}}"), "number"),
    # at least one partition; unique names; queues set
    ("no-partitions", "partitions: []\n", "at least one partition"),
    ("null-partitions", "partitions:\n", "at least one partition"),
    ("no-partitions-key", "checksum: abc\n", "at least one partition"),
    (
        "duplicate-partition",
        "partitions:\n  - {name: A, queues: []}\n  - {name: a, queues: []}\n",
        "partition 'a': duplicate partition name",
    ),
    (
        "duplicate-default-partition",
        "partitions:\n  - {queues: []}\n  - {name: DEFAULT, queues: []}\n",
        "partition 'default': duplicate partition name",
    ),
    ("queues-not-set", "partitions:\n  - name: x\n", "partition 'x': key 'queues': queue config"),
    # queue names
    ("name-with-dot", part("- name: a.b"), "invalid child queue name 'a.b'"),
    ("name-empty", part("- name: ''"), "invalid child queue name ''"),
    ("name-missing", part("- parent: true"), "invalid child queue name ''"),
    ("name-too-long", part("- name: " + "x" * 65), "invalid child queue name"),
    ("name-space", part("- name: 'a b'"), "invalid child queue name 'a b'"),
    ("name-non-ascii", part("- name: qué"), "invalid child queue name"),
    ("name-newline", part('- name: "a\\n"'), "invalid child queue name"),
    (
        "duplicate-siblings",
        part("- name: a\n- name: A"),
        "queue 'root': duplicate child queue name 'A'",
    ),
    (
        "duplicate-nested-siblings",
        part("- name: root\n  queues:\n  - name: p\n    queues: [{name: x}, {name: X}]"),
        "queue 'root.p': duplicate child queue name 'X'",
    ),
    # root resources
    (
        "root-guaranteed",
        part("- name: root\n  resources: {guaranteed: {memory: 1}}"),
        "root queue must not have resources",
    ),
    ("root-max", part("- name: ROOT\n  resources: {max: {vcore: 1}}"), "root queue must not have"),
    ("root-empty-max", part("- name: root\n  resources: {max: {}}"), "root queue must not have"),
    # guaranteed vs max
    (
        "guaranteed-over-max",
        part("- name: a\n  resources: {guaranteed: {memory: 2G}, max: {memory: 1G}}"),
        "queue 'root.a': guaranteed resources {memory: 2 GB} are larger than max",
    ),
    (
        "guaranteed-over-zero-max-type",
        part("- name: a\n  resources: {guaranteed: {vcore: 1}, max: {vcore: 0, memory: 5}}"),
        "guaranteed resources {vcore: 1 core} are larger than max",
    ),
    # child max vs parent max
    (
        "child-max-over-parent-max",
        part("- name: p\n  resources: {max: {memory: 10}}\n  queues: [{name: c, resources: {max: {memory: 11}}}]"),
        "queue 'root.p.c': max resources {memory: 11 B} are larger than the max {memory: 10 B}",
    ),
    (
        "grandchild-max-over-grandparent-max",
        part(
            "- name: p\n  resources: {max: {vcore: 2}}\n  queues:\n  - name: m\n    queues:\n"
            "    - name: c\n      resources: {max: {vcore: 3}}"
        ),
        "queue 'root.p.m.c': max resources {vcore: 3 cores}",
    ),
    # sum of children's guaranteed
    (
        "children-guaranteed-over-parent-guaranteed",
        part(
            "- name: p\n  resources: {guaranteed: {memory: 10}}\n  queues:\n"
            "  - {name: a, resources: {guaranteed: {memory: 6}}}\n"
            "  - {name: b, resources: {guaranteed: {memory: 5}}}"
        ),
        "queue 'root.p': guaranteed resources {memory: 10 B} are smaller than the sum of the "
        "children's guaranteed resources {memory: 11 B}",
    ),
    (
        "children-guaranteed-over-parent-max",
        part(
            "- name: p\n  resources: {max: {vcore: 1}}\n  queues:\n"
            "  - {name: a, resources: {guaranteed: {vcore: 600m}}}\n"
            "  - {name: b, resources: {guaranteed: {vcore: 600m}}}"
        ),
        "queue 'root.p': max resources {vcore: 1 core} are smaller than the sum",
    ),
    (
        "grandchildren-guaranteed-count-for-child-without-own",
        part(
            "- name: p\n  resources: {guaranteed: {memory: 10}}\n  queues:\n  - name: m\n"
            "    queues:\n    - {name: a, resources: {guaranteed: {memory: 7}}}\n"
            "    - {name: b, resources: {guaranteed: {memory: 7}}}"
        ),
        "queue 'root.p': guaranteed resources {memory: 10 B} are smaller than the sum",
    ),
    (
        "children-guaranteed-over-grandparent-max",
        part(
            "- name: p\n  resources: {max: {memory: 10}}\n  queues:\n  - name: m\n"
            "    queues:\n    - {name: a, resources: {guaranteed: {memory: 7}}}\n"
            "    - {name: b, resources: {guaranteed: {memory: 7}}}"
        ),
        "queue 'root.p.m': max resources {memory: 10 B} are smaller than the sum",
    ),
    # bad quantities
    (
        "negative-quantity",
        part("- name: a\n  resources: {max: {memory: -1}}"),
        "invalid quantity '-1'",
    ),
    (
        "non-numeric",
        part("- name: a\n  resources: {max: {memory: lots}}"),
        "invalid quantity 'lots'",
    ),
    (
        "fraction-vcore",
        part("- name: a\n  resources: {max: {vcore: 1.5}}"),
        "invalid quantity '1.5'",
    ),
    ("milli-memory", part("- name: a\n  resources: {guaranteed: {memory: 5m}}"), "invalid suffix"),
    ("overflow", part("- name: a\n  resources: {max: {vcore: 10E}}"), "overflow"),
    ("null-quantity", part("- name: a\n  resources: {max: {memory: ~}}"), "invalid quantity ''"),
    (
        "quantity-key-named",
        part("- name: a\n  resources: {max: {gpu: x}}"),
        "queue 'root.a': key 'resources.max.gpu': invalid quantity 'x'",
    ),
    (
        "childtemplate-quantity",
        part("- name: a\n  parent: true\n  childtemplate: {resources: {max: {memory: 1X}}}"),
        "key 'childtemplate.resources.max.memory'",
    ),
    ("hex-is-not-a-quantity", part("- name: a\n  resources: {max: {memory: 0x10}}"), "'0x10'"),
    # maxapplications
    (
        "maxapps-child-unset",
        part("- name: p\n  maxapplications: 5\n  queues: [{name: c}]"),
        "queue 'root.p.c': key 'maxapplications': must be set (> 0) because the parent",
    ),
    (
        "maxapps-child-over-parent",
        part("- name: p\n  maxapplications: 5\n  queues: [{name: c, maxapplications: 6}]"),
        "6 is larger than the parent queue's maxapplications 5",
    ),
    # node sort policy
    (
        "nodesort-type",
        part("- name: a", "nodesortpolicy: {type: spread}"),
        "undefined policy 'spread'",
    ),
    (
        "negative-weight",
        part("- name: a", "nodesortpolicy: {resourceweights: {vcore: -0.5}}"),
        "key 'nodesortpolicy.resourceweights.vcore': resource weight -0.5",
    ),
    ("nan-weight", part("- name: a", "nodesortpolicy: {resourceweights: {vcore: .nan}}"), "nan"),
    ("inf-weight", part("- name: a", "nodesortpolicy: {resourceweights: {vcore: .inf}}"), "inf"),
    # ACLs
    ("acl-three-fields", part("- name: a\n  submitacl: u1 g1 x"), "more than two space-separated"),
    (
        "admin-acl-three-fields",
        part("- name: a\n  adminacl: 'a b c'"),
        "key 'adminacl': ACL 'a b c'",
    ),
    ("acl-tabs", part('- name: a\n  submitacl: "a\\tb\\tc"'), "more than two"),
    ("acl-double-space", part("- name: a\n  submitacl: 'u1  g1'"), "more than two"),
    ("acl-wildcard-padded", part("- name: a\n  submitacl: ' * '"), "more than two"),
    ("root-acl", part("- name: root\n  submitacl: 'a b c'"), "queue 'root': key 'submitacl'"),
    # limits
    (
        "limit-empty",
        part("- name: a\n  limits: [{maxapplications: 1}]"),
        "empty user and group lists",
    ),
    (
        "limit-bad-user",
        part("- name: a\n  limits: [{users: ['1x'], maxapplications: 1}]"),
        "user name '1x'",
    ),
    (
        "limit-bad-group",
        part("- name: a\n  limits: [{groups: ['g@x'], maxapplications: 1}]"),
        "group name",
    ),
    (
        "limit-duplicate-user",
        part("- name: a\n  limits:\n  - {users: [u], maxapplications: 1}\n  - {users: [u], maxapplications: 2}"),
        "duplicated user name 'u'",
    ),
    (
        "limit-wildcard-not-last",
        part("- name: a\n  limits:\n  - {users: ['*'], maxapplications: 1}\n  - {users: [u], maxapplications: 1}"),
        "must not follow the wildcard user limit",
    ),
    (
        "limit-only-wildcard-group",
        part("- name: a\n  limits: [{groups: ['*'], maxapplications: 1}]"),
        "wildcard group limit needs at least one named group",
    ),
    (
        "limit-zero-resources",
        part("- name: a\n  limits: [{users: [u], maxresources: {memory: 0}}]"),
        "maxresources must be greater than zero",
    ),
    (
        "limit-nothing-set",
        part("- name: a\n  limits: [{limit: l1, users: [u]}]"),
        "limit 'l1': neither",
    ),
    (
        "limit-bad-quantity",
        part("- name: a\n  limits: [{users: [u], maxresources: {memory: x}}]"),
        "maxresources.memory: invalid quantity 'x'",
    ),
    (
        "limit-apps-over-queue",
        part("- name: a\n  maxapplications: 2\n  limits: [{users: [u], maxapplications: 3}]"),
        "maxapplications 3 exceeds the queue's maxapplications 2",
    ),
    (
        "limit-resources-over-queue-max",
        part("- name: a\n  resources: {max: {memory: 5}}\n  limits: [{users: [u], maxresources: {memory: 6}}]"),
        "maxresources {memory: 6 B} exceed the queue's max resources {memory: 5 B}",
    ),
    (
        "limit-user-over-parent-user",
        part(
            "- name: p\n  limits: [{users: [u], maxresources: {memory: 5}}]\n  queues:\n"
            "  - {name: c, limits: [{users: [u], maxresources: {memory: 6}}]}"
        ),
        "queue 'root.p.c': key 'limits': user 'u' maxresources {memory: 6 B} exceed {memory: 5 B}",
    ),
    (
        "limit-user-over-parent-wildcard",
        part(
            "- name: p\n  limits: [{users: ['*'], maxresources: {memory: 5}}]\n  queues:\n"
            "  - {name: c, limits: [{users: [u], maxresources: {memory: 6}}]}"
        ),
        "exceed the wildcard user limit {memory: 5 B}",
    ),
    (
        "limit-apps-over-parent",
        part(
            "- name: p\n  limits: [{groups: [g], maxapplications: 2}]\n  queues:\n"
            "  - {name: c, limits: [{groups: [g], maxapplications: 3}]}"
        ),
        "group 'g' maxapplications 3 exceeds 2",
    ),
    (
        "limits-partition-vs-root",
        part(
            "- name: root\n  limits: [{users: [a], maxapplications: 1}]",
            "limits: [{users: [b], maxapplications: 1}]",
        ),
        "partition limits and root queue limits differ",
    ),
]


@pytest.mark.parametrize(("text", "fragment"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_config_is_rejected_with_reason(text: str, fragment: str) -> None:
    reasons = reasons_of(text)
    assert any(fragment in r for r in reasons), reasons


VALID = [
    ("bare-root", part("- name: root")),
    ("empty-queue-list", "partitions:\n  - queues: []\n"),
    ("name-64-chars", part("- name: " + "x" * 64)),
    ("name-chars", part("- name: A-b_9")),
    (
        "same-name-different-parents",
        part("- name: a\n  queues: [{name: x}]\n- name: b\n  queues: [{name: x}]"),
    ),
    (
        "guaranteed-type-not-in-max",
        part("- name: a\n  resources: {guaranteed: {gpu: 9}, max: {memory: 1}}"),
    ),
    (
        "guaranteed-equals-max",
        part("- name: a\n  resources: {guaranteed: {memory: 1Gi}, max: {memory: 1Gi}}"),
    ),
    (
        "child-max-other-type",
        part("- name: p\n  resources: {max: {memory: 1}}\n  queues: [{name: c, resources: {max: {gpu: 5}}}]"),
    ),
    (
        "child-max-equal",
        part("- name: p\n  resources: {max: {memory: 1}}\n  queues: [{name: c, resources: {max: {memory: 1}}}]"),
    ),
    (
        "maxapps-equal",
        part("- name: p\n  maxapplications: 3\n  queues: [{name: c, maxapplications: 3}]"),
    ),
    ("maxapps-only-child", part("- name: p\n  queues: [{name: c, maxapplications: 3}]")),
    ("nodesort-empty", part("- name: a", "nodesortpolicy: {type: ''}")),
    ("weights-zero", part("- name: a", "nodesortpolicy: {resourceweights: {vcore: 0, memory: 2}}")),
    ("acl-space", part("- name: a\n  submitacl: ' '")),
    ("acl-empty", part("- name: a\n  submitacl: ''")),
    ("acl-wildcard", part("- name: a\n  adminacl: '*'")),
    ("acl-users-groups", part("- name: a\n  submitacl: 'u1,u2 g1,g2'")),
    ("acl-groups-only", part("- name: a\n  submitacl: ' g1'")),
    ("acl-null", part("- name: a\n  submitacl: ~")),
    ("quantities-as-yaml-ints", part("- name: a\n  resources: {max: {memory: 10, vcore: 2}}")),
    ("checksum-key", part("- name: a") + "checksum: ABC\n"),
    ("preemption", part("- name: a", "preemption: {enabled: false}")),
    (
        "placement-rules",
        part(
            "- name: a\n  parent: true",  # a fixed rule before a dynamic one names a parent (YuniKorn)
            "placementrules:\n  - name: provided\n    create: true\n"
            "    filter: {type: allow, users: [x]}\n"
            "    parent: {name: fixed, value: root.a}\n    value: x",
        ),
    ),
    (
        "childtemplate",
        part(
            "- name: a\n  parent: true\n  childtemplate:\n"
            "    {maxapplications: 2, properties: {x: y}, resources: {max: {memory: 1}}}"
        ),
    ),
    (
        "limits-ok",
        part(
            "- name: p\n  limits:\n  - {limit: l, users: [u, 'bob@x.org'], groups: [g],\n"
            "     maxapplications: 5, maxresources: {memory: 5}}\n"
            "  - {users: ['*'], groups: ['*'], maxapplications: 9}\n  queues:\n"
            "  - name: c\n    limits: [{users: [u], maxresources: {memory: 4}, maxapplications: 5}]"
        ),
    ),
    (
        "limits-same-on-partition-and-root",
        part(
            "- name: root\n  limits: [{users: [a], maxapplications: 1}]",
            "limits: [{users: [a], maxapplications: 1}]",
        ),
    ),
    (
        "properties-any-values",
        part("- name: a\n  properties: {priority.offset: bogus, application.sort.policy: nope, x: 1}"),
    ),
    ("yaml-anchors-small", part("- name: a\n  properties: &p {k: v}\n- name: b\n  properties: *p")),
]


@pytest.mark.parametrize("text", [c[1] for c in VALID], ids=[c[0] for c in VALID])
def test_valid_config_loads(text: str) -> None:
    assert load_config(text).partitions


def test_every_reason_is_reported() -> None:
    text = part(
        "- name: a.b\n- name: c\n  submitacl: 'x y z'\n  resources: {max: {memory: -1}}\n"
        "- name: d\n  maxapplications: 2\n  queues: [{name: e}]",
        "nodesortpolicy: {type: nope}",
    )
    reasons = reasons_of(text)
    assert len(reasons) == 5, reasons
    for fragment in ("'a.b'", "'x y z'", "'-1'", "'root.d.e'", "'nope'"):
        assert any(fragment in r for r in reasons), (fragment, reasons)


def test_config_error_is_a_value_error_with_all_reasons_in_message() -> None:
    with pytest.raises(ValueError) as info:
        load_config(part("- name: a.b\n- name: c.d"))
    assert isinstance(info.value, ConfigError)
    assert "'a.b'" in str(info.value) and "'c.d'" in str(info.value)


# --- hostile or malformed YAML --------------------------------------------------------------

_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)

HOSTILE = [
    ("billion-laughs", _LAUGHS, "more than 100000 nodes"),
    ("recursive-alias", "partitions: &p [*p]\n", "deeper than"),
    ("deep-nesting", "[" * 10_000 + "]" * 10_000, "deeper than"),
    ("oversize", "# " + "x" * (1 << 20) + "\n", "more than the 1048576 allowed"),
    ("list-document", "- name: default\n", "must be a YAML mapping, found a list"),
    ("scalar-document", "hello\n", "must be a YAML mapping, found the scalar 'hello'"),
    ("empty-document", "", "at least one partition"),
    ("comment-only", "# nothing\n", "at least one partition"),
    ("two-documents", "partitions: []\n---\npartitions: []\n", "invalid YAML"),
    ("syntax-error", "partitions: [\n", "invalid YAML"),
    ("duplicate-key", "partitions: []\npartitions: []\n", "line 2: duplicate key 'partitions'"),
    ("complex-key", "? [a]\n: b\n", "mapping keys must be scalars"),
    ("python-tag", "partitions: !!python/object:os.system {}\n", "unsupported YAML tag"),
    ("unknown-tag", "partitions: !foo bar\n", "could not determine a constructor"),
    ("control-char", "partitions: \x00\n", "invalid YAML"),
    (
        "merge-key",
        "partitions:\n  - <<: {name: x}\n    queues: []\n",
        "merge keys ('<<') are not supported",
    ),
]


@pytest.mark.parametrize(("text", "fragment"), [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_hostile_yaml_is_rejected_cleanly(text: str, fragment: str) -> None:
    reasons = reasons_of(text)
    assert any(fragment in r for r in reasons), reasons


def test_invalid_utf8_bytes_rejected() -> None:
    assert "not valid UTF-8" in reasons_of(b"partitions: [\xff]\n")[0]


def test_lone_surrogate_rejected() -> None:
    assert "not valid UTF-8" in reasons_of("partitions: ['\ud800']\n")[0]


# --- structure: partitions and root insertion ------------------------------------------------


def _paths(text: str) -> list[str]:
    root = load_config(text).partitions[0].root
    out: list[str] = []

    def visit(q: object) -> None:
        out.append(q.path)  # type: ignore[attr-defined]
        for kid in q.children:  # type: ignore[attr-defined]
            visit(kid)

    visit(root)
    return out


ROOT_CASES = [
    ("explicit-root", part("- name: root\n  queues: [{name: a}]"), ["root", "root.a"]),
    ("upper-case-root", part("- name: ROOT\n  queues: [{name: A}]"), ["root", "root.a"]),
    ("single-non-root", part("- name: a"), ["root", "root.a"]),
    (
        "several-top-level",
        part("- name: a\n- name: b\n  queues: [{name: c}]"),
        ["root", "root.a", "root.b", "root.b.c"],
    ),
    ("root-among-others", part("- name: root\n- name: x"), ["root", "root.root", "root.x"]),
    ("empty-list", "partitions:\n  - queues: []\n", ["root"]),
]


@pytest.mark.parametrize(("text", "paths"), [c[1:] for c in ROOT_CASES], ids=[c[0] for c in ROOT_CASES])
def test_missing_root_is_inserted(text: str, paths: list[str]) -> None:
    assert _paths(text) == paths


def test_root_is_never_a_leaf_and_root_resources_on_inserted_root_are_absent() -> None:
    root = load_config(part("- name: root\n  parent: false")).partitions[0].root
    assert root.is_leaf is False and root.children == ()
    assert root.guaranteed == {} and root.max == {}


def test_partition_names_and_order() -> None:
    cfg = load_config("partitions:\n  - {queues: []}\n  - {name: GPU, queues: []}\n")
    assert [p.name for p in cfg.partitions] == ["default", "gpu"]


# --- the default configuration, checksum ------------------------------------------------------


def test_default_config() -> None:
    cfg = default_config()
    assert cfg.yaml == DEFAULT_CONFIG_YAML
    assert cfg.checksum == hashlib.sha256(DEFAULT_CONFIG_YAML.encode()).hexdigest()
    (p,) = cfg.partitions
    assert p.name == "default" and p.node_sort_policy == "fair"
    assert p.resource_weights == {"memory": 1.0, "vcore": 1.0}
    assert p.root.path == "root" and p.root.submit_acl == "*" and not p.root.is_leaf
    (leaf,) = p.root.children
    assert leaf.path == "root.default" and leaf.is_leaf and leaf.submit_acl is None
    assert find_queue(p, "ROOT.Default") is leaf
    assert default_config() == cfg


def test_checksum_is_sha256_of_exact_text() -> None:
    text = part("- name: a")
    cfg = load_config(text)
    assert cfg.checksum == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert cfg.yaml == text
    assert load_config(text).checksum == cfg.checksum  # stable
    assert load_config(text.encode("utf-8")).checksum == cfg.checksum  # bytes == str
    assert load_config(text + "# comment\n").checksum != cfg.checksum  # any byte counts
    unicode_text = part("- name: a\n  properties: {owner: José}")
    assert load_config(unicode_text).checksum == hashlib.sha256(unicode_text.encode()).hexdigest()


# --- check_config_file --------------------------------------------------------------------------


def test_check_config_file_ok(tmp_path: Path) -> None:
    path = tmp_path / "queues.yaml"
    text = part("- name: a\n- name: b\n  queues: [{name: c}]")
    path.write_text(text, encoding="utf-8")
    code, lines = check_config_file(str(path))
    checksum = hashlib.sha256(text.encode()).hexdigest()
    assert (code, lines) == (0, [f"config OK: 1 partitions, 4 queues, checksum {checksum}"])


def test_check_config_file_invalid(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(part("- name: a.b\n  submitacl: 'a b c'"), encoding="utf-8")
    code, lines = check_config_file(str(path))
    assert code == 1 and len(lines) == 2


@pytest.mark.parametrize("name", ["missing.yaml", "."])
def test_check_config_file_unreadable(tmp_path: Path, name: str) -> None:
    code, lines = check_config_file(str(tmp_path / name))
    assert code == 1 and len(lines) == 1 and "cannot read config file" in lines[0]
