"""The service with the MQTT bridge on a real broker: per-node topics and retained queue status."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any, cast

import orjson
import pytest

from events.log.file import FileLog
from scheduler.bridge.mqtt import MqttPublisher
from scheduler.bridge.topics import encode_status, queue_topic
from scheduler.service.bridge_wiring import MqttBridge
from scheduler.service.loop import Service
from scheduler.service.recovery import recover
from scheduler.simulation.workload import WorkloadSpec, config_yaml, events, numbered
from tests.cli import evsched_argv, submit_as_cluster
from tests.mqtt_broker import WAIT_S, MqttReader, eventually, private_broker, read_retained

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.mqtt


def test_node_topic_gets_exactly_its_decisions_and_status_matches_state(tmp_path: Path, mqtt_url: str) -> None:
    partition = "default"
    spec = WorkloadSpec(nodes=12, apps=6, asks=200, leaves=3, seed=3)
    # The config goes to the admin channel; its time orders it before the workload's (docs/contract.md §4 merge).
    lines = [orjson.dumps({"type": "config.updated", "data": {"yaml": config_yaml(spec)}, "id": "cfg", "source": "t",
                           "time": "1970-01-01T00:00:00Z"})]
    lines += [orjson.dumps(e) for e in numbered(events(spec), source=f"t-{uuid.uuid4().hex[:6]}")]
    (tmp_path / "in.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    log_dir = tmp_path / "log"
    submit_as_cluster(["--log", str(log_dir)], tmp_path / "in.jsonl")
    node_topic = f"evsched/{partition}/nodes/node-00003/allocations"

    async def scenario() -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
        async with MqttReader(mqtt_url, node_topic) as reader:
            proc = await asyncio.create_subprocess_exec(
                *evsched_argv("run", "--log", str(log_dir), "--once", "--mqtt", mqtt_url),
                cwd=ROOT, stderr=asyncio.subprocess.PIPE,
            )
            _, err = await proc.communicate()
            assert proc.returncode == 0, err.decode()
            # The run has exited: all it published is at the broker, ahead of the reader's marker.
            received = [orjson.loads(payload) for _, payload, _ in await reader.until_marker()]
        retained = await read_retained(mqtt_url, f"evsched/{partition}/queues/#")
        status = {topic.split("/queues/", 1)[1].replace("/", "."): orjson.loads(payload)
                  for topic, payload in retained.items() if payload}
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


async def retained_becomes(url: str, expected: dict[str, bytes]) -> dict[str, bytes]:
    """The retained queue status once it equals ``expected`` (it arrives shortly after a
    reconnect); what it is after ``WAIT_S`` s otherwise (a hang)."""
    deadline = time.monotonic() + WAIT_S
    while (retained := await read_retained(url, "evsched/default/queues/#")) != expected:
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    return retained


def test_broker_restart_mid_run_leaves_decisions_unchanged_and_status_resynced(tmp_path: Path) -> None:
    """The real service + MqttBridge against a mosquitto the test stops after the first cycle
    and restarts after the last: decisions equal a run without MQTT, cycles never wait on the
    broker, and after the reconnect the retained status equals the final state."""
    spec = WorkloadSpec(nodes=10, apps=5, asks=150, leaves=3, seed=8)
    lines = [orjson.dumps({"type": "config.updated", "data": {"yaml": config_yaml(spec)}, "id": "cfg", "source": "t"})]
    lines += [orjson.dumps(e) for e in numbered(events(spec))]

    async def run_service(
        log_dir: Path, bridge: MqttBridge | None, after_first: Any = None
    ) -> tuple[list[bytes], dict[str, Any]]:
        log = FileLog(log_dir, now_us=lambda: 1_000_000)
        await log.append_admin([(None, lines[0])])  # the config, by the operator
        await log.append_inputs([(None, line) for line in lines[1:]])
        service = Service(log, batch_records=40, now_us=lambda: 2_000_000, listeners=[bridge] if bridge else [])
        await service.start()
        first = True
        while await service.run_cycle_once():
            if first and after_first is not None:
                await after_first()
                first = False
        outs = [r.value for r in await log.read_outputs(0)]
        await log.close()
        return outs, cast(dict[str, Any], service.engine.state_form()["queues"])

    async def scenario(broker_url: str, stop: Any, start: Any) -> None:
        plain, _ = await run_service(tmp_path / "plain", None)
        publisher = MqttPublisher(broker_url)
        bridge = MqttBridge(publisher, "default")
        await publisher.start()
        assert await publisher.wait_connected(WAIT_S)
        delivered_before: list[int] = []

        async def outage() -> None:
            await asyncio.to_thread(stop)
            await eventually(lambda: not publisher.stats().connected, what="loss noticed")
            delivered_before.append(publisher.stats().published)

        bridged, final_queues = await run_service(tmp_path / "bridged", bridge, after_first=outage)
        assert bridged == plain  # the broker outage changed nothing the scheduler decided
        # Every later cycle ran to the end with the broker down and nothing delivered: cycles
        # never wait on the broker (one that did could not have finished before the restart).
        assert not publisher.stats().connected and publisher.stats().published == delivered_before[0]
        await asyncio.to_thread(start)
        await eventually(lambda: publisher.stats().reconnects >= 1 and publisher.stats().connected, what="reconnect")
        # The oracle is the scheduler's own final state, not anything the bridge remembers.
        expected = {queue_topic("default", q): encode_status(s) for q, s in final_queues.items()}
        assert len(expected) == 1 + 3 + 3  # root, 3 departments, 3 leaves
        assert await retained_becomes(broker_url, expected) == expected  # the backlog and the resync arrived
        # A second outage with no cycle in it: the restarted broker holds no retained status at
        # all, so only the bridge's re-sync on reconnect can bring it back.
        await asyncio.to_thread(stop)
        await eventually(lambda: not publisher.stats().connected, what="second loss noticed")
        await asyncio.to_thread(start)
        await eventually(lambda: publisher.stats().reconnects >= 2 and publisher.stats().connected, what="reconnect")
        assert await retained_becomes(broker_url, expected) == expected
        await publisher.close()

    with private_broker() as broker:
        asyncio.run(scenario(broker.url, broker.stop, broker.start))
