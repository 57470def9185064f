"""The MQTT broker stopped and restarted under a running service: it reconnects by itself, nothing lost or doubled.

``evsched run --kafka … --mqtt …`` runs as a process (inputs on the shared Kafka test
broker, so more can arrive while it runs); the MQTT broker is a private mosquitto this test
stops (SIGTERM) after the first part of the inputs and starts again after the second part
was scheduled, with no broker to publish to. A subscriber with a persistent session
(``clean_session=False``, QoS 1; the broker keeps sessions across its restart) records what
reaches ``evsched/default/decisions``. Checked:

* the service never stops scheduling, logs the lost connection and the reconnect (and the
  status re-sync), and exits 0 when told to stop;
* the log's decisions equal ``simulate`` at the recorded cycle boundaries (the outage
  changed nothing), every input is consumed;
* every output in the log arrives over MQTT, nothing else does, and an output that arrives
  twice (QoS 1 resends what was unacknowledged when the connection broke) is byte-identical.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import aiomqtt
import orjson
import pytest

from scheduler.bridge.address import parse_broker_url
from scheduler.simulation.workload import WorkloadSpec
from tests.faults.harness import fault_workload, judge, output_values, wait_consumed
from tests.kafka_broker import KafkaTopics
from tests.kafka_run import kafka_args, read_all, simulate_with_recorded_boundaries, spawn_run, submit_file
from tests.mqtt_broker import WAIT_S, PrivateBroker, mosquitto_binary
from tests.procs import broker_unavailable, fixed_batch

pytestmark = [pytest.mark.faults, pytest.mark.kafka, pytest.mark.mqtt, pytest.mark.slow]
SPEC = WorkloadSpec(nodes=60, apps=12, asks=2400, leaves=4, seed=21)
DECISIONS = "evsched/default/decisions"


class PersistentBroker(PrivateBroker):
    """A private mosquitto that keeps sessions and queued messages across a restart (persistence on)."""

    def __init__(self, binary: str) -> None:
        super().__init__(binary)
        conf = self._conf.read_text().replace("persistence false", "persistence true")
        self._conf.write_text(conf + f"persistence_location {self._dir}/\nmax_queued_messages 0\n")
        # Started as root, mosquitto drops to its own user and then cannot save its database
        # in our root-owned directory ("Permission denied"): sessions were lost on restart and
        # the subscriber missed what was published before it re-subscribed.
        os.chmod(self._dir, 0o777)


@contextlib.contextmanager
def persistent_mosquitto() -> Iterator[PersistentBroker]:
    binary = mosquitto_binary()
    if binary is None:
        broker_unavailable("MQTT test broker: no mosquitto (PATH, /usr/sbin) for a broker that keeps sessions over a "
                           "restart; `make test` installs it from Debian's packages when run as root")
    with PersistentBroker(binary) as broker:  # started, and stopped with its files removed on exit
        yield broker


class Subscriber:
    """A QoS 1 subscriber with a persistent session, reconnecting on its own thread; ``payloads`` in arrival order."""

    def __init__(self, url: str, topic: str) -> None:
        self.address = parse_broker_url(url)
        self.topic = topic
        self.client_id = f"faults-{uuid.uuid4().hex[:10]}"
        self.payloads: list[bytes] = []
        self.connects = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(),), daemon=True)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        with contextlib.suppress(asyncio.CancelledError):
            while True:
                try:
                    async with aiomqtt.Client(self.address.host, self.address.port, identifier=self.client_id,
                                              clean_session=False) as client:
                        await client.subscribe(self.topic, qos=1)
                        self.connects += 1
                        async for message in client.messages:
                            if isinstance(message.payload, bytes):
                                self.payloads.append(message.payload)
                except aiomqtt.MqttError:
                    await asyncio.sleep(0.05)

    def __enter__(self) -> Subscriber:
        self._thread.start()
        deadline = time.monotonic() + WAIT_S
        while not self.connects:
            assert time.monotonic() < deadline, "the subscriber could not connect"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(timeout=10)

    def wait_for(self, wanted: set[bytes], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not wanted <= set(self.payloads):
            missing = wanted - set(self.payloads)
            ids = sorted(orjson.loads(p)["id"] for p in missing)
            assert time.monotonic() < deadline, (
                f"{len(missing)} of {len(wanted)} outputs never arrived over MQTT (first {ids[:5]}, last "
                f"{ids[-5:]}; {len(self.payloads)} received over {self.connects} connections)"
            )
            time.sleep(0.1)


def test_mqtt_broker_restart_loses_and_doubles_nothing(
    kafka_bootstrap: str, kafka_topics: KafkaTopics, tmp_path: Path
) -> None:
    records = fault_workload(SPEC)
    first, second, third = records[:1000], records[1000:1900], records[1900:]
    log_args = kafka_args(kafka_bootstrap, kafka_topics)
    with persistent_mosquitto() as broker, Subscriber(broker.url, DECISIONS) as subscriber:
        submit_file(kafka_bootstrap, kafka_topics, first, tmp_path)
        err = tmp_path / "service.err"
        service = spawn_run([*log_args, *fixed_batch(10), "--mqtt", broker.url], err)
        try:
            wait_consumed(kafka_bootstrap, kafka_topics, len(first), service)
            broker.stop()
            submit_file(kafka_bootstrap, kafka_topics, second, tmp_path)
            wait_consumed(kafka_bootstrap, kafka_topics, len(first) + len(second), service)  # no broker needed
            broker.start()
            submit_file(kafka_bootstrap, kafka_topics, third, tmp_path)
            wait_consumed(kafka_bootstrap, kafka_topics, len(records), service)
            try:
                subscriber.wait_for(output_values(kafka_bootstrap, kafka_topics))
            except AssertionError:
                print(err.read_text(errors="replace")[-3000:])  # the bridge's own account, for the diagnosis
                print(broker.log_text()[-3000:])  # and the broker's
                raise
            assert "Error saving" not in broker.log_text(), "the broker could not keep its sessions over the restart"
        finally:
            service.send_signal(signal.SIGTERM)
            code = service.wait(timeout=60)
    stderr = err.read_text(errors="replace")
    assert code == 0, stderr[-3000:]
    assert "connection lost" in stderr and "reconnected after" in stderr, stderr[-3000:]
    assert "re-published status" in stderr and "Traceback" not in stderr, stderr[-3000:]

    inputs, outs = read_all(kafka_bootstrap, kafka_topics)
    got = judge(outs, {f"{kafka_topics.inputs}/0": len(inputs)})
    assert got.decisions == simulate_with_recorded_boundaries(inputs, outs), "the outage changed a decision"
    logged = output_values(kafka_bootstrap, kafka_topics)
    by_id: dict[str, bytes] = {}
    for payload in subscriber.payloads:
        output_id = orjson.loads(payload)["id"]
        assert by_id.setdefault(output_id, payload) == payload, f"output {output_id} arrived with two contents"
    assert set(by_id.values()) == logged, "MQTT got something other than the log's outputs"
    copies = len(subscriber.payloads) - len(by_id)
    print(f"\nFAULTS MQTT broker restart: service stayed up; {len(logged)} outputs all delivered over MQTT, "
          f"{copies} identical QoS 1 copies; {len(got.decisions)} decisions equal simulate")

