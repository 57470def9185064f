"""replay export: the simulate file reproduces the recorded run, odd records included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from events.codec import encode_output
from events.log.file import FileLog
from events.log.port import LogRecord
from events.models import MAX_RECORD_BYTES
from replay.export import ExportError, ExportStats, export_lines, simulate_line
from replay.reader import open_file_log
from scheduler.cli.replay import main
from scheduler.simulation.simulate import Simulation
from scheduler.simulation.workload import WorkloadSpec
from tests.logdrive import drive, workload_records, write_inputs

SPEC = WorkloadSpec(nodes=6, apps=5, asks=120, leaves=4, seed=2)
NODE = {"capacity": {"vcore": 2000, "memory": 2**30}}
ODD: list[dict[str, Any] | bytes] = [
    b"not json at all",
    b"\xff\xfe not utf-8",
    b"",
    b"   ",
    b"[1, 2]",
    {"id": "no-time", "source": "t", "type": "node.added", "data": {"node_id": "nt", **NODE}},
    {"source": "t", "type": "node.added", "time": "1970-01-01T00:00:01Z", "data": {"node_id": "ni", **NODE}},
    {"id": "no-source", "type": "node.added", "data": {"node_id": "ns", **NODE}},
    b'{\n  "id": "pretty", "source": "t", "type": "app.removed",\n  "data": {"app_id": "nope"}\n}',
    {"id": "bad-time", "source": "t", "type": "node.added", "time": 12, "data": {"node_id": "bt", **NODE}},
    {"id": "no-time", "source": "t", "type": "node.added", "data": {"node_id": "dup", **NODE}},  # a duplicate
]


def make_log(path: Path) -> None:
    records = workload_records(SPEC)
    clock = [10**12]

    def now() -> int:
        clock[0] += 1_000
        return clock[0]

    with FileLog(path, now_us=now) as log:
        write_inputs(log, records[:60])
        write_inputs(log, ODD)
        write_inputs(log, records[60:])
        drive(log, 23)


def simulated(lines: list[bytes]) -> list[bytes]:
    sim = Simulation()
    out: list[bytes] = []
    for line in lines:
        out.extend(encode_output(o) for o in sim.feed(line + b"\n"))
    return out  # without sim.finish(): the recorded run ends at the last schedule line


def recorded_outputs(path: Path) -> list[bytes]:
    with open_file_log(path) as source:
        return [r.value for r in source.iter_outputs() if orjson.loads(r.value)["type"] != "cycle.started"]


def without_messages(values: list[bytes]) -> list[Any]:
    out = []
    for v in values:
        obj = orjson.loads(v)
        if obj["type"] == "input.rejected":
            obj["data"].pop("message")
        out.append(obj)
    return out


def test_export_reproduces_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_log(tmp_path / "log")
    assert main(["replay", "export", "--log", str(tmp_path / "log"), "-o", str(tmp_path / "run.jsonl")]) == 0
    assert "3 unreadable records written as stand-in lines: inputs@61, inputs@62, inputs@63" in capsys.readouterr().err
    lines = (tmp_path / "run.jsonl").read_bytes().splitlines()
    assert sum(1 for line in lines if line.startswith(b'{"type":"schedule"')) == 7
    recorded, replayed = recorded_outputs(tmp_path / "log"), simulated(lines)
    decided = [v for v in recorded if b'"allocation.decided"' in v]
    assert decided and decided == [v for v in replayed if b'"allocation.decided"' in v]
    assert without_messages(replayed) == without_messages(recorded)  # every output, digests included


def test_export_through_cycle_and_stdout(tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    make_log(tmp_path / "log")
    assert main(["replay", "export", "--log", str(tmp_path / "log"), "--through-cycle", "3"]) == 0
    lines = capsysbinary.readouterr().out.splitlines()
    assert lines[-1].startswith(b'{"type":"schedule"') and len(lines) == 23 * 3 + 3
    recorded = recorded_outputs(tmp_path / "log")
    end = next(i for i, v in enumerate(recorded) if b'"cycle.completed"' in v and b'"cycle":3,' in v)
    assert without_messages(simulated(lines)) == without_messages(recorded[: end + 1])
    assert main(["replay", "export", "--log", str(tmp_path / "log"), "--through-cycle", "30"]) == 1


def test_simulate_line_rules() -> None:
    def rec(value: bytes) -> LogRecord:
        return LogRecord("inputs", 7, value, 3_000_000)

    assert simulate_line(rec(b"garbage")) == (b"garbage", False)
    line, stand_in = simulate_line(rec(b"two\nlines"))
    assert stand_in and b"inputs@7" in line and b"\n" not in line
    assert simulate_line(rec(b'{"type": "schedule", "id": "x", "source": "s", "data": {}}'))[1]
    assert simulate_line(rec(b"x" * (MAX_RECORD_BYTES + 5))) == (b"x" * (MAX_RECORD_BYTES + 5), False)
    big, stand_in = simulate_line(rec(b"\n" * (MAX_RECORD_BYTES + 5)))
    assert stand_in and len(big) > MAX_RECORD_BYTES and b"\n" not in big
    obj = orjson.loads(simulate_line(rec(b'{"type": "app.removed", "data": {}}'))[0])
    assert obj == {"type": "app.removed", "data": {}, "id": None, "source": None, "time": "1970-01-01T00:00:03Z"}
    # A producer-set append time past year 9999 (the service rejected the record) is no crash.
    late = LogRecord("inputs", 8, b'{"type": "app.removed", "data": {}}', 2**62)
    line, stand_in = simulate_line(late)
    assert stand_in and b"inputs@8" in line and b"out of range" in line


def test_schedule_typed_record_becomes_a_rejected_stand_in(tmp_path: Path) -> None:
    with FileLog(tmp_path / "log") as log:
        write_inputs(log, [{"id": "s", "source": "t", "type": "schedule", "data": {}}])
        drive(log, 5)
    stats = ExportStats()
    with open_file_log(tmp_path / "log") as source:
        lines = list(export_lines(source, stats))
    assert stats.stand_ins == ["inputs@0"] and stats.cycles == 1
    rejected = [orjson.loads(v) for v in simulated(lines) if b"input.rejected" in v]
    assert [r["data"]["input_id"] for r in rejected] == ["inputs@0"]


def test_export_of_a_damaged_log_fails(tmp_path: Path) -> None:
    with FileLog(tmp_path / "log") as log:
        write_inputs(log, workload_records(WorkloadSpec(nodes=2, apps=2, asks=10, leaves=2)))
        drive(log, 5)
    with FileLog(tmp_path / "log", readonly=True) as log:
        values = [r.value for r in log.iter_outputs()]
    with FileLog(tmp_path / "cut") as log:
        write_inputs(log, [{"id": "only", "source": "t", "type": "app.removed", "data": {"app_id": "x"}}])
        log.append_outputs_sync(values)
    with open_file_log(tmp_path / "cut") as source, pytest.raises(ExportError) as exc:
        list(export_lines(source, ExportStats()))
    assert exc.value.structural
    assert main(["replay", "export", "--log", str(tmp_path / "cut")]) == 2
