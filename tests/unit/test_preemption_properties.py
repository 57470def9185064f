"""Property: preemption never breaks the invariants, whatever the workload.

Random clusters, guarantees, fences, disabled queues, priorities and releases run through
the core into a file log; then ``evsched audit`` (an independent fold) must find nothing —
no victim above its preemptor's priority, none outside the fence or in a disabled queue,
no victim's queue below its guarantee — the core's caches must match a from-scratch fold,
and skipping nodes that cannot win must pick exactly what trying every node picks.
"""

from __future__ import annotations

from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any, Protocol

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from events.log.file import FileLog
from scheduler.core.cycle import fits_queue_headroom
from scheduler.core.preemption import try_preemption
from tests.explain_logdrive import LogDriver
from tests.sim import app, ask, node, root_queues
from tests.unit.test_audit import audit
from tests.unit.test_core_properties import check_invariants

LEAVES = ("a", "b", "c", "d")


@st.composite
def configs(draw: st.DrawFn) -> str:
    def leaf(name: str) -> str:
        g = draw(st.sampled_from((0, 1, 1, 2, 2, 3)))
        props = ["preemption.delay: 1ms"]
        if draw(st.integers(0, 7)) == 0:
            props.append("preemption.policy: disabled")
        res = f"\n                  resources: {{guaranteed: {{vcore: {g}, memory: {g}000}}}}" if g else ""
        return f"""
                - name: {name}{res}
                  properties: {{{", ".join(props)}}}"""

    fence = "fence" if draw(st.booleans()) else "default"
    return root_queues(f"""
        - name: left
          properties: {{preemption.policy: {fence}}}
          queues:{leaf("a")}{leaf("b")}
        - name: right
          queues:{leaf("c")}{leaf("d")}
    """)


fill = st.tuples(st.just("ask"), st.sampled_from(LEAVES), st.integers(-3, 0), st.sampled_from((500, 1000, 2000)),
                st.booleans(), st.sampled_from((True, True, True, False)))
urgent = st.tuples(st.just("ask"), st.sampled_from(LEAVES), st.integers(-1, 3), st.sampled_from((500, 1000, 2000)),
                   st.sampled_from((True, True, True, False)), st.just(True))
other = st.one_of(st.tuples(st.just("release"), st.integers(0, 200)), st.tuples(st.just("cycle")))


@st.composite
def workloads(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """Work that fills the nodes, a cycle, asks that may preempt, a cycle, then anything."""
    return [*draw(st.lists(fill, min_size=2, max_size=14)), ("cycle",),
            *draw(st.lists(urgent, min_size=1, max_size=6)), ("cycle",),
            *draw(st.lists(st.one_of(urgent, fill, other), max_size=12))]


class Driver(Protocol):
    """What ``play`` drives: a ``LogDriver``, or an engine driven step by step."""

    now_us: int

    def submit(self, *events: dict[str, Any]) -> None: ...
    def cycle(self) -> object: ...


def play(drv: Driver, steps: list[tuple[Any, ...]], nodes: int) -> None:
    """``nodes`` nodes and an app per leaf, then the steps (asks, releases, cycles 5 ms apart), then a last cycle."""
    drv.submit(*(node(f"n{i}", 3000, 3000) for i in range(nodes)),
               *(app(leaf, f"root.{'left' if leaf in 'ab' else 'right'}.{leaf}") for leaf in LEAVES))
    asks: list[tuple[str, str]] = []
    for s in steps:
        if s[0] == "ask":
            _, leaf, prio, size, preempt, allow = s
            ask_id = f"k{len(asks)}"
            asks.append((leaf, ask_id))
            drv.submit(ask(leaf, ask_id, vcore=size, memory=size, priority=prio * 100,
                           preempt_other=preempt, allow_preemption=allow))
        elif s[0] == "release" and asks:
            leaf, ask_id = asks[s[1] % len(asks)]
            drv.submit({"type": "allocation.released", "data": {"app_id": leaf, "ask_id": ask_id}})
        else:
            drv.now_us += 5_000
            drv.cycle()
    drv.now_us += 5_000
    drv.cycle()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), workloads(), st.integers(1, 3))
def test_preemption_keeps_the_invariants(config: str, steps: list[tuple[Any, ...]], nodes: int) -> None:
    with TemporaryDirectory() as tmp:
        log = Path(tmp) / "log"
        with LogDriver(log, config) as drv:
            play(drv, steps, nodes)
            check_invariants(drv.engine)
            for part in drv.engine.state.partitions.values():
                for a in part.apps.values():
                    for k in a.asks.values():
                        tried = fits_queue_headroom(part, a.queue, k.resources)
                        quick = try_preemption(part, a, k, tried)
                        full = try_preemption(part, a, k, tried, exhaustive=True)
                        assert (quick.node, quick.victims) == (full.node, full.victims)
        auditor = audit(log)
        assert auditor.violations == [], auditor.violations[:3]
        with FileLog(log, readonly=True) as read:
            victims = sum(1 for rec in read.iter_outputs() if b'"preempted"' in rec.value)
        event(f"preemptions: {'none' if not victims else 'some'}")
