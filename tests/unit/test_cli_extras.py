"""A missing optional extra ([kafka], [mqtt]) gives one line naming it and exit 1, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import evsched

BLOCKER = """\
import sys
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('aiokafka', 'aiomqtt'):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Block())
"""


@pytest.mark.parametrize(("argv", "extra"), [
    (["submit", "--kafka", "127.0.0.1:1"], "kafka"),
    (["replay", "verify", "--kafka", "127.0.0.1:1"], "kafka"),
    (["run", "--once", "--mqtt", "mqtt://127.0.0.1:1"], "mqtt"),
])
def test_missing_extra_is_named(tmp_path: Path, argv: list[str], extra: str) -> None:
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)  # this interpreter, without aiokafka and aiomqtt
    if argv[0] == "run":
        argv = [*argv, "--log", str(tmp_path / "log")]
    if argv[0] == "submit":
        (tmp_path / "in.jsonl").write_text('{"type": "node.added", "data": {"node_id": "n", "capacity": {}}}\n')
        argv = [*argv, str(tmp_path / "in.jsonl")]
    proc = evsched(*argv, check=False, text=True, env={"PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 1, proc.stderr
    assert f"needs the optional extra [{extra}]" in proc.stderr and f"pip install 'evsched[{extra}]'" in proc.stderr
    assert "Traceback" not in proc.stderr
