"""Batch sizing of the live service: batches double while full (a backlog) up to the maximum, and fall
back to the base size once a read comes up short (caught up)."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from events.log.memory import MemoryLog
from scheduler.cli.main import build_parser
from scheduler.service.loop import Service


def node_events(count: int, start: int = 0) -> list[tuple[bytes | None, bytes]]:
    return [
        (f"n{i}".encode(), orjson.dumps({"id": f"e{i}", "source": "t", "type": "node.added",
                                         "data": {"node_id": f"n{i}", "capacity": {"vcore": 1000}}}))
        for i in range(start, start + count)
    ]


async def cycle_sizes(log: MemoryLog) -> list[int]:
    """Inputs consumed by each cycle, from the ``cycle.started`` records."""
    sizes = []
    for rec in await log.read_outputs():
        out = orjson.loads(rec.value)
        if out["type"] == "cycle.started":
            data = out["data"]
            sizes.append(sum(data["inputs_through"].values()) - sum(data["inputs_from"].values()))
    return sizes


def run(backlog: int, batch: int, max_batch: int | None, then: int = 0) -> list[int]:
    async def main() -> list[int]:
        log = MemoryLog(now_us=lambda: 1_000_000)
        await log.append_inputs(node_events(backlog))
        service = Service(log, batch_records=batch, max_batch_records=max_batch, now_us=lambda: 2_000_000)
        await service.start()
        await service.run(once=True)
        if then:
            await log.append_inputs(node_events(then, start=backlog))
            await service.run(once=True)
        return await cycle_sizes(log)

    return asyncio.run(main())


def test_batches_double_while_full_up_to_the_maximum() -> None:
    # 10 + 20 + 40 + 40 + 40 = 150, then the 50 left (short: caught up).
    assert run(200, 10, 40) == [10, 20, 40, 40, 40, 40, 10]


def test_a_short_read_resets_the_batch_to_its_base_size() -> None:
    # The backlog of 35 is drained (10, 20, then 5 short), new inputs start again at 10.
    assert run(35, 10, 40, then=25) == [10, 20, 5, 10, 15]


def test_without_a_maximum_batches_stay_fixed() -> None:
    assert run(35, 10, None) == [10, 10, 10, 5]


@pytest.mark.parametrize("flag", ["--batch", "--max-batch"])
@pytest.mark.parametrize("value", ["0", "-5", "ten"])
def test_batch_sizes_below_one_are_refused_by_the_cli(flag: str, value: str, capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["run", flag, value])
    assert exit_info.value.code == 1  # usage errors exit 1 (docs/contract.md §6: 2 is a replay divergence)
    assert f"argument {flag}:" in capsys.readouterr().err


def test_batch_defaults() -> None:
    args = build_parser().parse_args(["run"])
    assert (args.batch, args.max_batch) == (5_000, None)  # None: 4 x --batch (service_wiring.open_service)
