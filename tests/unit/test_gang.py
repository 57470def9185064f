"""Gang scheduling (scheduler/core/gang.py): placeholders, their replacement, their timeout.

Each rule is checked on a small log, as a resource manager would send it; the fact fold
(recovery from recorded outputs) is checked to give the live engine's state on generated gang
logs (Soft and Hard gangs, partial gangs, real asks, releases, timers). The same scenarios agree
with yunikorn-core itself in the conformance run's ``gang`` family (docs/conformance.md).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from events.log.file import FileLog
from events.times import format_time
from replay.reader import open_file_log
from replay.verify import verify
from scheduler.core import snapshot
from scheduler.simulation.simulate import Simulation
from tests.cli import evsched
from tests.explain_logdrive import LogDriver, copy_log
from tests.sim import app, ask, node, root_queues
from tests.unit.test_audit import audit
from tests.unit.test_fact_fold import START_US, _live_and_recovered, _next_cycle

R = {"vcore": 1000, "memory": 1000}


def _run(lines: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], Simulation]:
    """Simulate the lines (times 1 s apart unless given); every output as a plain dict."""
    sim = Simulation()
    outs: list[dict[str, Any]] = []
    for i, line in enumerate(lines):
        line = {"time": format_time(i * 1_000_000), **line}
        outs.extend(o.model_dump(by_alias=True) for o in sim.feed(orjson.dumps(line)))
    outs.extend(o.model_dump(by_alias=True) for o in sim.finish())
    return outs, sim


def _of(outs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o["data"] for o in outs if o["type"] == kind]


def _states(outs: list[dict[str, Any]], app: str) -> list[str]:
    return [d["to"] for d in _of(outs, "app.state_changed") if d["app_id"] == app]


def _gang_app(style: str = "Soft", total: dict[str, int] | None = None, timeout_ms: int = 60_000) -> dict[str, Any]:
    return {"type": "app.added", "data": {"app_id": "g", "queue": "root.default", "user": "u",
                                          "placeholder_ask": total or {"vcore": 2000, "memory": 2000},
                                          "gang_scheduling_style": style, "placeholder_timeout_ms": timeout_ms}}


def _ask(ask_id: str, *, placeholder: bool = False, group: str = "tg", res: dict[str, int] = R) -> dict[str, Any]:
    return {"type": "ask.added", "data": {"app_id": "g", "ask_id": ask_id, "resources": res,
                                          "placeholder": placeholder, "task_group": group}}


NODE = {"type": "node.added", "data": {"node_id": "n1", "capacity": {"vcore": 4000, "memory": 4000}}}
SCHEDULE: dict[str, Any] = {"type": "schedule"}


def test_placeholders_start_the_gang_and_a_real_ask_replaces_one_on_its_node() -> None:
    outs, sim = _run([NODE, _gang_app(), _ask("p1", placeholder=True), _ask("p2", placeholder=True), SCHEDULE,
                      _ask("r1", res={"vcore": 1000, "memory": 500}), SCHEDULE])
    decided = _of(outs, "allocation.decided")
    assert [(d["ask_id"], d.get("placeholder", False)) for d in decided] == [("p1", True), ("p2", True),
                                                                             ("r1", False)]
    assert decided[2]["replaced_ask_id"] == "p1" and decided[2]["replaced_decision_id"] == decided[0]["decision_id"]
    assert decided[2]["node_id"] == decided[0]["node_id"]
    assert [(d["ask_id"], d["reason"]) for d in _of(outs, "allocation.revoked")] == [("p1", "placeholder-replaced")]
    # the completed gang moved the app (Starting); its first real allocation does not move it again
    assert _states(outs, "g") == ["Accepted", "Starting"]
    app = sim.engine.state.partitions["default"].apps["g"]
    assert app.allocated == {"vcore": 1000, "memory": 500}  # real allocations only
    assert app.gang is not None and app.gang.placeholders == R
    assert sim.engine.state.partitions["default"].nodes["n1"].allocated == {"vcore": 2000, "memory": 1500}


def test_a_real_ask_of_a_group_with_placeholders_left_waits_for_the_replacement_step() -> None:
    # placeholders pending (too large for the cluster): the real ask is not allocated by the walk
    outs, _ = _run([NODE, _gang_app(total={"vcore": 8000, "memory": 8000}),
                    _ask("p1", placeholder=True, res={"vcore": 8000, "memory": 8000}), _ask("r1"), SCHEDULE])
    assert _of(outs, "allocation.decided") == []


def test_soft_timeout_resumes_the_app_and_gives_up_its_asks_and_placeholders() -> None:
    outs, sim = _run([NODE, _gang_app(total={"vcore": 8000, "memory": 8000}, timeout_ms=5_000),
                      _ask("p1", placeholder=True, res={"vcore": 4000, "memory": 4000}),
                      _ask("p2", placeholder=True, res={"vcore": 4000, "memory": 4000}), SCHEDULE,
                      *[SCHEDULE] * 6, _ask("r1"), SCHEDULE])
    assert _states(outs, "g") == ["Accepted", "Resuming", "Accepted", "Starting"]
    assert [(d["ask_id"], d["reason"]) for d in _of(outs, "ask.released")] == [("p2", "placeholder-timeout")]
    assert [(d["ask_id"], d["reason"]) for d in _of(outs, "allocation.revoked")] == [("p1", "placeholder-timeout")]
    # after the timeout the group has nothing left to replace: the real ask is scheduled normally
    assert _of(outs, "allocation.decided")[-1]["ask_id"] == "r1"
    assert "replaced_ask_id" not in _of(outs, "allocation.decided")[-1]
    assert sim.engine.state.partitions["default"].apps["g"].state == "Starting"


def test_hard_timeout_fails_the_app_and_it_leaves() -> None:
    outs, sim = _run([NODE, _gang_app("Hard", total={"vcore": 8000, "memory": 8000}, timeout_ms=5_000),
                      _ask("p1", placeholder=True, res={"vcore": 4000, "memory": 4000}),
                      _ask("p2", placeholder=True, res={"vcore": 4000, "memory": 4000}), SCHEDULE,
                      *[SCHEDULE] * 6, _ask("r1"), SCHEDULE])
    assert _states(outs, "g") == ["Accepted", "Failing", "Failed"]
    assert "g" not in sim.engine.state.partitions["default"].apps
    assert _of(outs, "input.rejected")[-1]["reason"] == "unknown-app"  # the id is free, the app gone
    assert sim.engine.state.partitions["default"].nodes["n1"].allocated == {}


def test_a_started_app_only_loses_its_placeholders_at_the_timeout() -> None:
    outs, _ = _run([NODE, _gang_app(timeout_ms=3_000), _ask("p1", placeholder=True),
                      _ask("p2", placeholder=True), SCHEDULE, _ask("r1"), SCHEDULE, *[SCHEDULE] * 4])
    assert [(d["ask_id"], d["reason"]) for d in _of(outs, "allocation.revoked")] == [
        ("p1", "placeholder-replaced"), ("p2", "placeholder-timeout")]
    assert _states(outs, "g") == ["Accepted", "Starting"]
    assert _of(outs, "ask.released") == []


def test_a_queue_that_cannot_run_task_groups_rejects_the_app() -> None:
    config = {"type": "config.updated", "data": {"yaml": (
        "partitions:\n- name: default\n  queues:\n  - name: root\n    submitacl: '*'\n    queues:\n"
        "    - name: fair\n      properties: {application.sort.policy: fair}\n"
        "    - name: small\n      resources: {max: {vcore: 1}}\n")}}
    outs, _ = _run([config, {**_gang_app(), "data": {**_gang_app()["data"], "queue": "root.fair"}},
                    {**_gang_app(), "data": {**_gang_app()["data"], "app_id": "h", "queue": "root.small"}}])
    assert [d["reason"] for d in _of(outs, "input.rejected")] == ["gang-unsupported", "gang-unsupported"]


def test_without_gang_fields_decisions_have_no_gang_keys() -> None:
    outs, _ = _run([NODE, {"type": "app.added", "data": {"app_id": "a", "queue": "root.default", "user": "u"}},
                    {"type": "ask.added", "data": {"app_id": "a", "ask_id": "k", "resources": R}}, SCHEDULE])
    (decided,) = _of(outs, "allocation.decided")
    assert not {"placeholder", "task_group", "replaced_ask_id", "replaced_decision_id"} & decided.keys()


# -- recovery by fact fold on generated gang logs ----------------------------------------

APPS = ["g0", "g1", "g2"]
GROUPS = ["driver", "exec"]
GANG_CONFIG = root_queues("""
    - name: a
    - name: b
      properties: {application.sort.policy: stateaware}
""")
NODES = [{"type": "node.added", "data": {"node_id": f"n{i}", "capacity": {"vcore": 4000, "memory": 4000}}}
         for i in range(3)]
GANG_APP = st.builds(
    lambda a, q, v, style, t: {"type": "app.added", "data": {
        "app_id": a, "queue": q, "user": "u", "placeholder_ask": {"vcore": v, "memory": v},
        "gang_scheduling_style": style, "placeholder_timeout_ms": t}},
    st.sampled_from(APPS), st.sampled_from(["root.a", "root.b"]), st.sampled_from([1000, 2000, 3000, 6000]),
    st.sampled_from(["Soft", "Hard"]), st.sampled_from([0, 30_000, 90_000, 400_000]))
GANG_ASK = st.builds(
    lambda a, k, ph, g, v: {"type": "ask.added", "data": {
        "app_id": a, "ask_id": f"{'p' if ph else 'r'}{k}", "resources": {"vcore": v, "memory": v},
        "placeholder": ph, "task_group": g}},
    st.sampled_from(APPS), st.integers(0, 3), st.booleans(), st.sampled_from(GROUPS), st.sampled_from([500, 1000]))
GANG_RELEASE = st.builds(
    lambda a, k: {"type": "allocation.released", "data": {"app_id": a, "ask_id": k}},
    st.sampled_from(APPS), st.sampled_from([f"{p}{i}" for p in "pr" for i in range(4)]))
GANG_REMOVED = st.builds(lambda a: {"type": "app.removed", "data": {"app_id": a}}, st.sampled_from(APPS))
GANG_LINE = st.one_of(GANG_APP, GANG_ASK, GANG_ASK, GANG_ASK, GANG_RELEASE, GANG_REMOVED)
TICK = {"type": "node.updated", "data": {"node_id": "n0", "schedulable": True}}


def _gang_records(lines: list[dict[str, Any]], batch: int, step_us: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for line in NODES + lines + [TICK] * (3 * batch):
        n = len(out)
        out.append({"id": f"i{n}", "source": "rm", "type": line["type"],
                    "time": format_time(START_US + (n // batch + 1) * step_us + n), "data": line["data"]})
    return out


def _soft_app(timeout_ms: int) -> dict[str, Any]:
    return {"type": "app.added", "data": {"app_id": "g0", "queue": "root.a", "user": "u",
                                          "placeholder_ask": {"vcore": 1000, "memory": 1000},
                                          "gang_scheduling_style": "Soft", "placeholder_timeout_ms": timeout_ms}}


# The timer fires at the cycle's start (Accepted → Resuming → Accepted at its deadline); the real
# ask is then allocated in the same cycle, and its Accepted → Starting happens at the cycle's time.
TIMEOUT_THEN_DECISION = [
    {"type": "allocation.released", "data": {"app_id": "g0", "ask_id": "p0"}},
    _soft_app(30_000), _soft_app(0), _soft_app(0), _soft_app(0),
    {"type": "ask.added", "data": {"app_id": "g0", "ask_id": "p0", "resources": {"vcore": 1000, "memory": 1000},
                                   "placeholder": True, "task_group": "driver"}},
    {"type": "ask.added", "data": {"app_id": "g0", "ask_id": "r0", "resources": {"vcore": 500, "memory": 500},
                                   "placeholder": False, "task_group": "driver"}},
    _soft_app(0), _soft_app(0), _soft_app(0)]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(GANG_LINE, min_size=10, max_size=60), batch=st.integers(1, 6),
       step_us=st.sampled_from([1_000, 20_000_000, 100_000_000]))
@example(lines=TIMEOUT_THEN_DECISION, batch=1, step_us=100_000_000)
def test_fact_fold_of_gang_logs_equals_the_live_state(lines: list[dict[str, Any]], batch: int, step_us: int) -> None:
    """Replacements, timeouts (Soft and Hard), releases and removals fold back to the live engine:
    the same digest at every cycle, the same snapshot, the same next cycle."""
    live, recovered, _ = _live_and_recovered(_gang_records(lines, batch, step_us), batch, step_us, GANG_CONFIG)
    assert recovered.digest_mismatches == []
    assert snapshot.dump(recovered.engine) == snapshot.dump(live)
    assert _next_cycle(recovered.engine) == _next_cycle(live)


GANG_CONFIG_19 = GANG_CONFIG.replace("  - name: default\n", "  - name: default\n    rules: yunikorn-1.9\n", 1)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(GANG_LINE, min_size=10, max_size=60), batch=st.integers(1, 6),
       step_us=st.sampled_from([1_000, 20_000_000, 100_000_000]))
def test_fact_fold_of_gang_logs_under_1_9_equals_the_live_state(lines: list[dict[str, Any]], batch: int,
                                                                step_us: int) -> None:
    """The same under yunikorn-1.9, whose timeout also revokes real allocations (placeholder-timeout)."""
    assert "rules: yunikorn-1.9" in GANG_CONFIG_19
    live, recovered, _ = _live_and_recovered(_gang_records(lines, batch, step_us), batch, step_us, GANG_CONFIG_19)
    assert recovered.digest_mismatches == []
    assert snapshot.dump(recovered.engine) == snapshot.dump(live)
    assert _next_cycle(recovered.engine) == _next_cycle(live)


def test_a_snapshot_keeps_the_gang() -> None:
    """Taken while placeholders wait: the restored engine decides the replacement and the timeout alike."""
    lines = [NODE, _gang_app(timeout_ms=5_000), _ask("p1", placeholder=True), _ask("p2", placeholder=True),
             SCHEDULE]
    _, sim = _run(lines)
    restored = snapshot.load(snapshot.dump(sim.engine))
    assert snapshot.dump(restored) == snapshot.dump(sim.engine)
    gang = restored.state.partitions["default"].apps["g"].gang
    assert gang is not None and gang.placeholders == {"vcore": 2000, "memory": 2000} and gang.timer_us is not None
    assert gang.groups["tg"].count == 2


# -- the audit's gang invariants (replay/audit/gang.py) ------------------------------------


def gang_log(directory: Path, config: str = GANG_CONFIG) -> None:
    """A Spark-like job replacing its placeholders, a Soft gang and a Hard gang timing out."""
    with LogDriver(directory, config) as drv:
        drv.submit(node("n1", 4000, 4000), node("n2", 4000, 4000),
                   app("spark", "root.a", placeholder_ask={"vcore": 3000, "memory": 3000}),
                   *[ask("spark", f"ph-{i}", placeholder=True, task_group="exec") for i in range(3)],
                   app("soft", "root.a", placeholder_ask={"vcore": 9000, "memory": 2000}, placeholder_timeout_ms=1),
                   ask("soft", "ph-big", vcore=9000, placeholder=True, task_group="big"),
                   ask("soft", "ph-1", placeholder=True, task_group="w"),
                   app("hard", "root.a", placeholder_ask={"vcore": 9000, "memory": 2000}, placeholder_timeout_ms=1,
                       gang_scheduling_style="Hard"),
                   ask("hard", "ph-big", vcore=9000, placeholder=True, task_group="big"),
                   ask("hard", "ph-1", placeholder=True, task_group="w"))
        drv.cycle()
        drv.submit(*[ask("spark", f"exec-{i}", memory=500, task_group="exec") for i in range(3)],
                   ask("soft", "w-1", task_group="w"))
        drv.cycle()
        drv.cycle()


def test_a_gang_log_audits_clean(tmp_path: Path) -> None:
    gang_log(tmp_path / "log")
    with FileLog(tmp_path / "log", readonly=True) as log:
        outs = [orjson.loads(r.value) for r in log.iter_outputs()]
    reasons = {o["data"].get("reason") for o in outs if o["type"] in ("allocation.revoked", "ask.released")}
    assert {"placeholder-replaced", "placeholder-timeout"} <= reasons
    assert [o["data"]["to"] for o in outs if o["type"] == "app.state_changed" and o["data"]["app_id"] == "hard"] == [
        "Accepted", "Failing", "Failed"]
    assert audit(tmp_path / "log").violations == []


def test_a_gang_log_under_1_9_audits_clean_and_its_timeout_revokes_a_real_allocation(tmp_path: Path) -> None:
    with LogDriver(tmp_path / "log", GANG_CONFIG_19) as drv:
        drv.submit(node("n1", 4000, 4000),
                   app("soft", "root.a", placeholder_ask={"vcore": 9000, "memory": 2000}, placeholder_timeout_ms=1),
                   ask("soft", "ph-big", vcore=9000, placeholder=True, task_group="big"),
                   ask("soft", "ph-1", placeholder=True, task_group="w"),
                   ask("soft", "ph-2", placeholder=True, task_group="w"), ask("soft", "w-1", task_group="w"))
        drv.cycle()
        drv.cycle()
    with FileLog(tmp_path / "log", readonly=True) as log:
        outs = [orjson.loads(r.value) for r in log.iter_outputs()]
    timed_out = [(o["data"]["app_id"], o["data"]["ask_id"]) for o in outs
                 if o["type"] == "allocation.revoked" and o["data"]["reason"] == "placeholder-timeout"]
    assert ("soft", "w-1") in timed_out  # the replacement made while "soft" was still Accepted
    assert audit(tmp_path / "log").violations == []
    with open_file_log(tmp_path / "log") as source:
        assert verify(source).ok
    from replay.explain.gang import explain_placeholder_release

    with open_file_log(tmp_path / "log") as source:
        why = explain_placeholder_release(source, "soft", "w-1")
    assert why is not None and why["real_allocation"] and "real ones too" in why["summary"]
    with open_file_log(tmp_path / "log") as source:
        ph = explain_placeholder_release(source, "soft", "ph-2")
    assert ph is not None and "real_allocation" not in ph and "it was a placeholder" in ph["summary"]


def _tampered(tmp_path: Path, edit: Callable[[list[list[dict[str, Any]]]], None]) -> list[str]:
    gang_log(tmp_path / "orig")
    copy_log(tmp_path / "orig", tmp_path / "copy", edit)
    return [v.rule for v in audit(tmp_path / "copy").violations]


def test_a_replacement_on_another_node_is_flagged(tmp_path: Path) -> None:
    def move(batches: list[list[dict[str, Any]]]) -> None:
        for o in batches[1]:
            if o["type"] == "allocation.decided" and o["data"]["ask_id"] == "exec-0":
                o["data"]["node_id"] = "n2" if o["data"]["node_id"] == "n1" else "n1"

    assert "gang-replacement" in _tampered(tmp_path, move)


def test_a_real_ask_placed_by_the_walk_while_its_group_has_placeholders_is_flagged(tmp_path: Path) -> None:
    def no_swap(batches: list[list[dict[str, Any]]]) -> None:
        batches[1][:] = [o for o in batches[1] if not (o["type"] == "allocation.revoked"
                                                       and o["data"]["ask_id"] == "ph-0")]
        for o in batches[1]:
            if o["type"] == "allocation.decided" and o["data"].get("replaced_ask_id") == "ph-0":
                del o["data"]["replaced_ask_id"], o["data"]["replaced_decision_id"]

    assert "gang-budget" in _tampered(tmp_path, no_swap)


# -- replay explain: why a job waits for its gang, why a placeholder was released -------------


def test_explain_says_why_a_placeholder_was_released(tmp_path: Path) -> None:
    gang_log(tmp_path / "log")
    replaced = evsched("replay", "explain", "--revoked", "spark/ph-0", "--log", str(tmp_path / "log")).stdout.decode()
    assert "replaced by the real ask exec-0" in replaced and "same node" in replaced
    timed_out = evsched("replay", "explain", "--revoked", "soft/ph-1", "--log", str(tmp_path / "log")).stdout.decode()
    assert "placeholder timeout" in timed_out and "w-1" in timed_out and "Accepted → Resuming" in timed_out
    failed = orjson.loads(evsched("replay", "explain", "--revoked", "hard/ph-1", "--json", "--log",
                                  str(tmp_path / "log")).stdout)
    assert failed["reason"] == "placeholder-timeout" and "Failing → Failed" in failed["states"]


def test_explain_says_a_real_ask_waits_for_its_gang(tmp_path: Path) -> None:
    with LogDriver(tmp_path / "log", GANG_CONFIG) as drv:
        drv.submit(node("n1", 4000, 4000), app("job", "root.a", placeholder_ask={"vcore": 8000, "memory": 2000}),
                   ask("job", "ph-0", placeholder=True, task_group="exec"),
                   ask("job", "ph-1", vcore=7000, placeholder=True, task_group="exec"),
                   ask("job", "exec-0", vcore=7000, task_group="exec"))
        drv.cycle()
    text = evsched("replay", "explain", "--ask", "job/exec-0", "--log", str(tmp_path / "log")).stdout.decode()
    assert "task group 'exec', which has 2 placeholder(s) left to replace" in text
    assert "none as large as this ask" in text and "gang-scheduling" in text
    text = evsched("replay", "explain", "--ask", "job/ph-1", "--log", str(tmp_path / "log")).stdout.decode()
    assert "placeholder of task group 'exec'" in text and "time out at" in text


def test_the_spark_example_replaces_its_placeholders_and_fails_the_gang_that_does_not_fit() -> None:
    """examples/spark (README, "A Spark job as a gang")."""
    root = Path(__file__).resolve().parents[2] / "examples" / "spark"
    proc = evsched("simulate", "--config", str(root / "queues.yaml"), str(root / "job.jsonl"))
    outs = [orjson.loads(line) for line in proc.stdout.splitlines()]
    replaced = {d["replaced_ask_id"]: d["ask_id"] for d in _of(outs, "allocation.decided") if "replaced_ask_id" in d}
    assert replaced == {"tg-driver-0": "driver", **{f"tg-exec-{i}": f"exec-{i}" for i in range(4)}}
    assert _states(outs, "job-1") == ["Accepted", "Starting", "Running"]
    assert _states(outs, "job-2") == ["Accepted", "Failing", "Failed"]


def test_replay_verify_rederives_a_gang_log_byte_for_byte(tmp_path: Path) -> None:
    gang_log(tmp_path / "log")
    proc = evsched("replay", "verify", "--log", str(tmp_path / "log"))
    assert proc.returncode == 0


def test_an_accepted_app_holding_placeholders_counts_as_running_for_maxapplications() -> None:
    config = {"type": "config.updated", "data": {"yaml": (
        "partitions:\n- name: default\n  queues:\n  - name: root\n    submitacl: '*'\n    queues:\n"
        "    - name: a\n      maxapplications: 1\n")}}
    partial = {**_gang_app(total={"vcore": 9000, "memory": 2000}, timeout_ms=5_000)}
    partial["data"] = {**partial["data"], "queue": "root.a"}
    other = [{"type": "app.added", "data": {"app_id": "b", "queue": "root.a", "user": "u"}},
             {"type": "ask.added", "data": {"app_id": "b", "ask_id": "b1", "resources": R, "priority": 9}}]
    outs, sim = _run([config, NODE, partial, _ask("p1", placeholder=True),
                      _ask("p2", placeholder=True, res={"vcore": 8000, "memory": 1000}), SCHEDULE, *other, SCHEDULE,
                      *[SCHEDULE] * 6])
    # g holds a placeholder while Accepted: b waits, before and after g's Soft timeout (YuniKorn)
    assert [d["ask_id"] for d in _of(outs, "allocation.decided")] == ["p1"]
    assert _states(outs, "g") == ["Accepted", "Resuming", "Accepted"]
    queue = sim.engine.state.partitions["default"].queues["root.a"]
    assert queue.running_apps == 0 and queue.allocating_accepted == 1
    # a snapshot keeps the count (the gang's flag, counted again in the leaf and its ancestors on load)
    loaded = snapshot.load(snapshot.dump(sim.engine)).state.partitions["default"].queues
    assert (loaded["root.a"].allocating_accepted, loaded["root"].allocating_accepted) == (1, 1)


def _replaced_then_timed_out(rules: str) -> tuple[list[dict[str, Any]], Simulation]:
    """Placeholders p1, p2 allocated, p3 too large for the node; r1 replaces p1 while the app is
    still Accepted (the gang is not complete), and the timer fires at 5 s."""
    config = {"type": "config.updated", "data": {"yaml": (
        f"partitions:\n- name: default\n  rules: {rules}\n  queues:\n  - name: root\n    submitacl: '*'\n"
        "    queues:\n    - name: default\n")}}
    big = {"vcore": 8000, "memory": 8000}
    return _run([config, NODE, _gang_app(total={"vcore": 10000, "memory": 10000}, timeout_ms=5_000),
                 _ask("p1", placeholder=True), _ask("p2", placeholder=True), _ask("p3", placeholder=True, res=big),
                 SCHEDULE, _ask("r1", res={"vcore": 1000, "memory": 500}), SCHEDULE, *[SCHEDULE] * 4])


def test_under_1_9_the_soft_timeout_releases_the_real_allocations_too() -> None:
    # yunikorn-core 1.9 timeoutPlaceholderProcessing releases every allocation of an app not yet
    # running, the replacement r1 too; 1.5 released the placeholders only
    outs, sim = _replaced_then_timed_out("yunikorn-1.9")
    assert [(d["ask_id"], d["reason"]) for d in _of(outs, "allocation.revoked")] == [
        ("p1", "placeholder-replaced"), ("r1", "placeholder-timeout"), ("p2", "placeholder-timeout")]
    assert [d["ask_id"] for d in _of(outs, "ask.released")] == ["p3"]
    assert _states(outs, "g") == ["Accepted", "Resuming", "Accepted"]
    part = sim.engine.state.partitions["default"]
    assert part.apps["g"].allocations == {} and part.nodes["n1"].allocated == {}
    outs, sim = _replaced_then_timed_out("yunikorn-1.5")
    assert [(d["ask_id"], d["reason"]) for d in _of(outs, "allocation.revoked")] == [
        ("p1", "placeholder-replaced"), ("p2", "placeholder-timeout")]
    assert list(sim.engine.state.partitions["default"].apps["g"].allocations) == ["r1"]



def test_a_real_ask_replaces_only_a_placeholder_on_a_node_its_constraints_admit() -> None:
    # YuniKorn runs the shim's predicates on the placeholder's node (``preReserveConditions``):
    # r1 selects zone b, so it takes p2's place on n2, not the first placeholder's on n1
    zone = [{"type": "node.added", "data": {"node_id": f"n{i}", "capacity": {"vcore": 4000, "memory": 4000},
                                            "labels": {"zone": z}}} for i, z in ((1, "a"), (2, "b"))]
    real = _ask("r1")
    real["data"]["constraints"] = {"node_selector": {"zone": "b"}}
    outs, _ = _run([*zone, _gang_app(), _ask("p1", placeholder=True), _ask("p2", placeholder=True), SCHEDULE,
                    real, SCHEDULE])
    decided = _of(outs, "allocation.decided")
    assert [(d["ask_id"], d["node_id"]) for d in decided] == [("p1", "n1"), ("p2", "n2"), ("r1", "n2")]
    assert decided[2]["replaced_ask_id"] == "p2"
