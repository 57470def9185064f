"""Recovery folds preemption as fact: a log whose cycles preempt (and later allocate the
preemptors) recovers to the engine the live run had, digest for digest."""

from __future__ import annotations

from typing import Any

from events.times import format_time
from scheduler.core import snapshot
from tests.sim import app, ask, node, root_queues
from tests.unit.test_fact_fold import START_US, _live_and_recovered, _next_cycle

CONFIG = root_queues("""
    - name: best
      resources: {guaranteed: {vcore: 2, memory: 2000}}
    - name: crit
      resources: {guaranteed: {vcore: 4, memory: 4000}}
      properties: {preemption.delay: 1ms}
""")


def lines() -> list[dict[str, Any]]:
    out = [node("n1"), node("n2"), app("be", "root.best"), app("c", "root.crit")]
    out += [ask("be", f"f{i}", vcore=2000, memory=2000) for i in range(1, 5)]
    out += [ask("c", f"c{i}", vcore=2000, memory=2000, priority=1000, preempt_other=True) for i in (1, 2)]
    tick = {"type": "node.updated", "data": {"node_id": "n1", "schedulable": True}}
    out += [tick, tick]  # a cycle after the asks' preemption delay, before the releases
    out += [{"type": "allocation.released", "data": {"app_id": "be", "ask_id": a}} for a in ("f3", "f4")]
    return out


def _records(lines: list[dict[str, Any]], batch: int, step_us: int) -> list[dict[str, Any]]:
    """Input records, ``batch`` per cycle, each just before its cycle's time (as test_fact_fold's)."""
    return [{"id": f"i{n}", "source": "rm", "type": line["type"], "data": line["data"],
             "time": format_time(START_US + (n // batch + 1) * step_us + n - batch)} for n, line in enumerate(lines)]


def test_recovery_folds_preemptions_as_fact() -> None:
    for batch in (1, 2):
        records = _records(lines(), batch, 20_000_000)
        live, recovered, log = _live_and_recovered(records, batch, 20_000_000, CONFIG)
        outputs = [r.value for r in log.iter_outputs()]
        assert sum(b'"preempted"' in v for v in outputs) == 2, batch  # both preemptors preempted
        assert recovered.digest_mismatches == []
        assert snapshot.dump(recovered.engine) == snapshot.dump(live)
        assert _next_cycle(recovered.engine) == _next_cycle(live)


def test_recovery_folds_a_moved_reservation_as_fact() -> None:
    """yunikorn-1.9: c1 reserves n3 (no-fit), then preempts on n1, and its reservation moves
    (``ask.unreserved`` reason ``preemption``, then ``ask.reserved``); recovery from the log
    ends in the live state."""
    config = CONFIG.replace("  - name: default\n", "  - name: default\n    rules: yunikorn-1.9\n", 1).replace(
        "preemption.delay: 1ms", "preemption.delay: 30s")
    tick = {"type": "node.updated", "data": {"node_id": "n1", "schedulable": True}}
    out = [node("n1"), node("n2"), node("n3", vcore=3000, memory=3000, occupied={"vcore": 2000, "memory": 2000}),
           app("be", "root.best"), app("c", "root.crit")]
    out += [ask("be", f"f{i}", vcore=2000, memory=2000) for i in range(1, 5)]
    out += [ask("c", "c1", vcore=2000, memory=2000, priority=1000, preempt_other=True), tick, tick, tick]
    out += [{"type": "allocation.released", "data": {"app_id": "be", "ask_id": "f3"}}, tick]
    records = _records(out, 1, 20_000_000)
    live, recovered, log = _live_and_recovered(records, 1, 20_000_000, config)
    outputs = [r.value for r in log.iter_outputs()]
    assert sum(b'"ask.unreserved"' in v and b'"preemption"' in v for v in outputs) == 1
    assert recovered.digest_mismatches == []
    assert snapshot.dump(recovered.engine) == snapshot.dump(live)
    assert _next_cycle(recovered.engine) == _next_cycle(live)


def test_recovery_folds_a_reservation_cancelled_for_a_preemption_as_fact() -> None:
    """yunikorn-1.9 (YUNIKORN-3092): w1 reserves a3 (no node fits it), and c1's preemption attempt
    over an hour later cancels that reservation (``ask.unreserved`` reason ``preemption-cancelled``)
    and preempts f5 on a3 (c1's own no-fit reservation of a4 moves there, and w1 takes a4); the
    same log through yunikorn-core v1.9.0 agrees. Recovery from the log ends in the live state."""
    config = CONFIG.replace("  - name: default\n", "  - name: default\n    rules: yunikorn-1.9\n", 1)
    tick = {"type": "node.updated", "data": {"node_id": "n1", "schedulable": True}}
    out = [node("n1"), node("n2"), app("be", "root.best"), app("w", "root.best")]
    out += [ask("be", f"f{i}", vcore=2000, memory=2000) for i in range(1, 5)]
    out += [node("a3"), node("a4"), *(ask("be", f"f{i}", vcore=3000, memory=3000) for i in (5, 6))]
    out += [ask("w", "w1", vcore=2000, memory=2000), tick, *[tick] * 10]  # 400 s a cycle: over an hour
    out += [app("c", "root.crit"), ask("c", "c1", vcore=2000, memory=2000, priority=1000, preempt_other=True), tick]
    records = _records(out, 1, 400_000_000)
    live, recovered, log = _live_and_recovered(records, 1, 400_000_000, config)
    outputs = [r.value for r in log.iter_outputs()]
    assert sum(b'"ask.unreserved"' in v and b'"preemption-cancelled"' in v for v in outputs) == 1
    assert sum(b'"allocation.revoked"' in v and b'"f5"' in v for v in outputs) == 1
    assert recovered.digest_mismatches == []
    assert snapshot.dump(recovered.engine) == snapshot.dump(live)
    assert _next_cycle(recovered.engine) == _next_cycle(live)
