"""Where a pod may run (scheduler/core/node_constraints.py): Kubernetes' node selector, required node
affinity, tolerations and host ports against worked examples, against a reference written from the
Kubernetes sources' rules (property test), and in the scheduler: placements, reservations, host
ports counted with their allocations (checked against a from-scratch fold), snapshots, explain."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from events.codec import decode_input
from events.log.file import FileLog
from events.models import AskAdded, InputEvent, NodeSelectorRequirement, Toleration
from events.models import Constraints as ConstraintsModel
from events.models import Taint as TaintModel
from replay.explain.from_log import explain_from_log
from replay.explain.pending import explain_pending
from scheduler.core.node_constraints import (
    NODE_AFFINITY,
    NODE_SELECTOR,
    compile_constraints,
    compile_taints,
    excluded_by,
    ports_of_allocations,
)
from scheduler.core.snapshot import dump, load
from scheduler.simulation.simulate import Simulation
from tests.explain_logdrive import LogDriver
from tests.sim import SCHEDULE, app, ask, node, of_type, placements, run


def check(constraints: dict[str, Any], node_id: str = "n1", labels: dict[str, str] | None = None,
          taints: list[dict[str, str]] | None = None) -> str | None:
    compiled = compile_constraints(ConstraintsModel.model_validate(constraints))
    taint_list = compile_taints([TaintModel.model_validate(t) for t in taints or []])
    return excluded_by(compiled, node_id, labels or {}, taint_list, {})


def term(*expressions: dict[str, Any], fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"match_expressions": list(expressions), "match_fields": fields or []}


def req(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


# ---------------------------------------------------------------- worked examples


def test_node_selector_needs_every_label_with_its_value() -> None:
    sel = {"node_selector": {"disk": "ssd", "zone": "a"}}
    assert check(sel, labels={"disk": "ssd", "zone": "a", "other": "x"}) is None
    assert check(sel, labels={"disk": "ssd"}) == NODE_SELECTOR
    assert check(sel, labels={"disk": "ssd", "zone": "b"}) == NODE_SELECTOR
    assert check({"node_selector": {"gpu": ""}}, labels={"gpu": ""}) is None  # an empty value is a value


@pytest.mark.parametrize(("requirement", "labels", "passes"), [
    (req("zone", "In", "a", "b"), {"zone": "b"}, True),
    (req("zone", "In", "a", "b"), {"zone": "c"}, False),
    (req("zone", "In", "a"), {}, False),
    (req("zone", "NotIn", "a"), {"zone": "b"}, True),
    (req("zone", "NotIn", "a"), {}, True),  # an absent label is not in any set
    (req("zone", "NotIn", "a"), {"zone": "a"}, False),
    (req("zone", "Exists"), {"zone": ""}, True),
    (req("zone", "Exists"), {}, False),
    (req("zone", "DoesNotExist"), {}, True),
    (req("zone", "DoesNotExist"), {"zone": "a"}, False),
    (req("cores", "Gt", "8"), {"cores": "16"}, True),
    (req("cores", "Gt", "8"), {"cores": "8"}, False),
    (req("cores", "Gt", "8"), {"cores": "many"}, False),  # not an integer: no match
    (req("cores", "Gt", "8"), {}, False),
    (req("cores", "Lt", "8"), {"cores": "-3"}, True),
    (req("cores", "Lt", "8"), {"cores": "+7"}, True),
    (req("cores", "Lt", "8"), {"cores": "9"}, False),
])
def test_each_operator_as_kubernetes_reads_it(requirement: dict[str, Any], labels: dict[str, str],
                                              passes: bool) -> None:
    result = check({"node_affinity": [term(requirement)]}, labels=labels)
    assert (result is None) == passes


def test_terms_are_ored_and_their_requirements_anded() -> None:
    affinity = {"node_affinity": [term(req("zone", "In", "a"), req("disk", "In", "ssd")),
                                  term(req("gpu", "Exists"))]}
    assert check(affinity, labels={"zone": "a", "disk": "ssd"}) is None
    assert check(affinity, labels={"zone": "a", "disk": "hdd"}) == NODE_AFFINITY
    assert check(affinity, labels={"gpu": "t4"}) is None


def test_an_empty_term_selects_nothing_but_another_term_may() -> None:
    assert check({"node_affinity": [term()]}, labels={"zone": "a"}) == NODE_AFFINITY
    assert check({"node_affinity": [term(), term(req("zone", "In", "a"))]}, labels={"zone": "a"}) is None


def test_match_fields_read_the_node_name() -> None:
    on_n2 = {"node_affinity": [term(fields=[req("metadata.name", "In", "n2")])]}
    assert check(on_n2, node_id="n2") is None
    assert check(on_n2, node_id="n1") == NODE_AFFINITY
    not_n2 = {"node_affinity": [term(fields=[req("metadata.name", "NotIn", "n2")])]}
    assert check(not_n2, node_id="n1") is None
    assert check(not_n2, node_id="n2") == NODE_AFFINITY
    both = {"node_affinity": [term(req("zone", "In", "a"), fields=[req("metadata.name", "In", "n1")])]}
    assert check(both, node_id="n1", labels={"zone": "a"}) is None
    assert check(both, node_id="n1", labels={"zone": "b"}) == NODE_AFFINITY


GPU = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


@pytest.mark.parametrize(("toleration", "tolerated"), [
    ({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}, True),
    ({"key": "dedicated", "value": "gpu"}, True),  # any effect, operator Equal by default
    ({"key": "dedicated", "operator": "Exists"}, True),
    ({"operator": "Exists"}, True),  # an empty key with Exists tolerates everything
    ({"operator": "Exists", "effect": "NoExecute"}, False),  # ... of its effect only
    ({"key": "dedicated", "value": "cpu"}, False),
    ({"key": "other", "operator": "Exists"}, False),
    ({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}, False),
])
def test_tolerations_match_key_value_and_effect(toleration: dict[str, str], tolerated: bool) -> None:
    result = check({"tolerations": [toleration]}, taints=[GPU])
    assert result == (None if tolerated else "untolerated taint dedicated=gpu:NoSchedule")


def test_only_noschedule_and_noexecute_taints_keep_pods_off() -> None:
    prefer = {"key": "spot", "value": "", "effect": "PreferNoSchedule"}
    execute = {"key": "maintenance", "effect": "NoExecute"}
    assert check({"tolerations": [{"operator": "Exists", "effect": "NoSchedule"}]}, taints=[prefer]) is None
    assert check({"tolerations": [{"key": "x", "operator": "Exists"}]}, taints=[prefer, execute]) \
        == "untolerated taint maintenance:NoExecute"
    assert check({"tolerations": [{"key": "maintenance", "operator": "Exists"}]}, taints=[prefer, execute]) is None


def test_taints_are_checked_before_labels_as_kube_scheduler_filters() -> None:
    assert check({"node_selector": {"zone": "a"}, "host_ports": [{"port": 80}]}, taints=[GPU]) \
        == "untolerated taint dedicated=gpu:NoSchedule"


def test_host_ports_conflict_per_protocol_port_and_address() -> None:
    def conflict(wanted: dict[str, Any], bound: list[tuple[str, int, str]]) -> bool:
        compiled = compile_constraints(ConstraintsModel.model_validate({"host_ports": [wanted]}))
        return excluded_by(compiled, "n1", {}, [], ports_of_allocations([bound])) is not None

    assert conflict({"port": 80}, [("TCP", 80, "0.0.0.0")])
    assert not conflict({"port": 80, "protocol": "UDP"}, [("TCP", 80, "0.0.0.0")])
    assert not conflict({"port": 81}, [("TCP", 80, "0.0.0.0")])
    assert conflict({"port": 80, "host_ip": "10.0.0.1"}, [("TCP", 80, "0.0.0.0")])  # every address holds it
    assert conflict({"port": 80}, [("TCP", 80, "10.0.0.1")])  # 0.0.0.0 wants every address
    assert conflict({"port": 80, "host_ip": "10.0.0.1"}, [("TCP", 80, "10.0.0.1")])
    assert not conflict({"port": 80, "host_ip": "10.0.0.2"}, [("TCP", 80, "10.0.0.1")])
    assert conflict({"port": 80, "host_ip": "0.0.0.0"}, [("TCP", 80, "10.0.0.1")])


def test_empty_constraints_still_keep_an_ask_off_tainted_nodes() -> None:
    assert check({}, taints=[GPU]) == "untolerated taint dedicated=gpu:NoSchedule"
    assert check({}, labels={"zone": "a"}) is None


@pytest.mark.parametrize("bad", [
    {"key": "k", "operator": "In"},
    {"key": "k", "operator": "Exists", "values": ["a"]},
    {"key": "k", "operator": "Gt", "values": ["1.5"]},
    {"key": "k", "operator": "Lt", "values": ["1", "2"]},
    {"key": "k", "operator": "Matches", "values": ["a"]},
])
def test_requirements_are_validated_as_the_api_server_does(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        NodeSelectorRequirement.model_validate(bad)


def test_tolerations_and_fields_are_validated_as_the_api_server_does() -> None:
    with pytest.raises(ValidationError, match="Exists has no value"):
        Toleration.model_validate({"key": "k", "operator": "Exists", "value": "v"})
    with pytest.raises(ValidationError, match="without a key"):
        Toleration.model_validate({"value": "v"})
    with pytest.raises(ValidationError, match=r"metadata\.name"):
        ConstraintsModel.model_validate({"node_affinity": [term(fields=[req("zone", "In", "a")])]})
    with pytest.raises(ValidationError):
        ConstraintsModel.model_validate({"node_affinity": []})  # required affinity names at least one term


def test_every_producer_controlled_size_is_bounded() -> None:
    with pytest.raises(ValidationError):
        ConstraintsModel.model_validate({"node_selector": {f"k{i}": "v" for i in range(257)}})
    with pytest.raises(ValidationError):
        ConstraintsModel.model_validate({"node_selector": {"k": "v" * 64}})
    with pytest.raises(ValidationError):
        ConstraintsModel.model_validate({"tolerations": [{"operator": "Exists"}] * 65})
    with pytest.raises(ValidationError):
        ConstraintsModel.model_validate({"host_ports": [{"port": 1}] * 65})
    with pytest.raises(ValidationError):
        ConstraintsModel.model_validate({"node_affinity": [term(req("k", "In", *["v"] * 257))]})
    with pytest.raises(ValidationError):
        ConstraintsModel.model_validate({"node_affinity": [term(*[req("k", "Exists")] * 33)]})
    with pytest.raises(ValidationError):
        ConstraintsModel.model_validate({"node_affinity": [term(req("k", "Exists"))] * 33})


# ---------------------------------------------------------------- against a reference


def reference(c: dict[str, Any], node_id: str, labels: dict[str, str], taints: list[dict[str, str]]) -> bool:
    """Kubernetes' rules written out plainly over the wire form (component-helpers nodeaffinity,
    v1 ToleratesTaint): does the node pass?"""
    for t in taints:
        if t["effect"] not in ("NoSchedule", "NoExecute"):
            continue
        if not any((not tol.get("effect") or tol["effect"] == t["effect"])
                   and (not tol.get("key") or tol["key"] == t["key"])
                   and (tol.get("operator") == "Exists" or tol.get("value", "") == t.get("value", ""))
                   for tol in c.get("tolerations", [])):
            return False
    if any(labels.get(k) != v for k, v in c.get("node_selector", {}).items()):
        return False

    def holds(r: dict[str, Any], value: str | None) -> bool:
        op, values = r["operator"], r.get("values", [])
        if op == "In":
            return value is not None and value in values
        if op == "NotIn":
            return value is None or value not in values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        try:
            number = int(value) if value is not None else None
        except ValueError:
            return False
        if number is None:
            return False
        return number > int(values[0]) if op == "Gt" else number < int(values[0])

    terms = c.get("node_affinity")
    if terms is not None:
        return any((t["match_expressions"] or t["match_fields"])
                   and all(holds(r, labels.get(r["key"])) for r in t["match_expressions"])
                   and all(holds(r, node_id) for r in t["match_fields"]) for t in terms)
    return True


KEYS = st.sampled_from(["zone", "disk", "gpu"])
VALUES = st.sampled_from(["a", "b", "1", "5", "-2"])
REQS = st.one_of(
    st.builds(lambda k, op, vs: req(k, op, *vs), KEYS, st.sampled_from(["In", "NotIn"]),
              st.lists(VALUES, min_size=1, max_size=3)),
    st.builds(lambda k, op: req(k, op), KEYS, st.sampled_from(["Exists", "DoesNotExist"])),
    st.builds(lambda k, op, v: req(k, op, v), KEYS, st.sampled_from(["Gt", "Lt"]), st.sampled_from(["1", "3"])),
)
FIELDS = st.builds(lambda op, v: req("metadata.name", op, v), st.sampled_from(["In", "NotIn"]),
                   st.sampled_from(["n1", "n2"]))
TERMS = st.builds(lambda e, f: {"match_expressions": e, "match_fields": f},
                  st.lists(REQS, max_size=3), st.lists(FIELDS, max_size=1))
EFFECTS = st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"])
TAINTS = st.lists(st.builds(lambda k, v, e: {"key": k, "value": v, "effect": e}, KEYS, VALUES, EFFECTS), max_size=3)
TOLERATIONS = st.lists(st.one_of(
    st.builds(lambda k, v, e: {"key": k, "operator": "Equal", "value": v, "effect": e}, KEYS, VALUES,
              st.sampled_from(["", "NoSchedule", "NoExecute"])),
    st.builds(lambda k, e: {"key": k, "operator": "Exists", "effect": e}, st.sampled_from(["", "zone", "gpu"]),
              st.sampled_from(["", "NoSchedule", "NoExecute"])),
), max_size=3)
CONSTRAINTS = st.builds(
    lambda sel, terms, tols: {"node_selector": sel, "node_affinity": terms, "tolerations": tols},
    st.dictionaries(KEYS, VALUES, max_size=2), st.none() | st.lists(TERMS, min_size=1, max_size=3), TOLERATIONS)


@settings(max_examples=400, deadline=None)
@given(c=CONSTRAINTS, node_id=st.sampled_from(["n1", "n2"]), labels=st.dictionaries(KEYS, VALUES, max_size=3),
       taints=TAINTS)
def test_the_predicate_agrees_with_a_plain_reading_of_kubernetes_rules(
        c: dict[str, Any], node_id: str, labels: dict[str, str], taints: list[dict[str, str]]) -> None:
    model = ConstraintsModel.model_validate(c)
    compiled = compile_constraints(model)
    taint_list = compile_taints([TaintModel.model_validate(t) for t in taints])
    passes = excluded_by(compiled, node_id, labels, taint_list, {}) is None
    assert passes == reference(c, node_id, labels, taints)


# ---------------------------------------------------------------- in the scheduler

ZONES = [node("n1", labels={"zone": "a"}), node("n2", labels={"zone": "b"}),
         node("n3", labels={"zone": "b"}, taints=[GPU])]


def test_an_ask_without_constraints_is_placed_by_its_resources_alone_as_before() -> None:
    out, _ = run([*ZONES, app("x"), ask("x", "k1", vcore=3000), ask("x", "k2", vcore=3000),
                  ask("x", "k3", vcore=3000), SCHEDULE])
    assert sorted(n for _, n in placements(out)) == ["n1", "n2", "n3"]  # n3's taint too: no constraints given
    out, _ = run([*ZONES, app("x"), *(ask("x", f"k{i}", vcore=3000, constraints={}) for i in range(3)), SCHEDULE])
    assert sorted(n for _, n in placements(out)) == ["n1", "n2"]  # constraints given, even empty: taints apply


def test_a_node_selector_and_a_taint_steer_asks_where_kubernetes_would() -> None:
    lines = [*ZONES, app("x"),
             ask("x", "in-b", constraints={"node_selector": {"zone": "b"}}),
             ask("x", "gpu", constraints={"node_selector": {"zone": "b"}, "tolerations": [{"key": "dedicated",
                                                                                              "operator": "Exists"}]}),
             ask("x", "in-c", constraints={"node_selector": {"zone": "c"}}),
             SCHEDULE]
    out, _ = run(lines)
    got = dict(placements(out))
    assert got["in-b"] == "n2"  # n3 has room but a taint the ask does not tolerate
    assert got["gpu"] in ("n2", "n3")
    assert "in-c" not in got


def at(seconds: int, line: dict[str, Any]) -> dict[str, Any]:
    return {**line, "time": f"1970-01-01T00:00:{seconds:02d}Z"}


def test_a_constrained_ask_fills_only_its_nodes_and_then_reserves_one_of_them() -> None:
    lines = [at(0, node("n1", vcore=2000, labels={"zone": "a"})), at(0, node("n2", vcore=8000, labels={"zone": "b"})),
             at(0, app("x")),
             at(0, ask("x", "a1", vcore=2000, constraints={"node_selector": {"zone": "a"}})),
             at(0, ask("x", "a2", vcore=2000, constraints={"node_selector": {"zone": "a"}})),
             at(0, SCHEDULE), at(5, node("n9", vcore=1000)), at(5, SCHEDULE)]
    out, _ = run(lines)
    assert placements(out) == [("a1", "n1")]
    reserved = of_type(out, "ask.reserved")
    assert [(r["ask_id"], r["node_id"]) for r in reserved] == [("a2", "n1")]  # never n2: zone b


def test_a_required_node_that_excludes_the_ask_passes_it_over() -> None:
    lines = [node("n1", taints=[GPU]), app("x"),
             ask("x", "ds", required_node="n1", constraints={"tolerations": []}),
             ask("x", "ds2", required_node="n1", constraints={"tolerations": [{"operator": "Exists"}]}), SCHEDULE]
    assert placements(run(lines)[0]) == [("ds2", "n1")]


def test_host_ports_keep_a_second_pod_off_until_the_first_is_released() -> None:
    web = {"host_ports": [{"port": 80}]}
    lines = [node("n1"), app("x"), ask("x", "w1", constraints=web), ask("x", "w2", constraints=web), SCHEDULE,
             {"type": "allocation.released", "data": {"app_id": "x", "ask_id": "w1"}}, SCHEDULE]
    assert placements(run(lines)[0]) == [("w1", "n1"), ("w2", "n1")]


def test_node_updates_change_labels_and_taints() -> None:
    lines = [node("n1", labels={"zone": "a"}), app("x"), ask("x", "k", constraints={"node_selector": {"zone": "b"}}),
             SCHEDULE, {"type": "node.updated", "data": {"node_id": "n1", "labels": {"zone": "b"}, "taints": [GPU]}},
             SCHEDULE, {"type": "node.updated", "data": {"node_id": "n1", "taints": []}}, SCHEDULE]
    out, _ = run(lines)
    assert placements(out) == [("k", "n1")]
    assert [c["cycle"] for c in of_type(out, "allocation.decided")] == [3]


@settings(max_examples=30, deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from(["ask", "release", "schedule"]), st.integers(0, 5),
                                st.sampled_from([80, 443]), st.sampled_from(["", "10.0.0.1", "10.0.0.2"])),
                      min_size=1, max_size=40))
def test_host_ports_in_use_equal_a_fold_of_the_allocations(steps: list[tuple[str, int, int, str]]) -> None:
    sim = Simulation()
    sim.feed(orjson.dumps(node("n1", vcore=64000, memory=64000)))
    sim.feed(orjson.dumps(node("n2", vcore=64000, memory=64000)))
    sim.feed(orjson.dumps(app("x")))
    asked: set[int] = set()
    for i, (kind, n, port, ip) in enumerate(steps):
        if kind == "ask" and n not in asked:
            asked.add(n)
            sim.feed(orjson.dumps(ask("x", f"k{n}", constraints={"host_ports": [{"port": port, "host_ip": ip}]})))
        elif kind == "release":
            part = sim.engine.state.partitions["default"]
            if f"k{n}" in part.apps["x"].allocations:
                asked.discard(n)
                sim.feed(orjson.dumps({"type": "allocation.released", "data": {"app_id": "x", "ask_id": f"k{n}"}}))
        else:
            sim.feed(orjson.dumps(SCHEDULE))
        part = sim.engine.state.partitions["default"]
        for nd in part.nodes.values():
            folded = ports_of_allocations([a.host_ports or [] for a in nd.allocations.values()])
            assert nd.host_ports == folded, i
            for (proto, p), bound in nd.host_ports.items():  # never two allocations on one port and address
                assert "0.0.0.0" not in bound or len(bound) == 1, (proto, p, bound)
                assert all(count == 1 for count in bound.values())


def test_snapshots_keep_labels_taints_constraints_and_ports() -> None:
    sim = Simulation()
    for line in [node("n1", labels={"zone": "a"}, taints=[GPU]), node("n2", labels={"zone": "b"}), app("x"),
                 ask("x", "w1", constraints={"host_ports": [{"port": 80}], "tolerations": [{"operator": "Exists"}]}),
                 ask("x", "z", constraints={"node_selector": {"zone": "c"}}), SCHEDULE]:
        sim.feed(orjson.dumps(line))
    engine = sim.engine
    restored = load(orjson.loads(orjson.dumps(dump(engine))))
    assert restored.state_form() == engine.state_form()
    for name in ("n1", "n2"):
        a, b = engine.state.partitions["default"].nodes[name], restored.state.partitions["default"].nodes[name]
        assert (a.labels, [t.text() for t in a.taints], a.host_ports) == \
            (b.labels, [t.text() for t in b.taints], b.host_ports)
    z = restored.state.partitions["default"].apps["x"].asks["z"]
    assert z.constraints is not None and z.constraints.selector == {"zone": "c"}
    assert dump(restored) == dump(engine)


def test_explain_names_the_constraints_that_excluded_nodes() -> None:
    sim = Simulation()
    lines = [node(f"s{i}", labels={"zone": "a"}) for i in range(3)] + [node("t1", labels={"zone": "b"}, taints=[GPU])]
    lines += [node("b1", labels={"zone": "b"}, vcore=500), app("x"),
              ask("x", "k", constraints={"node_selector": {"zone": "b"}}), SCHEDULE]
    for line in lines:
        sim.feed(orjson.dumps(line))
    why = explain_pending(sim.engine, "x", "k")
    assert why.status == "pending"
    assert "0/5 nodes are available: 3 node selector mismatch, 1 too little room, " \
           "1 untolerated taint dedicated=gpu:NoSchedule" in why.summary
    assert why.reasons[-1]["rule"] == "docs/semantics.md#node-constraints"


def test_a_record_with_constraints_decodes_through_the_codec_to_the_same_ask() -> None:
    record = {"specversion": "1.0", "id": "1", "source": "t", "type": "ask.added",
              "data": {"app_id": "x", "ask_id": "k", "resources": {"vcore": 1},
                       "constraints": {"node_selector": {"zone": "a"}, "host_ports": [{"port": 80}]}}}
    event = decode_input(orjson.dumps(record), append_time_us=0)
    assert isinstance(event, InputEvent) and isinstance(event.data, AskAdded)
    assert event.data.constraints == ConstraintsModel.model_validate(
        {"node_selector": {"zone": "a"}, "host_ports": [{"port": 80}]})



def test_a_decisions_explanation_says_which_constraint_passed_each_node_over(tmp_path: Path) -> None:
    with LogDriver(tmp_path / "log") as drv:
        # fair: least used first, so the idle a-nodes and the tainted one come before b1 (a little used)
        drv.submit(*[node(f"a{i}", labels={"zone": "a"}) for i in range(12)],
                   node("t1", labels={"zone": "b"}, taints=[GPU]),
                   node("b1", labels={"zone": "b"}, occupied={"vcore": 1000}), app("x"),
                   ask("x", "k", constraints={"node_selector": {"zone": "b"}}))
        drv.cycle()
    with FileLog(tmp_path / "log", readonly=True) as log:
        e = explain_from_log(log, "default-1-1")
    assert e.verified and e.chosen is not None and e.chosen["node_id"] == "b1"
    assert e.nodes is not None
    why = {n["node_id"]: (n["why_not"] or {}).get("message") for n in e.nodes["nodes"] if n["outcome"] == "passed over"}
    assert why["a0"] == why["a7"] == "node selector mismatch"  # ids in order: a0, a1, a10, a11, a2, …
    # beyond the first ten listed, counted by reason
    assert e.nodes["passed_over_reasons"] == {"node selector mismatch": 2,
                                              "untolerated taint dedicated=gpu:NoSchedule": 1}
