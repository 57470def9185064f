"""The one way the tests run the ``evsched`` command line: a subprocess, exactly as a user runs it.

``evsched(*args)`` runs it to the end and returns the finished process, asserting exit 0
unless ``check=False`` (the message shows the end of its stderr); ``text=True`` decodes
its output. ``evsched_argv(*args)`` is the command line for tests that start the process
themselves (``Popen``, asyncio) to kill it, pace it or read its output while it runs.
The child inherits the environment without any ``EVSCHED_*`` variable (a developer's
credentials never reach a test) but ``EVSCHED_PURE_PYTHON`` (the build of the core), plus ``env``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, overload

from tests.sim import root_queues

ROOT = Path(__file__).resolve().parents[1]

# A queue configuration with one leaf anyone may submit to, root.team: for tests that feed the command line.
ONE_TEAM_CONFIG = root_queues("- name: team")


def evsched_argv(*args: str) -> list[str]:
    """``python -m scheduler ARGS`` with this interpreter (run it with ``cwd=ROOT``)."""
    return [sys.executable, "-m", "scheduler", *args]


def evsched_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without ``EVSCHED_*`` variables (but EVSCHED_PURE_PYTHON, which
    chooses the build of the core, docs/native.md), plus ``env``."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith("EVSCHED_") or k == "EVSCHED_PURE_PYTHON"}
    return keep | dict(env or {})


@overload
def evsched(
    *args: str, check: bool = ..., timeout: float = ..., env: Mapping[str, str] | None = ..., text: Literal[False] = ...
) -> subprocess.CompletedProcess[bytes]: ...


@overload
def evsched(
    *args: str, check: bool = ..., timeout: float = ..., env: Mapping[str, str] | None = ..., text: Literal[True]
) -> subprocess.CompletedProcess[str]: ...


def evsched(
    *args: str, check: bool = True, timeout: float = 300, env: Mapping[str, str] | None = None, text: bool = False
) -> subprocess.CompletedProcess[bytes] | subprocess.CompletedProcess[str]:
    """Run ``evsched ARGS`` to the end (at most ``timeout`` seconds); with ``check``, assert it exited 0."""
    proc = subprocess.run(evsched_argv(*args), cwd=ROOT, env=evsched_env(env), capture_output=True, text=text,
                          timeout=timeout)  # fmt: skip
    if check:
        err = proc.stderr if isinstance(proc.stderr, str) else proc.stderr.decode(errors="replace")
        assert proc.returncode == 0, f"evsched {' '.join(args[:2])} exited {proc.returncode}:\n{err[-3000:]}"
    return proc


def submit_as_cluster(log_args: list[str], path: Path) -> None:
    """``evsched submit`` of a JSONL file as a cluster sends it: its rules changes (config,
    priority classes) first, by the operator, to the admin channel (``submit --admin``); the
    rest by the resource managers, to the inputs. Either part is skipped when empty."""
    import orjson

    from events.models import ADMIN_TYPES

    lines = [line for line in path.read_bytes().splitlines() if line.strip()]
    admin = [line for line in lines if orjson.loads(line).get("type") in ADMIN_TYPES]
    rest = [line for line in lines if orjson.loads(line).get("type") not in ADMIN_TYPES]
    for suffix, part, flag in ((".admin.jsonl", admin, ["--admin"]), (".rm.jsonl", rest, [])):
        if part:
            split = path.with_name(path.name + suffix)
            split.write_bytes(b"\n".join(part) + b"\n")
            evsched("submit", *log_args, *flag, str(split))
