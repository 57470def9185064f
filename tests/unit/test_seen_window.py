"""The seen-id set is bounded: each source's last ``SEEN_WINDOW`` ids are remembered, so a
repeat within the window is a duplicate, an id older than it is applied as new, and a
snapshot restore evicts in the same order as the live engine (per source, in log order)."""

from __future__ import annotations

import orjson
import pytest

from events import seen as seen_module
from events.models import InputRejected
from events.seen import SeenIds
from scheduler.core import snapshot
from scheduler.simulation.simulate import Simulation


def test_each_source_remembers_its_last_window_of_ids() -> None:
    ids = SeenIds(window=3)
    assert [ids.add("rm", i) for i in ("1", "2", "3", "1", "4")] == [True, True, True, False, True]
    assert ids.add("other", "1")  # per source
    assert ids.add("rm", "1")  # evicted by "4": applied as new again
    assert not ids.add("rm", "4")
    assert len(ids) == 4 and ids.grouped() == {"rm": ["3", "4", "1"], "other": ["1"]}


def test_a_restored_snapshot_evicts_as_the_live_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(seen_module, "SEEN_WINDOW", 3)

    def node(source: str, i: int) -> bytes:
        return orjson.dumps({"id": f"e{i}", "source": source, "type": "node.updated",
                             "data": {"node_id": "n", "schedulable": True}})

    head = [orjson.dumps({"id": "n", "source": "x", "type": "node.added", "data": {"node_id": "n", "capacity": {}}})]
    head += [node(s, i) for i in range(4) for s in ("a", "b")]
    tail = [node("a", 0), node("a", 3), node("b", 1), node("b", 2)]
    live = Simulation(None)
    for line in head:
        live.feed(line)
    live.finish()
    restored = Simulation(None)
    restored.engine = snapshot.load(orjson.loads(orjson.dumps(snapshot.dump(live.engine))))

    def rejected(sim: Simulation) -> list[str]:
        outs = [o for line in tail for o in sim.feed(line)] + sim.finish()
        return [o.data.input_id or "" for o in outs if isinstance(o.data, InputRejected)]

    assert rejected(live) == rejected(restored) == ["e3", "e1", "e2"]  # only e0 of a fell out of the window
