"""MQTT brokers for tests: the session fixture ``mqtt_url``, ``PrivateBroker`` (a mosquitto a
test may stop and restart) and ``MqttReader`` / ``read_retained`` (plain subscribers to assert with).

``mqtt_url`` picks, in order: ``$MQTT_URL``; a broker already listening on 127.0.0.1:1883;
a ``mosquitto`` started on a free port; the pure-Python ``amqtt`` broker; else skip with the
reason. Brokers are shared, so tests use ``unique_name`` for partitions and topic prefixes.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from scheduler.bridge.address import parse_broker_url
from tests.procs import free_port, stop_group

_MOSQUITTO_FALLBACKS = ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto", "/opt/homebrew/sbin/mosquitto")


def unique_name(prefix: str = "t") -> str:
    """A partition name / topic level no other test (or parallel run) uses: ``[A-Za-z0-9_-]``."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def is_listening(host: str, port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _wait_listening(port: int, timeout: float, alive: Any = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if is_listening("127.0.0.1", port):
            return
        if alive is not None and not alive():
            raise RuntimeError("MQTT broker process exited during start-up")
        time.sleep(0.02)
    raise RuntimeError(f"MQTT broker did not listen on 127.0.0.1:{port} within {timeout} s")


def mosquitto_binary() -> str | None:
    """The mosquitto executable: on PATH, or in an sbin directory PATH often lacks."""
    found = shutil.which("mosquitto")
    if found:
        return found
    return next((p for p in _MOSQUITTO_FALLBACKS if os.access(p, os.X_OK)), None)


class PrivateBroker:
    """A mosquitto on a loopback port of its own, in its own process group, stopped by pid.

    ``stop`` then ``start`` restarts it on the same port. No persistence: a restart loses
    retained messages, as a crashed broker without a persistence file would.
    """

    def __init__(self, binary: str, port: int | None = None) -> None:
        self.binary = binary
        self.port = port if port is not None else free_port()
        self._dir = Path(tempfile.mkdtemp(prefix="evsched-mosquitto-"))
        self._conf = self._dir / "mosquitto.conf"
        self._conf.write_text(
            f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\nlog_dest stderr\n"
        )
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def start(self, timeout: float = 5.0) -> None:
        if self._proc is not None:
            return
        self._log = (self._dir / "mosquitto.log").open("ab")
        self._proc = subprocess.Popen(
            [self.binary, "-c", str(self._conf)],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a Ctrl-C of pytest does not hit it
        )
        proc = self._proc
        try:
            _wait_listening(self.port, timeout, alive=lambda: proc.poll() is None)
        except RuntimeError:
            self.stop()
            raise

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_group(proc)
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_text(self) -> str:
        path = self._dir / "mosquitto.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> PrivateBroker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


@contextlib.contextmanager
def private_mosquitto() -> Iterator[PrivateBroker]:
    """A broker the test controls (for stop/restart); skips when no mosquitto binary exists."""
    binary = mosquitto_binary()
    if binary is None:
        pytest.skip("no mosquitto binary (PATH, /usr/sbin): cannot run a broker this test may stop")
    with PrivateBroker(binary) as broker:
        yield broker


async def eventually(predicate: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    """Poll ``predicate`` on the running loop until true; fail the test after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        await asyncio.sleep(0.01)


class MqttReader:
    """An aiomqtt subscriber (QoS 1) for assertions: subscribes on enter, ``get`` collects."""

    def __init__(self, url: str, topic_filter: str) -> None:
        import aiomqtt  # tests may use the client directly; the package keeps it in bridge.mqtt

        a = parse_broker_url(url)
        self._filter = topic_filter
        self._client = aiomqtt.Client(a.host, a.port, username=a.username, password=a.password)

    async def __aenter__(self) -> MqttReader:
        await self._client.__aenter__()
        await self._client.subscribe(self._filter, qos=1)
        self._messages = self._client.messages
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._client.__aexit__(exc_type, exc, tb)

    async def get_full(self, count: int, timeout: float = 5.0) -> list[tuple[str, bytes, bool]]:
        """Up to ``count`` messages as (topic, payload, retain), waiting at most ``timeout`` s."""
        out: list[tuple[str, bytes, bool]] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and (left := deadline - time.monotonic()) > 0:
            try:
                message = await asyncio.wait_for(self._messages.__anext__(), left)
            except TimeoutError:
                break
            payload = message.payload if isinstance(message.payload, bytes) else b""
            out.append((message.topic.value, payload, message.retain))
        return out

    async def get(self, count: int, timeout: float = 5.0) -> list[tuple[str, bytes]]:
        return [(topic, payload) for topic, payload, _ in await self.get_full(count, timeout)]


async def read_retained(url: str, topic_filter: str, settle: float = 0.3) -> dict[str, bytes]:
    """What a subscriber arriving now finds retained under ``topic_filter`` (the broker sends
    retained messages right after SUBACK; ``settle`` s of silence ends the read)."""
    found: dict[str, bytes] = {}
    async with MqttReader(url, topic_filter) as reader:
        while batch := await reader.get_full(1, timeout=settle):
            found.update((topic, payload) for topic, payload, retain in batch if retain)
    return found


class _AmqttBroker:
    """The pure-Python amqtt broker on its own event loop in a daemon thread."""

    def __init__(self) -> None:
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._broker: Any = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def start(self) -> None:
        from amqtt.broker import Broker  # type: ignore[import-not-found,unused-ignore]  # optional fallback

        config = {
            "listeners": {"default": {"type": "tcp", "bind": f"127.0.0.1:{self.port}"}},
            "auth": {"allow-anonymous": True},
            "topic-check": {"enabled": False},
        }
        self._thread.start()

        async def boot() -> None:
            self._broker = Broker(config)
            await self._broker.start()

        asyncio.run_coroutine_threadsafe(boot(), self._loop).result(timeout=10)
        _wait_listening(self.port, 5.0)

    def stop(self) -> None:
        if self._broker is not None:
            asyncio.run_coroutine_threadsafe(self._broker.shutdown(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()


@pytest.fixture(scope="session")
def mqtt_url() -> Iterator[str]:
    """URL of a running MQTT broker for the whole session (see the module docstring)."""
    env = os.environ.get("MQTT_URL")
    if env:
        yield env
        return
    if is_listening("127.0.0.1", 1883):
        yield "mqtt://127.0.0.1:1883"
        return
    binary = mosquitto_binary()
    if binary is not None:
        broker = PrivateBroker(binary)
        try:
            broker.start()
            yield broker.url
        finally:
            broker.cleanup()
        return
    if importlib.util.find_spec("amqtt") is not None:
        amqtt_broker = _AmqttBroker()
        try:
            amqtt_broker.start()
            yield f"mqtt://127.0.0.1:{amqtt_broker.port}"
        finally:
            amqtt_broker.stop()
        return
    pytest.skip("no MQTT broker: MQTT_URL unset, nothing on 127.0.0.1:1883, no mosquitto, no amqtt")
