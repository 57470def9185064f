"""``--mqtt-prefix``: a deployment's topics under its own prefix, and ``mqtt clear`` deleting a partition's retained
queue status there (on a real broker: mosquitto, or whatever ``mqtt_url`` finds)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from tests.cli import evsched
from tests.mqtt_broker import read_retained, unique_name

pytestmark = pytest.mark.mqtt

CONFIG = """\
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues: [{name: a}, {name: b}]
"""


def test_prefix_separates_deployments_and_clear_removes_retained_status(tmp_path: Path, mqtt_url: str) -> None:
    prefix = f"{unique_name('site')}/evsched"
    other = f"{unique_name('site')}/evsched"
    (tmp_path / "q.yaml").write_text(CONFIG)
    lines = [
        {"type": "node.added", "data": {"node_id": "n1", "capacity": {"vcore": 4000}}},
        {"type": "app.added", "data": {"app_id": "x", "queue": "root.a", "user": "u"}},
        {"type": "ask.added", "data": {"app_id": "x", "ask_id": "k", "resources": {"vcore": 1000}}},
    ]
    (tmp_path / "in.jsonl").write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    log = str(tmp_path / "log")
    evsched("submit", "--config", str(tmp_path / "q.yaml"), "--log", log, str(tmp_path / "in.jsonl"))
    evsched("run", "--log", log, "--once", "--mqtt", mqtt_url, "--mqtt-prefix", prefix)

    retained = asyncio.run(read_retained(mqtt_url, f"{prefix}/default/queues/#"))
    assert set(retained) == {f"{prefix}/default/queues/root", f"{prefix}/default/queues/root/a",
                             f"{prefix}/default/queues/root/b"}
    assert orjson.loads(retained[f"{prefix}/default/queues/root/a"])["allocated"] == {"vcore": 1000}
    assert asyncio.run(read_retained(mqtt_url, f"{other}/#")) == {}  # another deployment sees none of it

    cleared = evsched("mqtt", "clear", "--mqtt", mqtt_url, "--mqtt-prefix", prefix, text=True)
    assert sorted(cleared.stdout.split()) == sorted(retained) and "cleared 3 retained messages" in cleared.stderr
    assert asyncio.run(read_retained(mqtt_url, f"{prefix}/default/queues/#")) == {}


def test_a_prefix_with_a_wildcard_is_refused(tmp_path: Path) -> None:
    proc = evsched("run", "--log", str(tmp_path / "log"), "--once", "--mqtt", "mqtt://127.0.0.1:1",
                   "--mqtt-prefix", "a/+/b", check=False, text=True)
    assert proc.returncode == 1 and "no wildcards" in proc.stderr
