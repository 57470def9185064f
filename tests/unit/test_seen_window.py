"""The seen-id set is bounded: each source's last ``SEEN_WINDOW`` ids are remembered, so a
repeat within the window is a duplicate, an id older than it is applied as new, and a
snapshot restore evicts in the same order as the live engine (per source, in log order)."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def test_the_total_forgets_the_least_recently_active_source_oldest_first() -> None:
    ids = SeenIds(window=3, total=4)
    for i in ("1", "2", "3", "4", "1"):
        ids.add("rm", i)
    assert ids.add("b", "x") and ids.add("b", "y")  # total 5 > 4: rm, quiet longest, forgets 3
    assert ids.grouped() == {"rm": ["4", "1"], "b": ["x", "y"]} and len(ids) == 4
    assert list(ids.grouped()) == ["rm", "b"]
    assert ids.add("rm", "3")  # forgotten: new again; now b is the quieter source and loses x
    assert list(ids.grouped().items()) == [("b", ["y"]), ("rm", ["4", "1", "3"])]
    assert ids.add("rm", "5") and list(ids.grouped().items()) == [("b", ["y"]), ("rm", ["1", "3", "5"])]
    assert ids.add("c", "z")  # b loses its last id: forgotten altogether
    assert list(ids.grouped()) == ["rm", "c"] and ("b", "y") not in ids and len(ids) == 4


def _fold(adds: list[tuple[str, str]], window: int, total: int) -> tuple[list[bool], dict[str, list[str]]]:
    """The rules of ``events.seen`` re-derived from scratch after every add: each source's ids are
    its applied ids in log order, cut to the last ``window``; over ``total``, the source whose
    last applied input is earliest loses its oldest id."""
    applied: list[tuple[str, str]] = []
    kept: dict[str, list[str]] = {}
    verdicts = []
    for source, event_id in adds:
        new = event_id not in kept.get(source, [])
        verdicts.append(new)
        if not new:
            continue
        applied.append((source, event_id))
        kept.setdefault(source, []).append(event_id)
        kept[source] = kept[source][-window:]
        while sum(map(len, kept.values())) > total:
            last = {s: max(i for i, (t, _) in enumerate(applied) if t == s) for s in kept}
            quiet = min(kept, key=last.__getitem__)
            del kept[quiet][0]
            if not kept[quiet]:
                del kept[quiet]
    last = {s: max(i for i, (t, _) in enumerate(applied) if t == s) for s in kept}
    return verdicts, {s: kept[s] for s in sorted(kept, key=last.__getitem__)}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from("012345678")), max_size=80),
       st.integers(1, 5), st.integers(1, 12), st.integers(0, 80))
def test_the_windows_equal_a_from_scratch_fold(adds: list[tuple[str, str]], window: int, total: int,
                                                cut: int) -> None:
    total = max(total, window)
    live = SeenIds(window=window, total=total)
    verdicts = [live.add(s, i) for s, i in adds[:cut]]
    # a snapshot restore at the cut goes on exactly as the live windows do
    restored = SeenIds.from_grouped(live.grouped(), window, total)
    later = [live.add(s, i) for s, i in adds[cut:]]
    assert [restored.add(s, i) for s, i in adds[cut:]] == later
    expected_verdicts, expected = _fold(adds, window, total)
    assert verdicts + later == expected_verdicts
    for ids in (live, restored):
        assert list(ids.grouped().items()) == list(expected.items()) and len(ids) == sum(map(len, expected.values()))
