"""Process helpers shared by the test brokers and clusters (Apache Kafka, Tansu, mosquitto, amqtt,
Kubernetes on KWOK) and the benchmarks: a free loopback port; a child in its own process group with
its output in a log file (start, wait for, tail, stop); and what a broker fixture does when its
broker cannot start (``broker_unavailable``: fail under CI, else skip)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import NoReturn, Protocol, TypeVar


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (another process may take it before it is bound)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tool_cache(variable: str, name: str) -> Path:
    """Where a tool the tests fetch or build once lives, outside the repository: ``$variable`` if set,
    else ``~/.cache/evsched/<name>`` (``name`` carries the versions, so an upgrade fetches anew)."""
    configured = os.environ.get(variable)
    return Path(configured) if configured else Path.home() / ".cache" / "evsched" / name


def run_tool(cmd: list[str], what: str, timeout_s: float, env: Mapping[str, str] | None = None) -> None:
    """Run one step of fetching or building such a tool; ``RuntimeError`` naming ``what`` and the command
    (with the output's tail) when it cannot be run, times out or fails."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"cannot {what} ({' '.join(cmd)}): {exc}") from exc
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {done.returncode}): {' '.join(cmd)}\n"
                           f"{(done.stdout + done.stderr)[-4000:]}")


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


def stop_groups(procs: Iterable[subprocess.Popen[bytes]], grace_s: float = 5.0) -> None:
    """``stop_group`` for several children at once: SIGTERM every group first (a node of a cluster
    stopped alone may wait for the others), then SIGKILL whatever still runs after ``grace_s``."""
    live = [proc for proc in procs if proc.poll() is None]
    for proc in live:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for proc in live:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            stop_group(proc, grace_s=0.1)


def start_logged(argv: list[str], log_path: Path, cwd: Path | None = None,
                 env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``argv`` as a test cluster's child: in its own process group (``stop_group`` stops it with
    its children), stdout and stderr appended to ``log_path``, no stdin, killed if the test process dies."""
    with open(log_path, "ab") as log:  # the child holds its own descriptor
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd,
                                env=env, start_new_session=True, preexec_fn=die_with_parent)


def log_tail(path: Path, limit: int = 3000) -> str:
    """The last ``limit`` characters of a child's log, for an error message (or why there are none)."""
    try:
        return path.read_text(errors="replace")[-limit:] or f"(empty log {path})"
    except OSError as exc:
        return f"(log {path} unreadable: {exc})"


def wait_until(ready: Callable[[], bool], children: Mapping[str, subprocess.Popen[bytes]], what: str,
               timeout_s: float, failure: Callable[[str], str]) -> None:
    """Poll ``ready`` until it holds. A child that exits first, or ``timeout_s`` (a bound on hangs, not
    a pace) passing, raises ``RuntimeError(failure(why))`` (``failure`` adds the logs' tails)."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        for name, proc in children.items():
            if proc.poll() is not None:
                raise RuntimeError(failure(f"{name} exited ({proc.returncode}) while waiting for {what}"))
        if time.monotonic() > deadline:
            raise RuntimeError(failure(f"{what} not ready after {timeout_s:.0f} s"))
        time.sleep(0.2)


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


StartableT = TypeVar("StartableT", bound=Startable)


@contextlib.contextmanager
def stopping(cluster: StartableT) -> Iterator[StartableT]:
    """``cluster`` (started), stopped when the block ends however it ends: a test fixture's body."""
    try:
        yield cluster
    finally:
        cluster.stop()


def started(cluster: StartableT, unavailable: str = "") -> StartableT:
    """``cluster`` started for a test session (the caller stops it). A start that fails stops what did
    start; then, given ``unavailable``, a ``RuntimeError`` or ``OSError`` is ``broker_unavailable`` with
    that prefix (skip, or fail under CI) — anything else, or without it, is raised."""
    try:
        cluster.start()
    except BaseException as exc:
        cluster.stop()
        if unavailable and isinstance(exc, (RuntimeError, OSError)):
            broker_unavailable(f"{unavailable}: {exc}")
        raise
    return cluster


def tool_main(argv: list[str], commands: Mapping[str, Callable[[list[str]], int]], usage: str) -> int:
    """``python -m tests.<tool> COMMAND [ARGS]``: ``commands[COMMAND](ARGS)``; anything else prints
    ``usage`` and exits 2."""
    command = commands.get(argv[0]) if argv else None
    if command is None:
        print(f"usage: {usage}", file=sys.stderr)
        return 2
    return command(argv[1:])


def run_until_stopped(cluster: Startable, started: Callable[[], str]) -> int:
    """Start ``cluster``, print ``started()``, and run until SIGINT or SIGTERM; then stop it."""

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt  # SIGTERM as Ctrl-C (and Ctrl-C even where the shell started us ignoring it)

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)
    with contextlib.suppress(KeyboardInterrupt), stopping(cluster):
        cluster.start()
        print(started(), flush=True)
        signal.pause()
    return 0
