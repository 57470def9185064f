"""``replay explain --ask`` names a user or group limit an ask waits on, with the usage."""

from __future__ import annotations

from pathlib import Path

from events.log.file import FileLog
from replay.explain.from_log import explain_ask_from_log
from tests.explain_logdrive import LogDriver
from tests.sim import app, ask, node
from tests.unit.test_user_limits import LIMITS


def test_explain_ask_names_the_user_limit_and_usage(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    with LogDriver(directory, LIMITS) as drv:
        drv.submit(node("n1", vcore=20_000, memory=20_000), app("a", "root.shared", user="alice"),
                   app("b", "root.shared", user="bob"), *[ask("a", f"a{i}") for i in range(3)],
                   *[ask("b", f"b{i}") for i in range(3)])
        drv.cycle()
    with FileLog(directory, readonly=True) as log:
        waiting = explain_ask_from_log(log, "a", "a2")
        bob = explain_ask_from_log(log, "b", "b2")
    assert waiting.status == "pending" and not waiting.allocatable_now
    assert [r["rule"] for r in waiting.reasons] == ["docs/semantics.md#user-and-group-limits"]
    message = waiting.reasons[0]["message"]
    assert "user 'alice' limit on root.shared" in message
    assert "maxresources vcore 2 cores" in message and "used memory 2 kB, vcore 2 cores" in message
    assert bob.status == "allocated"  # bob, same queue, got his third ask


def test_explain_ask_names_the_user_maxapplications(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    with LogDriver(directory, LIMITS) as drv:
        drv.submit(node("n1", vcore=20_000, memory=20_000), app("b1", "root.shared", user="bob"),
                   app("b2", "root.shared", user="bob"), ask("b1", "k1"), ask("b2", "k2"))
        drv.cycle()
    with FileLog(directory, readonly=True) as log:
        waiting = explain_ask_from_log(log, "b2", "k2")
    assert [r["message"] for r in waiting.reasons] == [
        "app b2 is Accepted and its user 'bob' limit on root.shared: maxapplications 1, running 1"
    ]
