"""``replay.history``: a log's recent decisions and per-cycle figures, bounded to the cycles asked for."""

from __future__ import annotations

from pathlib import Path

from events.log.file import FileLog
from replay.history import completed_cycles, read_history, recent_decisions
from tests.explain_logdrive import LogDriver
from tests.sim import app, ask, node, root_queues

CONFIG = root_queues("""
          - name: a
""")


def _log(directory: Path) -> list[int]:
    """Three cycles: 2 decisions, then 1, then 0 (nothing fits); returns the decisions per cycle."""
    made = []
    with LogDriver(directory, CONFIG) as drv:
        drv.submit(node("n1", vcore=3000), app("x", "root.a"), ask("x", "k1"), ask("x", "k2"))
        made.append(drv.cycle())
        drv.submit(ask("x", "k3"))
        made.append(drv.cycle())
        drv.submit(ask("x", "k4"))
        made.append(drv.cycle())
    return made


def test_history_holds_each_cycles_figures_and_stops_where_asked(tmp_path: Path) -> None:
    assert _log(tmp_path / "log") == [2, 1, 0]
    with FileLog(tmp_path / "log", readonly=True) as log:
        assert completed_cycles(log) == 3
        whole = read_history(log)
        two = read_history(log, through_cycle=2)
        none = read_history(log, through_cycle=0)
        one = read_history(log, through_cycle=1)
        newest = recent_decisions(log, 2)
    samples = whole.samples["default"]
    assert [(s.cycle, s.decisions) for s in samples] == [(1, 2), (2, 1), (3, 0)]
    assert [s.allocated.get("vcore", 0) for s in samples] == [2000, 3000, 3000]
    assert [s.pending.get("vcore", 0) for s in samples] == [0, 0, 1000]  # k4 waits
    assert all(s.seconds is not None and s.seconds >= 0 for s in samples)
    assert [d["allocationKey"] for d in whole.decisions] == ["k3", "k2", "k1"]
    assert whole.last_cycle == 3 and whole.last_cycle_unix is not None
    assert [s.cycle for s in two.samples["default"]] == [1, 2] and two.last_cycle == 2
    assert [d["allocationKey"] for d in two.decisions] == ["k3", "k2", "k1"]
    assert none.samples == {} and none.decisions == [] and none.last_cycle_unix is None
    assert [d["allocationKey"] for d in newest] == ["k3", "k2"]
    assert [d["allocationKey"] for d in one.decisions] == ["k2", "k1"]
