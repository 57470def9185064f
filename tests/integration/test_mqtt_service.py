"""The service with the MQTT bridge on a real broker: per-node topics and retained queue status."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import aiomqtt
import orjson
import pytest

from events.log.file import FileLog
from scheduler.bridge.address import parse_broker_url
from scheduler.recovery import recover
from scheduler.workload import WorkloadSpec, config_yaml, events, numbered

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.mqtt


def test_node_topic_gets_exactly_its_decisions_and_status_matches_state(tmp_path: Path, mqtt_url: str) -> None:
    partition = "default"
    spec = WorkloadSpec(nodes=12, apps=6, asks=200, leaves=3, seed=3)
    lines = [orjson.dumps({"type": "config.updated", "data": {"yaml": config_yaml(spec)}, "id": "cfg", "source": "t"})]
    lines += [orjson.dumps(e) for e in numbered(events(spec), source=f"t-{uuid.uuid4().hex[:6]}")]
    (tmp_path / "in.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    log_dir = tmp_path / "log"
    subprocess.run([sys.executable, "-m", "scheduler", "submit", "--log", str(log_dir), str(tmp_path / "in.jsonl")],
                   cwd=ROOT, check=True, capture_output=True)
    address = parse_broker_url(mqtt_url)
    node_topic = f"evsched/{partition}/nodes/node-00003/allocations"

    async def scenario() -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
        received: list[dict[str, Any]] = []
        async with aiomqtt.Client(address.host, address.port) as client:
            await client.subscribe(node_topic, qos=1)
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "scheduler", "run", "--log", str(log_dir), "--once", "--mqtt", mqtt_url,
                cwd=ROOT, stderr=asyncio.subprocess.PIPE,
            )
            _, err = await proc.communicate()
            assert proc.returncode == 0, err.decode()

            async def drain() -> None:
                async for msg in client.messages:
                    received.append(orjson.loads(bytes(msg.payload)))  # type: ignore[arg-type]

            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(drain(), 1.5)
        status: dict[str, dict[str, Any]] = {}
        async with aiomqtt.Client(address.host, address.port) as client:
            await client.subscribe(f"evsched/{partition}/queues/#", qos=1)

            async def collect() -> None:
                async for msg in client.messages:
                    if msg.retain and msg.payload:
                        path = str(msg.topic).split("/queues/", 1)[1].replace("/", ".")
                        status[path] = orjson.loads(bytes(msg.payload))  # type: ignore[arg-type]

            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(collect(), 1.0)
        return received, status

    received, status = asyncio.run(scenario())
    with FileLog(log_dir, readonly=True) as log:
        outs = [orjson.loads(r.value) for r in log.iter_outputs()]
    expected = [o for o in outs if o["type"] == "allocation.decided" and o["data"]["node_id"] == "node-00003"]
    assert expected, "the workload should place something on node-00003"
    assert received == expected

    async def final_state() -> dict[str, Any]:
        log = FileLog(log_dir, readonly=True)
        try:
            return (await recover(log, source="evsched")).engine.state_form()
        finally:
            await log.close()

    queues = asyncio.run(final_state())["queues"]
    # The shared broker may hold retained status of other runs' queues; every queue of this
    # run's state was published by this run (the first cycle publishes all), so compare those.
    assert {path: status.get(path) for path in queues} == queues
