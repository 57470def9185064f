"""Hostile inputs, round two (issue 36): regexps, resource types, rules versions, log lines."""

from __future__ import annotations

import logging
import sys
from typing import Any

import orjson
import pytest

from projections.node_index import MIN_DEAD, NodeIndex
from projections.policies import NodeSortPolicy
from scheduler.cli.logging_setup import TextFormatter
from scheduler.config import check_config, go_regexp, load_config
from scheduler.config.errors import ConfigError
from scheduler.core.rules_version import RULES_VERSION, rules_version_problem
from scheduler.simulation.simulate import Simulation
from tests.sim import SCHEDULE, ask, node, of_type, placements, run

# The reviewer's pattern: exponential in Python's backtracking ``re`` (27 characters: 10 s).
CATASTROPHIC = r"^(\w+\.?)+@corp\.example$"

FILTERED = """
partitions:
  - name: default
    placementrules:
      - name: user
        create: true
        filter: {type: allow, users: ["PATTERN"]}
    queues:
      - name: root
        submitacl: '*'
"""


def _config(pattern: str) -> str:
    return FILTERED.replace("PATTERN", pattern.replace("\\", "\\\\"))


def _user_app(app_id: str, user: str) -> dict[str, Any]:
    return {"type": "app.added", "data": {"app_id": app_id, "user": user}}


@pytest.mark.timeout(120)  # before the fix: 60 characters would take years
def test_a_catastrophic_filter_regexp_is_matched_in_linear_time() -> None:
    outputs, _ = run([_user_app("evil", "a" * 60), _user_app("ok", "bob.smith@corp.example")],
                         _config(CATASTROPHIC))
    placed = {d["app_id"]: d["queue"] for d in of_type(outputs, "app.placed")}
    assert placed == {"ok": "root.bob_dot_smith@corp_dot_example"}
    assert [d["reason"] for d in of_type(outputs, "input.rejected")] == ["no-placement"]


def test_filter_regexps_follow_go_semantics_not_pythons() -> None:
    # Go's ``$`` (without (?m)) matches only at the very end; Python's also before a final newline.
    outputs, _ = run([_user_app("nl", "bob\n"), _user_app("plain", "bob")], _config("^bob$"))
    placed = {d["app_id"] for d in of_type(outputs, "app.placed")}
    assert placed == {"plain"}
    # ``\w`` is ASCII in Go; Python's str patterns match any letter.
    assert not go_regexp.search(r"^\w+$", "élan")
    assert go_regexp.search(r"^\pL+$", "élan")


@pytest.mark.parametrize("pattern", [r"(a)\1", "(?=a)b", "(?<!a)b", "a{1001}", "a++"])
def test_constructs_go_does_not_have_are_refused_by_config_check(pattern: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(_config(pattern))
    assert any("not a name list or a regexp" in r for r in err.value.reasons)


def test_a_pattern_past_the_length_bound_is_refused() -> None:
    with pytest.raises(go_regexp.PatternError, match="at most 4096"):
        go_regexp.check("a|" * 2100)


def test_config_check_names_what_go_refuses() -> None:
    code, lines = check_config(_config(r"(a)\1").encode())
    assert code == 1 and any("invalid escape sequence" in line for line in lines)


# -- resource types ------------------------------------------------------------------

BOUNDED = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        properties: {evsched.resource.types.max: "8"}
        queues:
          - name: default
"""


def _types(prefix: str, n: int) -> dict[str, int]:
    return {f"{prefix}{i}": 1 for i in range(n)}


def test_resource_types_past_the_bound_are_rejected_with_a_reason() -> None:
    lines = [
        node("n1"),  # vcore, memory
        {"type": "node.added", "data": {"node_id": "n2", "capacity": {"vcore": 1, **_types("x", 6)}}},  # 8 in use
        {"type": "node.added", "data": {"node_id": "n3", "capacity": {"vcore": 1, "y": 1}}},  # 9: refused
        {"type": "node.updated", "data": {"node_id": "n2", "capacity": {"vcore": 1, **_types("z", 6)}}},  # swap: 8
        {"type": "app.added", "data": {"app_id": "a", "queue": "root.default", "user": "u"}},
        {"type": "ask.added", "data": {"app_id": "a", "ask_id": "k1", "resources": {"vcore": 1, "w": 1}}},  # 9th
        ask("a", "k2", vcore=1000),
        SCHEDULE,
    ]
    outputs, state = run(lines, BOUNDED)
    rejected = of_type(outputs, "input.rejected")
    assert [r["reason"] for r in rejected] == ["too-many-resource-types"] * 2
    assert "evsched.resource.types.max" in rejected[0]["message"] and "past its bound of 8" in rejected[0]["message"]
    assert [a for a, _ in placements(outputs)] == ["k2"]
    assert sorted(state["nodes"]) == ["n1", "n2"]


def test_the_default_bound_is_generous_and_valid_input_is_unchanged() -> None:
    outputs, _ = run([{"type": "node.added", "data": {"node_id": "n", "capacity": _types("t", 1000)}}])
    assert not of_type(outputs, "input.rejected")
    outputs, _ = run([{"type": "node.added", "data": {"node_id": "n", "capacity": _types("t", 1025)}}])
    assert [r["reason"] for r in of_type(outputs, "input.rejected")] == ["too-many-resource-types"]


def test_node_index_columns_are_dropped_when_no_node_uses_their_type() -> None:
    index = NodeIndex(NodeSortPolicy.FAIR, {"vcore": 1.0, "memory": 1.0}, block_size=4)
    for i in range(40):
        index.upsert(f"n{i}", {"vcore": 8, "memory": 8}, {"vcore": 8, "memory": 8})
    for round_ in range(20):  # one agent's node sends 400 new names each time
        names = {f"r{round_}-{j}": 1 for j in range(400)}
        index.upsert("agent", names, names)
        index.check()
    assert index.columns() <= 2 + 400 + max(MIN_DEAD, 402)  # was 2 + 8,000
    index.remove("agent")
    index.upsert("n0", {"vcore": 8, "memory": 8}, {"vcore": 7, "memory": 8})
    index.check()
    assert index.first_fit({"vcore": 8, "memory": 8}) == "n1"
    assert index.first_fit({"r19-0": 1}) is None


def test_a_node_agent_replacing_its_types_keeps_the_partition_small() -> None:
    sim = Simulation(load_config(BOUNDED.replace('"8"', '"1000"')))
    for line in [node(f"n{i}") for i in range(50)]:
        list(sim.feed(orjson.dumps(line)))
    for round_ in range(10):
        line = {"type": "node.updated", "data": {"node_id": "n0", "capacity": _types(f"r{round_}-", 900)}}
        outs = list(sim.feed(orjson.dumps(line)))
        assert not [o for o in outs if o.type == "input.rejected"]
    part = sim.engine.state.partitions["default"]
    assert len(part.node_types) == 2 + 900
    assert part.index.columns() <= 2 * (2 + 900)


# -- rules versions ------------------------------------------------------------------


@pytest.mark.parametrize("version", [RULES_VERSION + 1, 999, 0, -5])
def test_an_unknown_rules_version_is_a_problem(version: int) -> None:
    problem = rules_version_problem(version, None)
    assert problem is not None and "unknown to this build" in problem


def test_a_rules_version_going_back_is_a_problem() -> None:
    assert rules_version_problem(RULES_VERSION, RULES_VERSION) is None
    assert rules_version_problem(1, None) is None
    problem = rules_version_problem(2, 3)
    assert problem is not None and "never go back" in problem


# -- log lines -----------------------------------------------------------------------


def test_log_lines_escape_newlines_and_terminal_escapes() -> None:
    fmt = TextFormatter("%(levelname)s %(message)s")
    rec = logging.LogRecord("evsched.inputs", logging.INFO, "f.py", 1, "input rejected: type=%s",
                            ("x\n2026-11-27 12:00:00,000 ERROR   evsched: disk full; stopping\x1b]0;t\x07",), None)
    line = fmt.format(rec)
    assert "\n" not in line and "\x1b" not in line and "\x07" not in line
    assert "\\x0a2026-11-27" in line and "\\x1b]0;t\\x07" in line
    try:
        raise ValueError("bad\x1b[2J name")
    except ValueError:
        rec = logging.LogRecord("evsched", logging.ERROR, "f.py", 1, "failed", (), sys.exc_info())
    text = fmt.format(rec)
    assert "\x1b" not in text and "bad\\x1b[2J name" in text
