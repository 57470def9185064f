"""Process helpers shared by the test brokers (Tansu, mosquitto, amqtt) and the benchmarks: a free
loopback port, stopping a child that runs in its own process group, and what a broker fixture
does when its broker cannot start (``broker_unavailable``: fail under CI, else skip)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from collections.abc import Callable
from typing import NoReturn, Protocol


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (another process may take it before it is bound)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_group(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """Stop a child started with ``start_new_session=True``: its process group, by its pid (the
    group leader), with SIGTERM, then SIGKILL if it has not exited within ``grace_s``."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


def die_with_parent() -> None:
    """In a child before exec (``preexec_fn``): SIGKILL it when the test process dies (Linux), so a test run
    that is itself killed never leaves a broker or a control plane behind on a shared machine."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def fixed_batch(batch: int) -> list[str]:
    """``evsched run`` flags for cycles of exactly ``batch`` inputs, even on a backlog (batches
    otherwise grow up to ``--max-batch``): for tests that need many cycles to act in."""
    return ["--batch", str(batch), "--max-batch", str(batch)]


def in_ci() -> bool:
    """True when ``$CI`` is set to anything but empty, 0, false or no (CI systems set CI=true)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def broker_unavailable(reason: str) -> NoReturn:
    """A test broker cannot be started: under CI that fails the test, naming what is missing
    (a CI run must not pass its integration tests as skips); elsewhere the test is skipped."""
    import pytest  # here, not at the top: the benchmarks use this module without pytest

    if in_ci():
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


class Startable(Protocol):
    """A local cluster a developer runs in the foreground (Apache Kafka, Kubernetes on KWOK)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


def run_until_stopped(cluster: Startable, started: Callable[[], str]) -> int:
    """Start ``cluster``, print ``started()``, and run until SIGINT or SIGTERM; then stop it."""

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt  # SIGTERM as Ctrl-C (and Ctrl-C even where the shell started us ignoring it)

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)
    try:
        cluster.start()
        print(started(), flush=True)
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
    return 0
