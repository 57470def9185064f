"""Control characters never reach a terminal raw: text output escapes them (events.display).

Resource names, users, groups, tags and attributes accept any character; ``replay explain``
printed them as they were (an ESC sequence set the window title and cleared the screen).
"""

from __future__ import annotations

from pathlib import Path

import orjson

from events.display import printable
from events.log.file import FileLog
from tests.cli import evsched

EVIL = "gpu\x1b]0;pwned\x07\x1b[2J\u202e\x9b\nFAKE LINE"


def test_printable_escapes_controls_and_keeps_the_rest() -> None:
    assert printable(EVIL) == "gpu\\x1b]0;pwned\\x07\\x1b[2J\\u202e\\x9b\\x0aFAKE LINE"
    assert printable("tab\tstays, é and 日本 too") == "tab\tstays, é and 日本 too"


def test_explain_diff_and_config_check_print_no_raw_control(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"

    def rec(rid: str, kind: str, **data: object) -> tuple[None, bytes]:
        return None, orjson.dumps({"id": rid, "source": "t", "type": kind, "data": data})

    with FileLog(log_dir) as log:
        log.append_inputs_sync([
            rec("n", "node.added", node_id="n1", capacity={EVIL: 5, "vcore": 1000}, attributes={"k": EVIL}),
            rec("a", "app.added", app_id="a", queue="root.default", user=EVIL, groups=[EVIL], tags={EVIL: EVIL}),
            rec("k", "ask.added", app_id="a", ask_id="k", resources={EVIL: 1, "vcore": 10}),
        ])
    evsched("run", "--log", str(log_dir), "--once")
    with FileLog(log_dir, readonly=True) as log:
        decided = [orjson.loads(r.value)["data"] for r in log.iter_outputs() if b"allocation.decided" in r.value]
    (decision,) = decided
    outputs = [
        evsched("replay", "explain", decision["decision_id"], "--log", str(log_dir)),
        evsched("replay", "explain", "--ask", "a/k", "--log", str(log_dir), check=False),
        evsched("replay", "diff", "--cycle", "0", "--cycle", "1", "--log", str(log_dir)),
    ]
    bad_config = tmp_path / "c.yaml"
    bad_config.write_text(f"partitions:\n  - name: default\n    {EVIL.splitlines()[0]!r}: 1\n")
    outputs.append(evsched("config", "check", str(bad_config), check=False))
    for proc in outputs:
        text = (proc.stdout + proc.stderr).decode()
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text and "\x9b" not in text, text
    assert "\\x1b]0;pwned" in outputs[0].stdout.decode()
    assert "\\x1b]0;pwned" in outputs[2].stdout.decode()
