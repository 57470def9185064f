"""replay verify: a driven log verifies; tampered decisions, inputs and orderings are caught with coordinates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from events.codec import dumps
from events.log.file import FileLog
from events.log.memory import MemoryLog
from events.log.port import LogRecord
from replay.reader import open_file_log
from replay.verify import VerifyReport, verify
from scheduler.cli.replay import main
from scheduler.simulation.workload import WorkloadSpec
from tests.logdrive import copy_log, drive, driven_file_log, workload_records, write_inputs

SPEC = WorkloadSpec(nodes=6, apps=6, asks=150, leaves=4, seed=11)


@pytest.fixture(scope="module")
def driven(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return driven_file_log(tmp_path_factory.mktemp("replay") / "log", SPEC, 30)


def run_verify(path: Path) -> VerifyReport:
    with open_file_log(path) as source:
        return verify(source)


def outputs_of(path: Path) -> list[dict[str, Any]]:
    with open_file_log(path) as source:
        return [orjson.loads(r.value) for r in source.iter_outputs()]


def tampered(src: Path, dst: Path, **transforms: Any) -> Path:
    with FileLog(src, readonly=True) as log:
        copy_log(log, dst, **transforms).close_sync()
    return dst


def decision_indexes(path: Path, cycle: int) -> list[int]:
    return [i for i, o in enumerate(outputs_of(path))
            if o["type"] == "allocation.decided" and o["data"]["cycle"] == cycle]


def cycle_inputs(path: Path, cycle: int) -> range:
    started = next(o for o in outputs_of(path) if o["type"] == "cycle.started" and o["data"]["cycle"] == cycle)
    return range(started["data"]["inputs_from"].get("inputs", 0), started["data"]["inputs_through"]["inputs"])


def test_driven_log_verifies(driven: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = run_verify(driven)
    assert report.ok, report.summary_lines()
    assert report.cycles == 6 and report.inputs == len(workload_records(SPEC))
    assert report.incomplete_cycle is None and report.unconsumed_inputs == 0
    assert main(["replay", "verify", "--log", str(driven)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("ok: 6 cycles verified") and captured.err == ""  # no progress off a TTY


def test_changed_decision_is_caught(driven: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = decision_indexes(driven, 2)[3]
    original = outputs_of(driven)[target]

    def change(values: list[bytes]) -> list[bytes]:
        obj = orjson.loads(values[target])
        obj["data"]["node_id"] = "node-99999"
        return [*values[:target], dumps(obj), *values[target + 1 :]]

    path = tampered(driven, tmp_path / "t", outputs=change)
    div = run_verify(path).divergence
    assert div is not None
    assert (div.cycle, div.output_id, div.output_offset) == (2, original["id"], target)
    assert b"node-99999" in (div.recorded or b"") and original["data"]["node_id"].encode() in (div.derived or b"")
    assert any(line.startswith("differs in: data.node_id") for line in div.details)
    assert main(["replay", "verify", "--log", str(path)]) == 2
    out = capsys.readouterr().out
    assert f"DIVERGENCE at cycle 2, output {original['id']}, output log offset {target}" in out
    assert "recorded:" in out and "re-derived:" in out and "state digest after cycle 2" in out


def test_changed_input_is_caught(driven: Path, tmp_path: Path) -> None:
    span = cycle_inputs(driven, 3)

    def change(records: list[LogRecord]) -> list[LogRecord]:
        out = []
        for rec in records:
            obj = orjson.loads(rec.value)
            if rec.offset in span and obj["type"] == "ask.added" and not span_hit:
                obj["data"]["resources"]["vcore"] = 7_777_000  # fits nowhere
                rec = LogRecord(rec.channel, rec.offset, orjson.dumps(obj), rec.append_time_us)
                span_hit.append(rec.offset)
            out.append(rec)
        return out

    span_hit: list[int] = []
    div = run_verify(tampered(driven, tmp_path / "t", inputs=change)).divergence
    assert span_hit and div is not None and div.cycle == 3
    assert div.inputs == f"inputs@{span.start}..{span.stop - 1}"


def test_reordered_input_is_caught(tmp_path: Path) -> None:
    # No `time` fields: the records share their append time, so arrival order decides.
    records = [
        {"id": "n1", "source": "t", "type": "node.added", "data": {"node_id": "n1", "capacity": {"vcore": 4000}}},
        {"id": "a1", "source": "t", "type": "app.added",
         "data": {"app_id": "a1", "queue": "root.default", "user": "u"}},
        {"id": "k1", "source": "t", "type": "ask.added",
         "data": {"app_id": "a1", "ask_id": "k1", "resources": {"vcore": 3000}}},
        {"id": "k2", "source": "t", "type": "ask.added",
         "data": {"app_id": "a1", "ask_id": "k2", "resources": {"vcore": 3000}}},
    ]
    with FileLog(tmp_path / "log", now_us=lambda: 5_000_000) as log:
        write_inputs(log, records)
        drive(log, 10)
    assert run_verify(tmp_path / "log").ok

    def swap(recs: list[LogRecord]) -> list[LogRecord]:
        a, b = recs[2], recs[3]
        return [*recs[:2], LogRecord(b.channel, a.offset, b.value, b.append_time_us),
                LogRecord(a.channel, b.offset, a.value, a.append_time_us)]

    div = run_verify(tampered(tmp_path / "log", tmp_path / "t", inputs=swap)).divergence
    assert div is not None and div.cycle == 1
    assert b'"ask_id":"k1"' in (div.recorded or b"") and b'"ask_id":"k2"' in (div.derived or b"")


def test_reordered_outputs_are_caught(driven: Path, tmp_path: Path) -> None:
    i, j = decision_indexes(driven, 2)[1:3]
    first_id = outputs_of(driven)[i]["id"]

    def swap(values: list[bytes]) -> list[bytes]:
        values = list(values)
        values[i], values[j] = values[j], values[i]
        return values

    div = run_verify(tampered(driven, tmp_path / "t", outputs=swap)).divergence
    assert div is not None and (div.cycle, div.output_id, div.output_offset) == (2, first_id, i)


def test_missing_and_extra_outputs_are_caught(driven: Path, tmp_path: Path) -> None:
    target = decision_indexes(driven, 4)[0]
    dropped = run_verify(tampered(driven, tmp_path / "a", outputs=lambda v: v[:target] + v[target + 1 :])).divergence
    assert dropped is not None and (dropped.cycle, dropped.output_offset) == (4, target)
    doubled = run_verify(tampered(driven, tmp_path / "b", outputs=lambda v: v[: target + 1] + v[target:])).divergence
    assert doubled is not None and (doubled.cycle, doubled.output_offset) == (4, target + 1)


def test_trailing_partial_cycle_is_not_a_divergence(driven: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    cut = decision_indexes(driven, 5)[3]  # cycle 5 torn after a few decisions, cycle 6 never started
    path = tampered(driven, tmp_path / "t", outputs=lambda v: v[:cut])
    report = run_verify(path)
    assert report.ok and report.incomplete_cycle == 5 and report.cycles == 4
    assert main(["replay", "verify", "--log", str(path)]) == 0
    assert "incomplete last cycle 5 (the service will re-run it)" in capsys.readouterr().out
    bad = tampered(driven, tmp_path / "b", outputs=lambda v: [*v[:cut - 1], v[cut]])  # torn, but tampered
    assert run_verify(bad).divergence is not None


def test_interrupted_attempt_then_rerun_verifies(driven: Path, tmp_path: Path) -> None:
    outputs = outputs_of(driven)
    start = next(i for i, o in enumerate(outputs) if o["type"] == "cycle.started" and o["data"]["cycle"] == 5)
    path = tampered(driven, tmp_path / "t", outputs=lambda v: v[:start] + v[start : start + 3] + v[start:])
    report = run_verify(path)
    assert report.ok and report.rerun_cycles == [5] and report.cycles == 6
    bad = tampered(driven, tmp_path / "b", outputs=lambda v: [*v[:start], v[start], v[start + 2], *v[start:]])
    div = run_verify(bad).divergence
    assert div is not None and div.cycle == 5 and "interrupted earlier run" in div.reason


def test_cycle_without_completion_before_the_next_is_a_divergence(driven: Path, tmp_path: Path) -> None:
    outputs = outputs_of(driven)
    done = next(i for i, o in enumerate(outputs) if o["type"] == "cycle.completed" and o["data"]["cycle"] == 2)
    div = run_verify(tampered(driven, tmp_path / "t", outputs=lambda v: v[:done] + v[done + 1 :])).divergence
    assert div is not None and (div.cycle, div.output_offset) == (2, done)
    assert div.derived is not None and b"cycle.completed" in div.derived


def test_stray_output_and_missing_input_are_divergences(driven: Path, tmp_path: Path) -> None:
    outputs = outputs_of(driven)
    done = next(i for i, o in enumerate(outputs) if o["type"] == "cycle.completed" and o["data"]["cycle"] == 1)
    stray = run_verify(tampered(driven, tmp_path / "a", outputs=lambda v: [*v[:done + 1], v[1], *v[done + 1:]]))
    assert stray.divergence is not None and stray.divergence.output_offset == done + 1
    assert "outside any cycle" in stray.divergence.reason
    short = run_verify(tampered(driven, tmp_path / "b", inputs=lambda r: r[:-1]))
    assert short.divergence is not None and short.divergence.cycle == 6
    assert main(["replay", "verify", "--log", str(tmp_path / "b")]) == 2


def test_memory_log_source() -> None:
    log = MemoryLog(now_us=lambda: 1_000)
    write_inputs(log, workload_records(WorkloadSpec(nodes=3, apps=2, asks=20, leaves=2)))
    drive(log, 7)
    report = verify(log)
    assert report.ok and report.cycles == 5


def test_missing_log_and_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "verify", "--log", str(tmp_path / "nope")]) == 1
    assert "no readable log" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["replay", "state", "--cycle", "x"])
    assert exc.value.code == 1
    assert main(["replay"]) == 1


def test_json_report(driven: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = decision_indexes(driven, 2)[0]
    path = tampered(driven, tmp_path / "t", outputs=lambda v: v[:target] + v[target + 1 :])
    assert main(["replay", "verify", "--log", str(path), "--json"]) == 2
    body = orjson.loads(capsys.readouterr().out)
    assert body["ok"] is False and body["divergence"]["cycle"] == 2
    assert body["divergence"]["output_offset"] == target and body["divergence"]["recorded"]["type"]
