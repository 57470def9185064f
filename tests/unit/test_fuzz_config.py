"""Fuzzing the config loader: any text yields a config or a ``ConfigError`` with reasons.

Never another exception (a ``config.updated`` that raised would crash the core on every
replay of the log), never unbounded memory: alias bombs and deep nesting stop at fixed
budgets. Only PyYAML's safe loader runs, so no tag can build an object.

``EVSCHED_FUZZ_EXAMPLES=N`` runs N examples per property; ``tests/fuzz/fuzz_config.py`` is
the atheris harness for long runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.codec import decode_input
from events.models import ConfigApplied, InputEvent, InputRejected
from scheduler.cli.config_arg import check_config_file
from scheduler.config import ConfigError, SchedulerConfig, go_regexp, load_config
from scheduler.config.yamltree import MAX_BYTES, MAX_DEPTH, MAX_NODES
from scheduler.core.engine import Engine
from tests.fuzz.strategies import BILLION_LAUGHS, EDGE_INTS, EDGE_STRINGS, HOSTILE_YAML, REGEXP_TEXTS, regexps

EXAMPLES = int(os.environ.get("EVSCHED_FUZZ_EXAMPLES", "0")) or None
FUZZ = settings(
    max_examples=EXAMPLES or 100, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
MiB = 1 << 20


def verdict(text: str | bytes) -> SchedulerConfig | ConfigError:
    """load_config's answer; any exception other than ConfigError fails the test."""
    try:
        return load_config(text)
    except ConfigError as exc:
        assert exc.reasons and all(isinstance(r, str) and r for r in exc.reasons)
        return exc


# ---------------------------------------------------------------- generated configurations

KEYS = [
    "partitions", "name", "queues", "parent", "submitacl", "adminacl", "maxapplications", "properties",
    "resources", "guaranteed", "max", "childtemplate", "limits", "limit", "users", "groups", "maxresources",
    "nodesortpolicy", "type", "resourceweights", "placementrules", "preemption", "enabled", "checksum",
    "vcore", "memory", "priority.offset", "priority.policy", "application.sort.policy", "root", "unknown",
]  # fmt: skip
LEAVES = st.one_of(
    st.sampled_from(EDGE_INTS),
    st.sampled_from(EDGE_STRINGS[:30]),
    st.sampled_from(["1Gi", "500m", "10k", "-1", "1.5", "fair", "binpacking", "fence", "*", " ", "", "0x10",
                     "1e999", ".inf", ".nan", "2001-13-45", "2001-12-14", "yes", "~", "!!binary", "1_000"]),
    st.floats(allow_nan=True),
    st.booleans(),
    st.none(),
    st.text(max_size=12),
)  # fmt: skip
TREES = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=5),
    max_leaves=30,
)


def config_like(tree: Any) -> Any:
    """A tree wrapped in the real top-level shape, so validators are reached (callers wrap half the time)."""
    return {"partitions": [{"name": "default", "queues": [{"name": "root", "queues": [tree]}]}]}


@FUZZ
@given(TREES, st.booleans())
def test_generated_configurations_load_or_are_rejected(tree: Any, wrap: bool) -> None:
    text = yaml.safe_dump(config_like(tree) if wrap else tree, allow_unicode=True)
    verdict(text)


@FUZZ
@given(TREES, st.data())
def test_mutated_configuration_text_never_crashes(tree: Any, data: st.DataObject) -> None:
    text = list(yaml.safe_dump(config_like(tree)))
    for _ in range(data.draw(st.integers(1, 5))):
        pos = data.draw(st.integers(0, len(text)))
        text[pos:pos] = data.draw(st.sampled_from(["&a ", "*a", "!!", "{", "[", ": ", "\n  ", "- ", "'", '"',
                                                  "\t", "%", "<<: ", "? ", "|", ">", "#", "\x00", "\ufeff"]))
    verdict("".join(text))


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_never_crash(raw: bytes) -> None:
    verdict(raw)


@FUZZ
@given(st.text(max_size=300))
def test_random_text_never_crashes(text: str) -> None:
    verdict(text)


@pytest.mark.parametrize("text", HOSTILE_YAML, ids=[repr(t[:24]) for t in HOSTILE_YAML])
def test_hostile_yaml_is_rejected_with_a_reason(text: str) -> None:
    result = verdict(text)
    # docs/contract.md §5: an invalid property *value* falls back to its default; all else is rejected.
    assert isinstance(result, SchedulerConfig if "priority.offset" in text else ConfigError)


# ---------------------------------------------------------------- bombs, nesting, size


BOUNDED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
from scheduler.config import ConfigError, load_config
from tests.fuzz.strategies import BILLION_LAUGHS
cases = {{
    "billion-laughs": BILLION_LAUGHS,
    "self-alias": "a: &x [*x, *x]",
    "open-brackets": "[" * 200_000,
    "block-nesting": "- " * 10_000 + "x",
    "fan-out": "a: &a [" + ",".join(["x"] * 1000) + "]\\nb: [" + ",".join(["*a"] * 1000) + "]",
}}
for name, text in cases.items():
    try:
        load_config(text)
        print(name, "ACCEPTED")
    except ConfigError as exc:
        print(name, exc.reasons[0])
"""


def test_bombs_nesting_and_node_count_are_rejected_in_bounded_memory() -> None:
    # In a child process whose address space is capped: an unbounded expansion would die
    # with MemoryError instead of printing a reason for every case.
    limit = 1024 * MiB
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", BOUNDED.format(limit=limit)], cwd=root, capture_output=True,
                          text=True, timeout=240, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert lines == {
        "billion-laughs": f"YAML expands to more than {MAX_NODES} nodes (alias/anchor bomb?)",
        "self-alias": f"YAML nests deeper than {MAX_DEPTH} levels",
        "open-brackets": f"YAML nests deeper than {MAX_DEPTH} levels",
        "block-nesting": f"YAML nests deeper than {MAX_DEPTH} levels",
        "fan-out": f"YAML expands to more than {MAX_NODES} nodes (alias/anchor bomb?)",
    }


def test_a_long_flat_document_stops_composing_at_the_node_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    # Composing every node of a 1 MiB list of tiny items took 9.8 s and ~150 MiB before the
    # budget was also applied while composing (measured; docs/reliability.md). A small
    # budget here shows the composer stops at it: it never sees the item after it.
    from scheduler.config import yamltree

    monkeypatch.setattr(yamltree, "MAX_NODES", 50)
    text = "".join(f"- {i}\n" for i in range(60)) + "- [unclosed\n"
    with pytest.raises(ConfigError, match="more than 50 nodes"):
        load_config(text)  # without the budget while composing: a YAML syntax error at the end


def test_billion_laughs_is_rejected_within_a_node_budget() -> None:
    # 9^9 = 387,420,489 "lol"s if expanded; the converter stops at MAX_NODES.
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError, match=f"more than {MAX_NODES} nodes"):
            load_config(BILLION_LAUGHS)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * MiB


def test_configurations_over_1MiB_are_rejected_before_parsing() -> None:
    with pytest.raises(ConfigError, match="bytes, more than"):
        load_config("#" * (MAX_BYTES + 1))


@pytest.mark.parametrize("text", ["- a\n- b\n", "just text", "42", "~", "[]", "!!binary aGVsbG8="])
def test_a_document_that_is_not_a_mapping_is_rejected(text: str) -> None:
    with pytest.raises(ConfigError, match="must be a YAML mapping"):
        load_config(text)


def test_invalid_utf8_is_rejected() -> None:
    with pytest.raises(ConfigError, match="UTF-8"):
        load_config(b"partitions: \xff\xfe")


# ---------------------------------------------------------------- safe loading only


@pytest.mark.parametrize(
    "tag",
    ["!!python/object/apply:os.system", "!!python/object/new:os.system", "!!python/name:os.system",
     "!!python/module:os", "!!python/object:os.system", "!!set", "!!omap", "!!pairs"],
)  # fmt: skip
def test_object_building_tags_are_refused(tag: str, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    text = f"partitions: {tag} ['touch {marker}']\n"
    with pytest.raises(ConfigError):
        load_config(text)
    assert not marker.exists()


# ---------------------------------------------------------------- regressions found by fuzzing


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # ValueError out of PyYAML's int constructor (Python refuses int() of > 4,300 digits)
        ("partitions: [{name: default, queues: [{name: root, maxapplications: " + "9" * 5000 + "}]}]",
         "maxapplications': expected a non-negative integer"),
        # OverflowError out of float(): an integer weight too large for a float
        ("partitions: [{name: default, nodesortpolicy: {type: binpacking, resourceweights: {vcore: "
         + "9" * 400 + "}}, queues: [{name: root}]}]", "must be a finite number"),
        # ValueError out of PyYAML's timestamp constructor: month 13, day 30 of February, +24:00
        ("partitions: [{name: default, queues: [{name: root, maxapplications: 2001-13-45}]}]",
         "expected a non-negative integer, found '2001-13-45'"),
        ("partitions: [{name: default, queues: [{name: root, maxapplications: 2024-02-30T00:00:00Z}]}]",
         "found '2024-02-30T00:00:00Z'"),
        ("partitions: [{name: default, queues: [{name: root, maxapplications: 2024-01-01T00:00:00+24:00}]}]",
         "found '2024-01-01T00:00:00+24:00'"),
        # int() of 5,000 digits inside a quantity: the reason was Python's own message
        ("partitions: [{name: default, queues: [{name: root, queues: [{name: a, resources: {max: {memory: '"
         + "9" * 5000 + "'}}}]}]}]", "overflow"),
    ],
)  # fmt: skip
def test_values_that_crashed_the_loader_are_rejected_with_a_reason(text: str, reason: str) -> None:
    result = verdict(text)
    assert isinstance(result, ConfigError)
    assert any(reason in r for r in result.reasons), result.reasons


def test_a_scalar_that_only_looks_like_a_timestamp_stays_text() -> None:
    # Go's YAML decoder keeps "2001-13-45" as a string; a string field takes it as written.
    base = "partitions: [{name: default, queues: [{name: root, submitacl: '*', queues: [{name: a}]}]}]\n"
    assert isinstance(verdict(base + "checksum: 2001-13-45\n"), SchedulerConfig)


def test_a_crashing_config_update_is_rejected_by_the_core_and_the_old_config_stays() -> None:
    bad = "partitions: [{name: default, nodesortpolicy: {resourceweights: {vcore: " + "9" * 400 + "}}}]"
    engine = Engine()
    before = engine.state.config.checksum
    record = {"id": "c1", "source": "s", "type": "config.updated", "data": {"yaml": bad}}
    event = decode_input(orjson.dumps(record), append_time_us=0)
    assert isinstance(event, InputEvent)
    engine.apply(event)
    outputs = [o.data for o in engine.cycle(0, {})]
    assert [o.reason for o in outputs if isinstance(o, InputRejected)] == ["config-invalid"]
    assert not any(isinstance(o, ConfigApplied) for o in outputs)
    assert engine.state.config.checksum == before


def test_config_check_reports_a_bomb_and_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(BILLION_LAUGHS)
    code, lines = check_config_file(str(path))
    assert code == 1 and any("nodes" in line for line in lines)


@FUZZ
@given(regexps, st.sampled_from(REGEXP_TEXTS))
@pytest.mark.timeout(300)  # a backtracking engine would not finish: this fails, not hangs for ever
def test_user_supplied_regexps_compile_or_are_refused_and_match_in_bounded_time(pattern: str, text: str) -> None:
    try:
        go_regexp.check(pattern)
    except go_regexp.PatternError:
        assert not go_regexp.search(pattern, text)  # a refused pattern matches nothing
    else:
        assert isinstance(go_regexp.search(pattern, text), bool)
    config = ("partitions:\n  - name: default\n    placementrules:\n      - name: user\n        create: true\n"
              f"        filter: {{type: allow, users: [{json.dumps(pattern)}]}}\n"
              "    queues:\n      - name: root\n        submitacl: '*'\n")
    assert isinstance(verdict(config), SchedulerConfig | ConfigError)
