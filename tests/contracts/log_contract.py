"""The EventLog contract suite: every log adapter's tests subclass ``LogContract``.

A subclass (named ``Test…``) implements ``make_log`` and sets the class attributes that
describe its adapter; the tests themselves are inherited. ``make_log`` returns an async
context manager that yields an open log and closes it on exit; called twice with the
same ``tmp_path`` it must open the *same* log (that is what the reopen tests use), and
with different ``tmp_path``s independent, empty logs (a broker adapter can derive its
topic names from ``tmp_path.name``). Fixtures a subclass needs (a broker, say) can be
stashed on ``self`` by an autouse fixture method on the subclass.

Nothing here assumes files or a channel count: channel names come from
``await log.input_channels()``, and records of one ``append_inputs`` call may land on
several channels, each keeping the append order. pytest-asyncio is not used: each test
is a plain method that runs its coroutine with ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pytest

from events.log.clock import wall_clock_us as wall_us
from events.log.port import (
    CommitsOffsets,
    DeadLetters,
    EventLog,
    GappedOutputs,
    Leased,
    LogRecord,
    TransactionalLog,
)
from events.log.source import read_range, read_range_async

T = TypeVar("T")
Record = tuple[bytes | None, bytes]


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one test coroutine to completion on a fresh event loop."""
    return asyncio.run(coro)


class ManualClock:
    """A clock a test sets by hand: ``clock.now = 5``; calling it returns ``now``."""

    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def inputs(n: int, tag: str = "r") -> list[Record]:
    """``n`` distinct input records, some keyed (three keys), some not."""
    return [
        (None if i % 2 else f"key-{i % 3}".encode(), f"{tag}-{i:05d}".encode()) for i in range(n)
    ]


class LogContract:
    """Behaviour every ``EventLog`` adapter must show."""

    persistent: ClassVar[bool] = True  # records survive close and reopen
    injectable_clock: ClassVar[bool] = True  # make_log honours now_us
    dense_offsets: ClassVar[bool] = True  # offsets are exactly 0, 1, 2, … per channel
    poll_timeout_s: ClassVar[float] = 60.0  # a hang guard: how long reads may take to see new records
    # The optional capabilities (events.log.port) the adapter declares: exactly these must hold.
    capabilities: ClassVar[frozenset[type]] = frozenset()

    def make_log(
        self, tmp_path: Path, now_us: Callable[[], int] | None = None
    ) -> AbstractAsyncContextManager[EventLog]:
        raise NotImplementedError

    # -- helpers ---------------------------------------------------------------------

    async def read_all_inputs(
        self, log: EventLog, positions: Mapping[str, int] | None = None, batch: int = 500
    ) -> tuple[list[LogRecord], dict[str, int]]:
        """Every input record from ``positions`` to the current end, and the new positions."""
        pos = dict(positions or {})
        end = await log.input_end()
        out: list[LogRecord] = []
        deadline = time.monotonic() + self.poll_timeout_s
        while any(pos.get(ch, 0) < e for ch, e in end.items()):
            got = await log.read_inputs(pos, batch)
            assert len(got) <= batch
            if not got:
                assert time.monotonic() < deadline, f"reads stalled at {pos}, end is {end}"
                await asyncio.sleep(0.01)
                continue
            for r in got:
                assert r.offset >= pos.get(r.channel, 0), f"{r.position} read twice"
                pos[r.channel] = r.offset + 1
            out.extend(got)
        return out, pos

    def assert_matches(self, got: Sequence[LogRecord], sent: Sequence[Record], *, whole: bool = True) -> None:
        """``got`` holds exactly ``sent``, each channel in append order, offsets rising (``whole``: and
        dense on a dense adapter, when ``got`` is all its channels hold of that stretch)."""
        assert sorted((r.key or b"", r.key is None, r.value) for r in got) == sorted(
            (k or b"", k is None, v) for k, v in sent
        )
        index = {v: i for i, (_, v) in enumerate(sent)}
        for ch in {r.channel for r in got}:
            mine = [r for r in got if r.channel == ch]
            assert [index[r.value] for r in mine] == sorted(index[r.value] for r in mine)
            offsets = [r.offset for r in mine]
            assert offsets == sorted(set(offsets)), f"{ch}: offsets not strictly increasing"
            if self.dense_offsets and whole:
                assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))

    # -- inputs ----------------------------------------------------------------------

    def test_empty_log_reads_nothing(self, tmp_path: Path) -> None:
        async def body() -> None:
            async with self.make_log(tmp_path) as log:
                channels = await log.input_channels()
                assert channels and all(isinstance(c, str) for c in channels)
                assert await log.input_channels() == channels
                assert await log.input_end() == dict.fromkeys(channels, 0)
                assert await log.output_end() == 0
                assert await log.read_inputs({}, 10) == []
                assert await log.read_outputs() == []
                await log.append_inputs([])
                await log.append_outputs([])
                assert await log.input_end() == dict.fromkeys(channels, 0)
                assert await log.output_end() == 0

        run(body())

    def test_inputs_round_trip_in_order(self, tmp_path: Path) -> None:
        async def body() -> None:
            async with self.make_log(tmp_path) as log:
                sent = inputs(60)
                before = wall_us()
                await log.append_inputs(sent[:25])
                await log.append_inputs(sent[25:])
                after = wall_us()
                got, pos = await self.read_all_inputs(log)
                self.assert_matches(got, sent)
                assert set(await log.input_channels()) >= {r.channel for r in got}
                slack = 1_000_000  # brokers may stamp with their own (millisecond) clock
                assert all(before - slack <= r.append_time_us <= after + slack for r in got)
                end = await log.input_end()
                if self.dense_offsets:
                    assert pos == {ch: e for ch, e in end.items() if e > 0}
                    assert sum(end.values()) == len(sent)
                assert all(r.position == f"{r.channel}@{r.offset}" for r in got)

        run(body())

    def test_binary_values_and_keys_survive(self, tmp_path: Path) -> None:
        async def body() -> None:
            async with self.make_log(tmp_path) as log:
                sent: list[Record] = [
                    (b"", b"empty key"),
                    (None, b""),
                    (b"\x00\xff\xe1", bytes(range(256))),
                    (b"big", b"\xe1" * 100_000),
                ]
                await log.append_inputs(sent)
                got, _ = await self.read_all_inputs(log)
                assert sorted((r.key, r.value) for r in got if r.key is not None) == sorted(
                    (k, v) for k, v in sent if k is not None
                )
                assert [r.value for r in got if r.key is None] == [b""]

        run(body())

    def test_positions_resume_exactly(self, tmp_path: Path) -> None:
        async def body() -> None:
            async with self.make_log(tmp_path) as log:
                sent = inputs(40)
                await log.append_inputs(sent)
                whole, _ = await self.read_all_inputs(log)
                pieces, pos = await self.read_all_inputs(log, {}, batch=7)
                assert sorted(pieces, key=_order) == sorted(whole, key=_order)
                # Resume from the middle: the rest, nothing twice, nothing skipped.
                rest, _ = await self.read_all_inputs(log, _positions_after(whole[:13]))
                assert sorted(whole[:13] + rest, key=_order) == sorted(whole, key=_order)
                # Appends after the end show up from the old end on.
                more = inputs(5, tag="more")
                await log.append_inputs(more)
                new, _ = await self.read_all_inputs(log, pos)
                self.assert_matches(new, more)

        run(body())

    def test_read_respects_max_records(self, tmp_path: Path) -> None:
        async def body() -> None:
            async with self.make_log(tmp_path) as log:
                await log.append_inputs(inputs(20))
                deadline = time.monotonic() + self.poll_timeout_s
                got = await log.read_inputs({}, 5)
                while not got and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)
                    got = await log.read_inputs({}, 5)
                assert 1 <= len(got) <= 5
                if self.dense_offsets and len(await log.input_channels()) == 1:
                    assert [r.offset for r in got] == [0, 1, 2, 3, 4]
                    assert len(await log.read_inputs({}, 1)) == 1

        run(body())

    def test_many_small_appends(self, tmp_path: Path) -> None:
        async def body() -> None:
            async with self.make_log(tmp_path) as log:
                sent = inputs(300, tag="small")
                for record in sent:
                    await log.append_inputs([record])
                got, _ = await self.read_all_inputs(log)
                self.assert_matches(got, sent)

        run(body())

    def test_injected_clock_stamps_append_times(self, tmp_path: Path) -> None:
        if not self.injectable_clock:
            pytest.skip("this adapter's append times come from elsewhere")

        async def body() -> None:
            clock = ManualClock(1_000)
            async with self.make_log(tmp_path, clock) as log:
                await log.append_inputs(inputs(3, "a"))
                await log.append_outputs([b"o1"])
                clock.now = 2_000
                await log.append_inputs(inputs(2, "b"))
                await log.append_outputs([b"o2", b"o3"])
                got, _ = await self.read_all_inputs(log)
                times = {r.value: r.append_time_us for r in got}
                assert times == {b"a-00000": 1_000, b"a-00001": 1_000, b"a-00002": 1_000,
                                 b"b-00000": 2_000, b"b-00001": 2_000}  # fmt: skip
                outs = await log.read_outputs()
                assert [r.append_time_us for r in outs] == [1_000, 2_000, 2_000]

        run(body())

    # -- outputs ---------------------------------------------------------------------

    def test_outputs_append_and_read_from_offset(self, tmp_path: Path) -> None:
        async def body() -> None:
            async with self.make_log(tmp_path) as log:
                values = [f"out-{i}".encode() for i in range(20)]
                before = wall_us()
                for chunk in (values[:1], values[1:12], values[12:]):
                    await log.append_outputs(chunk)
                after = wall_us()
                got = await log.read_outputs()
                assert [r.value for r in got] == values
                assert len({r.channel for r in got}) == 1
                assert all(r.key is None for r in got)
                assert all(before - 1_000_000 <= r.append_time_us <= after + 1_000_000 for r in got)
                offsets = [r.offset for r in got]
                assert offsets == sorted(set(offsets))
                if self.dense_offsets:
                    assert offsets == list(range(20))
                end = await log.output_end()
                assert end == offsets[-1] + 1
                assert await log.read_outputs(got[5].offset) == got[5:]
                assert await log.read_outputs(got[5].offset, 3) == got[5:8]
                assert await log.read_outputs(got[0].offset, 1) == got[:1]
                assert await log.read_outputs(end) == []
                await log.append_outputs([b"late"])
                assert [r.value for r in await log.read_outputs(end)] == [b"late"]
                assert await log.output_end() > end

        run(body())

    # -- persistence -----------------------------------------------------------------

    def test_reopen_keeps_everything(self, tmp_path: Path) -> None:
        if not self.persistent:
            pytest.skip("not a persistent adapter")

        async def body() -> None:
            async with self.make_log(tmp_path) as log:
                await log.append_inputs(inputs(30))
                await log.append_outputs([b"d1", b"d2"])
                before, in_end = (await self.read_all_inputs(log))[0], await log.input_end()
                outs, out_end = await log.read_outputs(), await log.output_end()
            async with self.make_log(tmp_path) as log:
                assert await log.input_end() == in_end
                assert await log.output_end() == out_end
                after, pos = await self.read_all_inputs(log)
                assert sorted(after, key=_order) == sorted(before, key=_order)
                assert await log.read_outputs() == outs
                more = inputs(4, tag="after-reopen")
                await log.append_inputs(more)
                await log.append_outputs([b"d3"])
                new, _ = await self.read_all_inputs(log, pos)
                self.assert_matches(new, more)
                assert [r.value for r in await log.read_outputs(out_end)] == [b"d3"]
            async with self.make_log(tmp_path) as log:
                got, _ = await self.read_all_inputs(log)
                assert len(got) == 34
                assert [r.value for r in await log.read_outputs()] == [b"d1", b"d2", b"d3"]

        run(body())

    # -- the admin channel -----------------------------------------------------------

    def test_admin_records_land_on_the_admin_channels_only(self, tmp_path: Path) -> None:
        async def body() -> None:
            async with self.make_log(tmp_path) as log:
                admin = await log.admin_channels()
                assert admin and set(admin) <= set(await log.input_channels())
                ordinary, rules = inputs(12, "in"), inputs(5, "admin")
                await log.append_inputs(ordinary[:6])
                await log.append_admin(rules[:2])
                await log.append_inputs(ordinary[6:])
                await log.append_admin(rules[2:])
                got, _ = await self.read_all_inputs(log)
                self.assert_matches([r for r in got if r.channel in admin], rules)
                self.assert_matches([r for r in got if r.channel not in admin], ordinary)
                assert len(got) == len(ordinary) + len(rules)

        run(body())

    # -- batches and concurrency -----------------------------------------------------

    def test_concurrent_writers_and_a_reader_lose_nothing(self, tmp_path: Path) -> None:
        """Writers appending at once and a reader following them: every record read once, each
        writer's records in its order; each ``append_outputs`` call's records stay together."""

        async def body() -> None:
            async with self.make_log(tmp_path) as log:
                batches = [inputs(20, f"w{w}") for w in range(4)]
                outs = [[f"o{w}-{i}".encode() for i in range(5)] for w in range(4)]

                async def writer(w: int) -> None:
                    for i in range(0, 20, 4):
                        await log.append_inputs(batches[w][i:i + 4])
                        await asyncio.sleep(0)
                    await log.append_outputs(outs[w])

                seen: list[LogRecord] = []

                async def reader() -> None:
                    pos: dict[str, int] = {}
                    deadline = time.monotonic() + self.poll_timeout_s
                    while len(seen) < 80:
                        assert time.monotonic() < deadline, f"the reader saw {len(seen)} of 80"
                        got = await log.read_inputs(pos, 7)
                        for r in got:
                            assert r.offset >= pos.get(r.channel, 0), f"{r.position} read twice"
                            pos[r.channel] = r.offset + 1
                        seen.extend(got)
                        await asyncio.sleep(0 if got else 0.01)

                await asyncio.gather(reader(), *(writer(w) for w in range(4)))
                for w in range(4):
                    mine = [r for r in seen if r.value.startswith(f"w{w}-".encode())]
                    self.assert_matches(mine, batches[w], whole=False)
                values = [r.value for r in await log.read_outputs()]
                assert sorted(values) == sorted(v for batch in outs for v in batch)
                for batch in outs:
                    start = values.index(batch[0])
                    assert values[start:start + len(batch)] == batch, "an output batch was split"

        run(body())

    # -- the sync read side and input ranges -------------------------------------------

    def test_an_input_range_reads_alike_from_the_port_and_a_sync_source(self, tmp_path: Path) -> None:
        async def body() -> None:
            async with self.make_log(tmp_path) as log:
                await log.append_inputs(inputs(30))
                await log.append_admin(inputs(4, "admin"))
                whole, end = await self.read_all_inputs(log)
                start = _positions_after([r for r in whole if r.offset < 3])
                through = {ch: max(start.get(ch, 0), e - 2) for ch, e in end.items()}
                ranged = await read_range_async(log, start, through)
                want = [r for r in whole if start.get(r.channel, 0) <= r.offset < through.get(r.channel, 0)]
                assert sorted(ranged, key=_order) == sorted(want, key=_order)
                source = self.sync_source(log)
                if source is not None:
                    assert sorted(read_range(source, start, through), key=_order) == sorted(want, key=_order)

        run(body())

    def sync_source(self, log: EventLog) -> Any:
        """The adapter's synchronous ``LogSource`` over ``log`` (events.log.source), or None."""
        return log if hasattr(log, "iter_inputs") else None

    # -- capabilities ------------------------------------------------------------------

    def test_declares_exactly_its_capabilities(self, tmp_path: Path) -> None:
        async def body() -> None:
            async with self.make_log(tmp_path) as log:
                declarable = (TransactionalLog, CommitsOffsets, DeadLetters, Leased, GappedOutputs)
                found = {c for c in declarable if isinstance(log, c)}
                assert found == set(self.capabilities)
                if isinstance(log, CommitsOffsets):
                    await log.append_inputs(inputs(3))
                    _, pos = await self.read_all_inputs(log)
                    await log.commit(pos)  # after a read: the positions it reached
                if isinstance(log, DeadLetters):
                    record = (await self.read_all_inputs(log))[0][:1] or [LogRecord("x", 0, b"bad", 0)]
                    await log.dead_letter(record[0], "unreadable: a contract test")
                if isinstance(log, TransactionalLog) and not log.transactional:
                    await log.append_outputs([b"plain"])  # no transactional id: plain appends as before
                    assert [r.value for r in await log.read_outputs()] == [b"plain"]

        run(body())


def _order(r: LogRecord) -> tuple[str, int]:
    return (r.channel, r.offset)


def _positions_after(records: Sequence[LogRecord]) -> dict[str, int]:
    pos: dict[str, int] = {}
    for r in records:
        pos[r.channel] = max(pos.get(r.channel, 0), r.offset + 1)
    return pos
