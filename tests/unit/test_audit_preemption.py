"""``evsched audit`` on preemption: a clean log passes; tampered revocations break the rules
(victim priority above the preemptor's, a victim's queue pushed below its guarantee, a
victim outside the preemptor's fence)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.explain_logdrive import LogDriver, copy_log
from tests.sim import app, ask, node, root_queues
from tests.unit.test_audit import Batches, audit, rules

CONFIG = root_queues("""
    - name: best
      resources: {guaranteed: {vcore: 6, memory: 6000}}
    - name: crit
      resources: {guaranteed: {vcore: 4, memory: 4000}}
      properties: {preemption.delay: 1s}
    - name: team
      properties: {preemption.policy: fence}
      queues:
        - name: inner
""")


def preemption_log(directory: Path) -> None:
    """best fills two nodes; a priority-1000 ask in crit preempts one of its allocations, which the
    RM then releases; a low-priority ask of crit stays pending."""
    with LogDriver(directory, CONFIG) as drv:
        drv.submit(node("n1"), node("n2"), app("be", "root.best"),
                   *(ask("be", f"f{i}", vcore=2000, memory=2000) for i in range(1, 5)))
        drv.cycle()
        drv.submit(app("c", "root.crit"), ask("c", "c1", vcore=2000, memory=2000, priority=1000, preempt_other=True),
                   ask("c", "low", vcore=9000, memory=9000, priority=-5))
        drv.cycle()
        drv.now_us += 2_000_000
        drv.cycle()
        drv.submit({"type": "allocation.released", "data": {"app_id": "be", "ask_id": "f3"}})
        drv.cycle()


def revocations(batches: Batches) -> list[dict[str, Any]]:
    return [o for batch in batches for o in batch if o["type"] == "allocation.revoked"]


def test_a_clean_preemption_log_passes(tmp_path: Path) -> None:
    preemption_log(tmp_path / "log")
    auditor = audit(tmp_path / "log")
    assert auditor.violations == []
    seen: list[Batches] = []
    copy_log(tmp_path / "log", tmp_path / "copy", seen.append)
    revoked = revocations(seen[0])
    assert [(r["data"]["ask_id"], r["data"]["preemptor"]["ask_id"]) for r in revoked] == [("f3", "c1")]


def tampered(tmp_path: Path, edit: Any) -> list[str]:
    preemption_log(tmp_path / "orig")
    copy_log(tmp_path / "orig", tmp_path / "copy", edit)
    return rules(audit(tmp_path / "copy"))


def test_a_victim_of_higher_priority_than_its_preemptor_is_flagged(tmp_path: Path) -> None:
    def lower(batches: Batches) -> None:
        revocations(batches)[0]["data"]["preemptor"]["ask_id"] = "low"  # priority -5 < the victim's 0

    assert tampered(tmp_path, lower) == ["preemption-priority"]


def test_a_victim_queue_pushed_below_its_guarantee_is_flagged(tmp_path: Path) -> None:
    def second(batches: Batches) -> None:
        for batch in batches:
            for i, o in enumerate(batch):
                if o["type"] == "allocation.revoked":
                    extra = {**o, "id": o["id"] + "b", "data": {**o["data"], "ask_id": "f1"}}
                    batch.insert(i + 1, extra)
                    return

    assert "preemption-guarantee" in tampered(tmp_path, second)


def test_a_victim_outside_the_fence_is_flagged(tmp_path: Path) -> None:
    def fenced(batches: Batches) -> None:
        revocations(batches)[0]["data"]["preemptor"]["queue"] = "root.team.inner"

    assert tampered(tmp_path, fenced) == ["preemption-fence"]
