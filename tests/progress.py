"""Pacing by observed progress: what a running ``evsched run -v`` says it has done so far.

With ``-v`` the service logs one line per cycle once the cycle's outputs are durable
(``evsched.service[.SHARD]: cycle N written: I inputs, O outputs; C inputs consumed``), the
line before it writes them (``cycle N writing O outputs``), and the line that ends start-up
(``… N inputs waiting``). A test that kills, pauses, stops or joins an instance "mid-run"
waits here for such lines instead of sleeping a fixed time, so it acts at the same point of
the work on a fast machine as on a slow or busy one. The only clock is a generous
``timeout`` that turns a hang into a failure.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

READY = b"inputs waiting"  # Service.start's last line: recovery is done, cycles come next
HANG_S = 180.0  # only a hang takes this long; a slow or busy machine never does
_POLL_S = 0.005
_CYCLE = re.compile(
    rb"evsched\.service(?:\.(?P<shard>[\w.-]+))?: cycle (?P<cycle>\d+) written: (?P<inputs>\d+) inputs, "
    rb"\d+ outputs; (?P<consumed>\d+) inputs consumed"
)
_WRITING = re.compile(rb"evsched\.service(?:\.(?P<shard>[\w.-]+))?: cycle (?P<cycle>\d+) writing \d+ outputs")
_READY = re.compile(rb"evsched\.service(?:\.(?P<shard>[\w.-]+))?: .*?(?P<waiting>\d+) inputs waiting")


@dataclass
class Seen:
    """A service's progress as its log lines tell it (one shard's, or every shard's)."""

    ready: bool = False
    waiting: int = 0  # inputs waiting when it became ready
    cycles: int = 0  # cycles written since it started
    inputs: int = 0  # inputs those cycles consumed
    last_cycle: int = 0  # the number of the last cycle written
    consumed: int = 0  # inputs consumed in the log as of that cycle (all channels)
    writes: int = 0  # cycles that began writing their outputs since it started
    lines: int = 0  # log lines written so far (every logger's): start-up's stages before ``ready``
    startup_lines: int = 0  # how many lines came before the start-up's last one


class ServiceWatch:
    """Follows a service's stderr file (``-v``); ``shard`` limits it to one shard's lines."""

    def __init__(self, proc: subprocess.Popen[bytes], stderr_path: Path, shard: str | None = None) -> None:
        self.proc = proc
        self.path = stderr_path
        self.shard = shard
        self.seen = Seen()
        self._offset = 0

    def _mine(self, found: re.Match[bytes]) -> bool:
        return self.shard is None or found.group("shard") == self.shard.encode()

    def poll(self) -> Seen:
        """Read the lines written since the last poll (whole lines only) and return the progress."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return self.seen
        end = chunk.rfind(b"\n") + 1
        self._offset += end
        for line in chunk[:end].splitlines():
            self.seen.lines += 1
            if (cycle := _CYCLE.search(line)) and self._mine(cycle):
                s = self.seen
                s.cycles += 1
                s.inputs += int(cycle.group("inputs"))
                s.last_cycle = int(cycle.group("cycle"))
                s.consumed = int(cycle.group("consumed"))
            elif (writing := _WRITING.search(line)) and self._mine(writing):
                self.seen.writes += 1
            elif READY in line and (ready := _READY.search(line)) and self._mine(ready):
                self.seen.ready = True
                self.seen.startup_lines = self.seen.lines - 1
                self.seen.waiting = int(ready.group("waiting"))
        return self.seen

    def wait(self, condition: Callable[[Seen], bool], what: str, timeout: float = HANG_S) -> bool:
        """Wait until ``condition(progress)`` holds: True; False if the process exited first
        (after a last look at its lines). A hang past ``timeout`` fails with the log's tail."""
        deadline = time.monotonic() + timeout
        while True:
            exited = self.proc.poll() is not None
            if condition(self.poll()):
                return True
            if exited:
                return False
            if time.monotonic() > deadline:
                tail = self.path.read_text(errors="replace")[-3000:]
                raise AssertionError(f"{what}: not seen within {timeout:.0f} s (a hang); log tail:\n{tail}")
            time.sleep(_POLL_S)

    def wait_ready(self, timeout: float = HANG_S) -> bool:
        """Wait for the end of start-up (False: the process exited first)."""
        return self.wait(lambda s: s.ready, "start-up to finish", timeout)

    def wait_cycles(self, cycles: int, timeout: float = HANG_S) -> bool:
        """Wait until ``cycles`` cycles were written since the start (False: it exited first)."""
        return self.wait(lambda s: s.cycles >= cycles, f"{cycles} cycles written", timeout)

    def wait_consumed(self, inputs: int, timeout: float = HANG_S) -> bool:
        """Wait until a cycle line says ``inputs`` inputs of the log are consumed (all channels;
        False: it exited first)."""
        return self.wait(lambda s: s.consumed >= inputs, f"{inputs} inputs consumed", timeout)
