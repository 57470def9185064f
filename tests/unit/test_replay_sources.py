"""Log sources for replay: the async-port bridge (what ``--kafka`` uses) and the service's channel order.

``EventLogSource`` is exercised over ``MemoryLog``'s async port here (the Kafka run is in
tests/integration/test_replay_kafka.py). The channel-order tests drive a two-channel log
with the service's own ``run_logged_cycle`` in a configured order that is not the sorted
one, and show replay re-derives it only in that order.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import orjson
import pytest

from events.codec import encode_output
from events.log.memory import MemoryLog
from events.log.port import LogError, LogRecord
from events.times import format_time
from replay import kafka_source
from replay.export import ExportStats, export_lines
from replay.kafka_source import EventLogSource, LoopThread
from replay.reader import channel_order
from replay.verify import verify
from scheduler.core.engine import Engine
from scheduler.core.logged_cycle import run_logged_cycle
from tests.contracts.log_contract import run


def memory_log(inputs: int, outputs: int) -> MemoryLog:
    log = MemoryLog(now_us=lambda: 7)
    run(log.append_inputs([(None, f"in-{i}".encode()) for i in range(inputs)]))
    run(log.append_outputs([f"out-{i}".encode() for i in range(outputs)]))
    return log


@pytest.fixture
def bridged() -> Iterator[tuple[MemoryLog, EventLogSource]]:
    log = memory_log(23, 17)
    source = EventLogSource(log, LoopThread(), batch=7)
    try:
        yield log, source
    finally:
        source.close()


def test_event_log_source_reads_what_the_log_holds(bridged: tuple[MemoryLog, EventLogSource]) -> None:
    log, source = bridged
    assert list(source.iter_inputs()) == list(log.iter_inputs())
    assert list(source.iter_inputs({"inputs": 9})) == list(log.iter_inputs({"inputs": 9}))
    assert list(source.iter_outputs(3)) == list(log.iter_outputs(3))
    assert source.output_at(16) == next(log.iter_outputs(16)) and source.output_at(17) is None
    assert (source.inputs_end(), source.outputs_end()) == ({"inputs": 23, "admin": 0}, 17)
    assert source.input_channel_order == ["inputs", "admin"]


def test_event_log_source_reads_records_appended_while_it_walks(bridged: tuple[MemoryLog, EventLogSource]) -> None:
    log, source = bridged
    walk = source.iter_outputs()
    first = [next(walk) for _ in range(17)]
    source.runner.call(log.append_outputs([b"late"]))
    assert [r.value for r in walk] == [b"late"] and first[-1].value == b"out-16"


class _Stuck(MemoryLog):
    """Says it holds records it never delivers (as Kafka's end offsets count transaction markers)."""

    async def read_inputs(self, positions: Mapping[str, int], max_records: int) -> list[LogRecord]:
        return []

    async def read_outputs(self, start: int = 0, max_records: int | None = None) -> list[LogRecord]:
        return []


def test_a_log_that_never_delivers_does_not_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_source, "STALL_S", 0.2)
    log = _Stuck(now_us=lambda: 0)
    run(log.append_inputs([(None, b"x")]))
    run(log.append_outputs([b"y"]))
    source = EventLogSource(log, LoopThread())
    try:
        assert list(source.iter_inputs()) == []  # the walk ends; a cycle needing the record reports the gap
        with pytest.raises(LogError, match="delivered none"):
            list(source.iter_outputs())  # outputs must be read to the end, or verify would pass on a part
    finally:
        source.close()


# ---------------------------------------------------------------------------- channel order


class TwoChannels:
    """An in-memory two-channel log source; ``order`` is what the service's log reported."""

    def __init__(self, order: list[str] | None) -> None:
        self.inputs: list[LogRecord] = []
        self.outputs: list[LogRecord] = []
        if order is not None:
            self.input_channel_order = order

    def iter_inputs(self, start_positions: Mapping[str, int] | None = None) -> Iterator[LogRecord]:
        start = start_positions or {}
        return iter([r for r in self.inputs if r.offset >= start.get(r.channel, 0)])

    def iter_outputs(self, start: int = 0) -> Iterator[LogRecord]:
        return iter(self.outputs[start:])


def _event(ident: str, at_s: int, kind: str, data: dict[str, Any]) -> bytes:
    return orjson.dumps({"id": ident, "source": "shim", "time": format_time(at_s * 1_000_000), "type": kind,
                         "data": data})


def two_channel_log(service_order: list[str]) -> tuple[list[LogRecord], list[LogRecord]]:
    """Both channels carry a node.added with the same (source, id) and time: the channel merged
    first wins, the other is a duplicate. One cycle, merged in ``service_order``."""
    node = {"capacity": {"vcore": 4000}}
    zz = [_event("n", 1, "node.added", {"node_id": "node-zz", **node}),
          _event("a", 2, "app.added", {"app_id": "a", "queue": "root.default", "user": "u"}),
          _event("k", 3, "ask.added", {"app_id": "a", "ask_id": "k", "resources": {"vcore": 1000}})]
    aa = [_event("n", 1, "node.added", {"node_id": "node-aa", **node})]
    inputs = [LogRecord("zz", i, v, 0) for i, v in enumerate(zz)] + [LogRecord("aa", i, v, 0) for i, v in enumerate(aa)]
    engine = Engine()
    through = {"zz": len(zz), "aa": len(aa)}
    outs = run_logged_cycle(engine, inputs, service_order, 10_000_000, {}, through)
    return inputs, [LogRecord("outputs", i, encode_output(o), 0) for i, o in enumerate(outs)]


def source_of(records: tuple[list[LogRecord], list[LogRecord]], order: list[str] | None) -> TwoChannels:
    src = TwoChannels(order)
    src.inputs, src.outputs = records
    return src


def test_channel_order_puts_the_sources_order_first() -> None:
    assert channel_order(source_of(([], []), ["zz", "aa"]), {"aa", "mm", "zz"}) == ["zz", "aa", "mm"]
    assert channel_order(source_of(([], []), None), {"zz", "aa"}) == ["aa", "zz"]


def test_replay_merges_channels_in_the_services_order_not_by_name() -> None:
    log = two_channel_log(["zz", "aa"])
    assert b"node-zz" in next(r.value for r in log[1] if b"allocation.decided" in r.value)
    assert verify(source_of(log, ["zz", "aa"])).ok
    # The same log read by a source that does not know the order (names sorted: aa first) diverges.
    wrong = verify(source_of(log, None))
    assert wrong.divergence is not None and b"node-aa" in (wrong.divergence.derived or b"")
    # export writes the inputs in the order the service applied them.
    lines = list(export_lines(source_of(log, ["zz", "aa"]), ExportStats()))
    assert [orjson.loads(line)["data"].get("node_id") for line in lines[:2]] == ["node-zz", "node-aa"]
