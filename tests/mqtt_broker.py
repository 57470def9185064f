"""MQTT brokers for tests: the session fixture ``mqtt_url``, ``PrivateBroker`` (a mosquitto a
test may stop and restart), ``AmqttBroker`` (the same with the pure-Python amqtt broker),
``private_broker`` (whichever of the two this machine has) and ``MqttReader`` /
``read_retained`` (plain subscribers to assert with).

``mqtt_url`` is ``$MQTT_URL`` when set (an explicit choice); otherwise a broker this session
starts itself on a free loopback port, as a child process: mosquitto when installed (``make
test`` installs it from Debian's packages where it may), else amqtt (in the test extras). A
broker that happens to listen on 127.0.0.1:1883 is never used. When neither can start, the
tests skip with the reason, or fail with it under ``CI=true`` (``broker_unavailable``).
Brokers are shared, so tests use ``unique_name`` for partitions and topic prefixes.

Reads end on observed progress, not on a quiet spell: ``MqttReader.until_marker`` publishes a
marker behind what it waits for and reads until the marker arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import pytest

from scheduler.bridge.address import parse_broker_url
from tests.procs import broker_unavailable, free_port, stop_group

_MOSQUITTO_FALLBACKS = ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto", "/opt/homebrew/sbin/mosquitto")
START_TIMEOUT_S = 60.0  # a hang guard: mosquitto listens in milliseconds, amqtt in about a second
WAIT_S = 60.0  # how long a reader waits for what it was told to expect before calling it a hang


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


def has_amqtt() -> bool:
    """Whether the amqtt broker (test extras) can run here."""
    return importlib.util.find_spec("amqtt") is not None


class PrivateBroker:
    """A mosquitto on a loopback port of its own, in its own process group, stopped by pid.

    ``stop`` then ``start`` restarts it on the same port. No persistence: a restart loses
    retained messages, as a crashed broker without a persistence file would. ``users``
    (name → password) makes it refuse anonymous and wrong logins.
    """

    name = "mosquitto"

    def __init__(self, binary: str, port: int | None = None, *, users: dict[str, str] | None = None) -> None:
        self.binary = binary
        self.port = port if port is not None else free_port()
        self._dir = Path(tempfile.mkdtemp(prefix=f"evsched-{self.name}-"))
        self._conf = self._dir / f"{self.name}.conf"
        self._configure(users or {})
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    def _configure(self, users: dict[str, str]) -> None:
        lines = [f"listener {self.port} 127.0.0.1", "persistence false", "log_dest stderr"]
        if users:
            passwd = self._dir / "passwd"
            tool = Path(self.binary).with_name("mosquitto_passwd")
            tool_path = str(tool) if tool.exists() else shutil.which("mosquitto_passwd") or "mosquitto_passwd"
            for i, (user, password) in enumerate(users.items()):
                create = ["-c"] if i == 0 else []
                subprocess.run([tool_path, "-b", *create, str(passwd), user, password], check=True, capture_output=True)
            lines += ["allow_anonymous false", f"password_file {passwd}"]
            if os.geteuid() == 0:  # as root mosquitto would drop to a user that cannot read our temp dir
                lines.append("user root")
        else:
            lines.append("allow_anonymous true")
        self._conf.write_text("\n".join(lines) + "\n")

    def _command(self) -> list[str]:
        return [self.binary, "-c", str(self._conf)]

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        if self._proc is not None:
            return
        self._log = (self._dir / "broker.log").open("ab")
        self._proc = subprocess.Popen(
            self._command(),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a Ctrl-C of pytest does not hit it
        )
        proc = self._proc
        try:
            _wait_listening(self.port, timeout, alive=lambda: proc.poll() is None)
        except RuntimeError as exc:
            self.stop()
            raise RuntimeError(f"{self.name}: {exc}; its log:\n{self.log_text()[-3000:]}") from None

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_group(proc)
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_text(self) -> str:
        path = self._dir / "broker.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


class AmqttBroker(PrivateBroker):
    """The pure-Python amqtt broker as a child process, with the same life cycle as mosquitto's."""

    name = "amqtt"

    def __init__(self, port: int | None = None, *, users: dict[str, str] | None = None) -> None:
        super().__init__(sys.executable, port, users=users)

    def _configure(self, users: dict[str, str]) -> None:
        lines = ["listeners:", "  default:", "    type: tcp", f"    bind: 127.0.0.1:{self.port}", "plugins:"]
        if users:
            from pwdlib import PasswordHash  # amqtt's own dependency, for its password file
            from pwdlib.hashers.argon2 import Argon2Hasher

            hasher = PasswordHash((Argon2Hasher(),))
            passwd = self._dir / "passwd"
            passwd.write_text("".join(f"{user}:{hasher.hash(pw)}\n" for user, pw in users.items()))
            lines += ["  amqtt.plugins.authentication.FileAuthPlugin:", f"    password_file: {passwd}"]
        else:
            lines += ["  amqtt.plugins.authentication.AnonymousAuthPlugin:", "    allow_anonymous: true"]
        self._conf.write_text("\n".join(lines) + "\n")

    def _command(self) -> list[str]:
        return [self.binary, "-m", "amqtt.scripts.broker_script", "-c", str(self._conf)]


def new_private_broker(users: dict[str, str] | None = None) -> PrivateBroker:
    """A private broker (not started): mosquitto when installed, else amqtt; else skip, or
    fail under CI, naming what is missing."""
    binary = mosquitto_binary()
    if binary is not None:
        return PrivateBroker(binary, users=users)
    if has_amqtt():
        return AmqttBroker(users=users)
    broker_unavailable(
        "MQTT test broker: no mosquitto (PATH, /usr/sbin; `make test` installs it from Debian's packages "
        "when run as root) and no amqtt (pip install -e '.[test]')"
    )


def describe_mqtt_broker() -> str:
    """What ``mqtt_url`` will use, in words (for the run's header)."""
    if os.environ.get("MQTT_URL"):
        return "$MQTT_URL (given)"
    binary = mosquitto_binary()
    if binary is not None:
        return f"mosquitto ({binary}), started by the tests on a free loopback port"
    if has_amqtt():
        return "amqtt (no mosquitto installed), started by the tests on a free loopback port"
    return "none available (no mosquitto, no amqtt)"


@contextlib.contextmanager
def private_broker(users: dict[str, str] | None = None) -> Iterator[PrivateBroker]:
    """A started broker the test controls (stop/restart), removed afterwards."""
    with new_private_broker(users) as broker:
        yield broker


async def eventually(predicate: Callable[[], bool], timeout: float = WAIT_S, what: str = "condition") -> None:
    """Poll ``predicate`` on the running loop until true; ``timeout`` s only catches a hang."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        await asyncio.sleep(0.01)


def marker_topic(topic_filter: str) -> str:
    """A topic of its own that ``topic_filter`` matches (for ``MqttReader.until_marker``)."""
    tag = f"_marker-{uuid.uuid4().hex[:12]}"
    if topic_filter.endswith("/#"):
        return f"{topic_filter[:-2]}/{tag}"
    assert "+" not in topic_filter and "#" not in topic_filter, f"no marker topic for {topic_filter!r}"
    return topic_filter


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

    async def get_full(self, count: int, timeout: float = WAIT_S) -> list[tuple[str, bytes, bool]]:
        """``count`` messages as (topic, payload, retain); fewer only if ``timeout`` s pass (a hang)."""
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

    async def get(self, count: int, timeout: float = WAIT_S) -> list[tuple[str, bytes]]:
        return [(topic, payload) for topic, payload, _ in await self.get_full(count, timeout)]

    async def until_marker(self, topic: str | None = None) -> list[tuple[str, bytes, bool]]:
        """Every message that reaches this reader before a marker it publishes now (QoS 1, not
        retained) to ``topic`` (default: a topic of its own under the filter): what the broker
        had sent or queued for it so far, the retained messages of the subscription included,
        with no quiet spell assumed. Messages from one broker to one subscriber keep their order."""
        topic = topic or marker_topic(self._filter)
        marker = f"marker-{uuid.uuid4().hex}".encode()
        await self._client.publish(topic, marker, qos=1)
        out: list[tuple[str, bytes, bool]] = []
        deadline = time.monotonic() + WAIT_S
        while (left := deadline - time.monotonic()) > 0:
            message = await asyncio.wait_for(self._messages.__anext__(), left)
            payload = message.payload if isinstance(message.payload, bytes) else b""
            if message.topic.value == topic and payload == marker:
                return out
            out.append((message.topic.value, payload, message.retain))
        raise AssertionError(f"the marker on {topic} never came back within {WAIT_S} s")


async def read_retained(url: str, topic_filter: str) -> dict[str, bytes]:
    """What a subscriber arriving now finds retained under ``topic_filter`` (the broker sends
    retained messages right after SUBACK, ahead of the reader's marker)."""
    async with MqttReader(url, topic_filter) as reader:
        return {topic: payload for topic, payload, retain in await reader.until_marker() if retain}


@contextlib.contextmanager
def session_broker_url() -> Iterator[str]:
    """``$MQTT_URL``, else the URL of a broker started here and stopped on exit (the module doc)."""
    env = os.environ.get("MQTT_URL")
    if env:
        yield env
        return
    broker = new_private_broker()
    try:
        broker.start()
    except (RuntimeError, OSError) as exc:
        broker.cleanup()
        broker_unavailable(f"MQTT test broker: {broker.name} did not start: {exc}")
    try:
        yield broker.url
    finally:
        broker.cleanup()


@pytest.fixture(scope="session")
def mqtt_url() -> Iterator[str]:
    """URL of an MQTT broker for the whole session (see the module docstring)."""
    with session_broker_url() as url:
        yield url
