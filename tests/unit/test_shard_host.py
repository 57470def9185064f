"""ShardHost: what the instance does when the group assigns, revokes and hands shards back.

Real services over in-memory logs (no broker: the group's decisions are played by calling
``assign`` and ``revoke`` the way ``ShardMembership`` does). The Kafka side is covered by
tests/integration/test_kafka_shards.py.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import orjson
import pytest

from events.log.memory import MemoryLog
from events.log.port import LogError
from scheduler.service.loop import Service
from scheduler.service.shards import RunningShard, ShardHost
from tests.contracts.log_contract import run


def node(i: int) -> tuple[bytes, bytes]:
    event = {"id": f"n{i}", "source": "t", "type": "node.added",
             "data": {"node_id": f"n{i}", "capacity": {"vcore": 1000}}}
    return b"n", orjson.dumps(event)


class Fleet:
    """One shared log per shard (as a topic is shared by every instance), and what happened."""

    def __init__(self) -> None:
        self.logs = {name: MemoryLog() for name in ("a", "b")}
        self.opened: Counter[str] = Counter()
        self.closed: Counter[str] = Counter()

    async def open_shard(self, name: str) -> RunningShard:
        self.opened[name] += 1
        service = Service(self.logs[name], name=name, poll_interval_s=0.01)
        await service.start()

        async def close() -> None:
            self.closed[name] += 1  # the log stays: it stands for the shard's topics

        return RunningShard(service, close)


async def until(condition: object, what: str) -> None:
    """Poll ``condition`` until it holds; the limit only catches a hang (a busy machine is slow)."""
    for _ in range(12_000):
        if callable(condition) and condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"not within 120 s: {what}")


def test_revoked_shards_pause_and_come_back_without_a_restore_unless_someone_wrote() -> None:
    async def body() -> None:
        fleet = Fleet()
        host = ShardHost(fleet.open_shard)
        runner = asyncio.create_task(host.run())
        await fleet.logs["a"].append_inputs([node(1)])
        host.assign({"a", "b"})
        await until(lambda: host.shards.keys() == {"a", "b"} and all(s.task for s in host.shards.values()),
                    "both shards running")
        await until(lambda: host.shards["a"].service.engine.cycle_number == 1, "shard a ran its input")

        await host.revoke({"a", "b"})  # a rebalance: every shard pauses after its cycle in hand
        assert all(s.task is None for s in host.shards.values())
        host.assign({"a"})  # the group hands a back and gives b to another member
        await until(lambda: "b" not in host.shards and host.shards["a"].task is not None, "a resumed, b gone")
        assert (fleet.opened, fleet.closed) == (Counter(a=1, b=1), Counter(b=1))  # a kept its state

        # a moves away and back, and meanwhile another instance appended a cycle to it.
        await host.revoke({"a"})
        other = Service(fleet.logs["a"], name="a")
        await other.start()
        await fleet.logs["a"].append_inputs([node(2)])
        assert await other.run_cycle_once() == 1
        host.assign({"a"})
        # opened counts a restore as it begins; the shard joins host.shards only once restored.
        await until(lambda: fleet.opened["a"] == 2 and "a" in host.shards and host.shards["a"].task is not None,
                    "a restored again")
        assert host.shards["a"].service.engine.cycle_number == 2  # from the log, with the other's cycle
        assert fleet.closed["a"] == 1

        host.stop()
        await asyncio.wait_for(runner, 60)  # a hang guard only
        assert host.shards == {} and fleet.closed == Counter(a=2, b=1)

    run(body())


def test_once_ends_when_every_assigned_shard_has_caught_up() -> None:
    async def body() -> None:
        fleet = Fleet()
        for i, name in enumerate(("a", "b")):
            await fleet.logs[name].append_inputs([node(i)])
        host = ShardHost(fleet.open_shard, once=True)
        host.assign({"a", "b"})
        await asyncio.wait_for(host.run(), 10)
        assert fleet.opened == Counter(a=1, b=1) and fleet.closed == Counter(a=1, b=1)
        assert [len(await fleet.logs[n].read_outputs()) > 0 for n in ("a", "b")] == [True, True]

    run(body())


def test_a_failing_shard_stops_the_instance() -> None:
    async def body() -> None:
        fleet = Fleet()
        host = ShardHost(fleet.open_shard)
        host.assign({"a"})
        runner = asyncio.create_task(host.run())
        await until(lambda: "a" in host.shards and host.shards["a"].task is not None, "a running")
        await fleet.logs["a"].close()  # the log fails under the running shard
        with pytest.raises(LogError, match="closed"):  # it ends run(), so the process exits non-zero
            await asyncio.wait_for(runner, 60)  # a hang guard only
        assert host.shards == {} and fleet.closed["a"] == 1

    run(body())


def test_a_shard_failing_on_a_poison_input_stops_alone_and_the_others_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Not a log failure (those end run() so that the process restarts): a bug or a poison
    input in one shard stops that shard only, with an error; the instance's other shards
    keep scheduling. With every assigned shard stopped, run() ends with the failure."""

    async def body() -> None:
        fleet = Fleet()
        host = ShardHost(fleet.open_shard)
        host.assign({"a", "b"})
        runner = asyncio.create_task(host.run())
        await until(lambda: host.shards.keys() == {"a", "b"} and all(s.task for s in host.shards.values()),
                    "both shards running")

        async def poisoned(**_: bool) -> int:
            raise TypeError("Integer exceeds 64-bit range")

        host.shards["a"].service.run_cycle_once = poisoned  # type: ignore[method-assign]
        await until(lambda: "a" in host.failed, "a stopped")
        await fleet.logs["b"].append_inputs([node(7)])
        await until(lambda: host.shards["b"].service.engine.cycle_number == 1, "b goes on")
        assert not runner.done()
        host.assign({"a", "b"})  # a rebalance that hands a back does not restart the failed shard
        await fleet.logs["b"].append_inputs([node(8)])
        await until(lambda: host.shards["b"].service.engine.cycle_number == 2, "b still goes on")
        assert fleet.opened == Counter(a=1, b=1)

        host.assign({"a"})  # only the failed shard is left: nothing runs, the instance stops
        with pytest.raises(TypeError, match="64-bit"):
            await asyncio.wait_for(runner, 60)  # a hang guard only

    with caplog.at_level("ERROR"):
        run(body())
    assert "shard a stopped: TypeError('Integer exceeds 64-bit range')" in caplog.text
