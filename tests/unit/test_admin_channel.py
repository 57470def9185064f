"""Who may change the rules: config and priority classes only from the admin channel (issue 25)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import orjson

from events.codec import decode_output, encode_output
from events.log.file import FileLog
from events.log.memory import MemoryLog
from events.log.port import LogRecord
from events.models import CycleStarted
from events.times import format_time
from scheduler.core.engine import Engine
from scheduler.core.logged_cycle import advance, run_logged_cycle
from scheduler.service.loop import Service

CONFIG = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: team
"""


def rec(channel: str, offset: int, event: dict[str, Any]) -> LogRecord:
    full = {"source": "t", "time": format_time(1_000 + offset), **event}
    return LogRecord(channel, offset, orjson.dumps(full), 1_000 + offset)


def config(eid: str) -> dict[str, Any]:
    return {"id": eid, "type": "config.updated", "data": {"yaml": CONFIG}}


def outputs_of(engine: Engine, records: list[LogRecord], admin: list[str] | None) -> list[dict[str, Any]]:
    through = advance({}, records)
    outs = run_logged_cycle(engine, records, ["inputs", "admin"], 5_000, {}, through, admin_channels=admin)
    return [orjson.loads(encode_output(o)) for o in outs]


def test_rules_changes_on_the_inputs_channel_are_not_authorized() -> None:
    engine = Engine()
    before = engine.state.config.checksum
    pc = {"id": "pc", "type": "priorityclass.upserted", "data": {"name": "evil", "value": 10**9}}
    out = outputs_of(engine, [rec("inputs", 0, config("c")), rec("inputs", 1, pc)], ["admin"])
    rejected = [o["data"] for o in out if o["type"] == "input.rejected"]
    assert [(r["input_id"], r["input_type"], r["reason"]) for r in rejected] == [
        ("c", "config.updated", "not-authorized"), ("pc", "priorityclass.upserted", "not-authorized")]
    assert "only from the admin channel (admin), not from inputs" in rejected[0]["message"]
    assert not any(o["type"] == "config.applied" for o in out)
    assert engine.state.config.checksum == before  # nothing changed
    assert out[0]["data"]["admin_channels"] == ["admin"]
    # The same config from the admin channel is applied (a rejected id was never marked seen).
    out = outputs_of(engine, [rec("admin", 0, config("c"))], ["admin"])
    assert [o["type"] for o in out if o["type"] in ("config.applied", "input.rejected")] == ["config.applied"]
    assert engine.state.config.checksum != before


def test_other_events_pass_on_both_channels() -> None:
    engine = Engine()
    app = {"id": "a", "type": "app.added", "data": {"app_id": "x", "queue": "root.team", "user": "u"}}
    # Equal event times merge inputs first, then admin: the app comes a moment after the config.
    out = outputs_of(engine, [rec("admin", 0, config("c")), rec("inputs", 1, app)], ["admin"])
    assert not [o for o in out if o["type"] == "input.rejected"]


def test_cycles_without_admin_channels_keep_the_old_rule_and_bytes() -> None:
    engine = Engine()
    out = outputs_of(engine, [rec("inputs", 0, config("c"))], None)
    assert [o["type"] for o in out][:2] == ["cycle.started", "config.applied"]
    assert "admin_channels" not in out[0]["data"]  # as logs written before the field
    started = decode_output(orjson.dumps(out[0]))
    assert isinstance(started.data, CycleStarted) and started.data.admin_channels is None


def test_file_log_admin_channel(tmp_path: Path) -> None:
    with FileLog(tmp_path) as log:
        log.append_inputs_sync([(None, b"i0"), (None, b"i1")])
        log.append_admin_sync([(b"default", b"a0")])
        assert asyncio.run(log.input_channels()) == ["inputs", "admin"]
        assert asyncio.run(log.admin_channels()) == ["admin"]
        assert asyncio.run(log.input_end()) == {"inputs": 2, "admin": 1}
        got = asyncio.run(log.read_inputs({}, 10))
        assert [(r.channel, r.offset, r.value) for r in got] == [("admin", 0, b"a0"), ("inputs", 0, b"i0"),
                                                                  ("inputs", 1, b"i1")]
        assert [r.value for r in asyncio.run(log.read_inputs({"admin": 1, "inputs": 1}, 10))] == [b"i1"]
        assert [r.value for r in asyncio.run(log.read_inputs({}, 2))] == [b"a0", b"i0"]
    with FileLog(tmp_path, readonly=True) as reader:
        assert [(r.channel, r.value) for r in reader.iter_inputs()] == [("admin", b"a0"), ("inputs", b"i0"),
                                                                          ("inputs", b"i1")]


def test_a_log_without_an_admin_directory_reads_as_an_empty_channel(tmp_path: Path) -> None:
    with FileLog(tmp_path) as log:
        log.append_inputs_sync([(None, b"i0")])
    shutil.rmtree(tmp_path / "admin")  # as a log written before the admin channel
    with FileLog(tmp_path, readonly=True) as reader:
        assert asyncio.run(reader.input_end()) == {"inputs": 1, "admin": 0}
        assert [r.value for r in reader.iter_inputs()] == [b"i0"]


def _service_outputs(log: MemoryLog) -> list[dict[str, Any]]:
    return [orjson.loads(r.value) for r in log.iter_outputs()]


def test_service_rejects_from_inputs_and_accepts_from_admin() -> None:
    async def go(accept: bool) -> list[dict[str, Any]]:
        log = MemoryLog(now_us=lambda: 1_000)
        await log.append_inputs([(None, orjson.dumps({**config("from-rm"), "source": "rm"}))])
        await log.append_admin([(None, orjson.dumps({**config("from-op"), "source": "op"}))])
        service = Service(log, now_us=lambda: 2_000, accept_admin_on_inputs=accept)
        await service.start()
        await service.run_cycle_once()
        return _service_outputs(log)

    enforced = asyncio.run(go(False))
    assert enforced[0]["data"]["admin_channels"] == ["admin"]
    rejected = [o["data"]["input_id"] for o in enforced if o["type"] == "input.rejected"]
    assert rejected == ["from-rm"]
    assert sum(o["type"] == "config.applied" for o in enforced) == 1
    legacy = asyncio.run(go(True))
    assert "admin_channels" not in legacy[0]["data"]
    assert not [o for o in legacy if o["type"] == "input.rejected"]


def test_old_log_recovers_identically_and_new_cycles_enforce(tmp_path: Path) -> None:
    """A log whose cycles were written before the admin channel (config on inputs) recovers
    to the same state; cycles written from then on carry the rule."""
    old = Engine()
    with FileLog(tmp_path, now_us=lambda: 1_000) as log:
        records = [rec("inputs", 0, config("c0"))]
        log.append_inputs_sync([(None, r.value) for r in records])
        got = list(log.iter_inputs())
        outs = run_logged_cycle(old, got, ["inputs"], 3_000, {}, advance({}, got))  # the old service
        log.append_outputs_sync([encode_output(o) for o in outs])
        log.append_inputs_sync([(None, rec("inputs", 1, config("c1")).value)])

    async def resume() -> tuple[Service, list[dict[str, Any]]]:
        async with FileLog(tmp_path, now_us=lambda: 4_000) as log:
            service = Service(log, now_us=lambda: 5_000)
            await service.start()
            assert service.engine.digest() == old.digest()
            await service.run_cycle_once()
            return service, [orjson.loads(r.value) for r in log.iter_outputs()]

    service, written = asyncio.run(resume())
    assert written[0]["type"] == "cycle.started" and "admin_channels" not in written[0]["data"]  # the old cycle
    second = next(o for o in written if o["id"] == "2-start")
    assert second["data"]["admin_channels"] == ["admin"]  # the boundary: new cycles carry the rule
    assert [o["data"]["reason"] for o in written if o["type"] == "input.rejected"] == ["not-authorized"]
    assert service.engine.state.config.checksum == old.state.config.checksum
