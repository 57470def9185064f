"""replay state / diff: the state after cycle N equals the engine's after N cycles; diffs read well."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from events.codec import dumps
from events.log.file import FileLog
from replay.reader import open_file_log
from replay.state_at import StateError, diff_states, format_diff, state_at, states_at
from scheduler.cli.replay import main
from scheduler.core.engine import Engine
from scheduler.simulation.workload import WorkloadSpec
from tests.logdrive import copy_log, drive, workload_records, write_inputs

SPEC = WorkloadSpec(nodes=5, apps=6, asks=80, leaves=4, seed=5)


@pytest.fixture(scope="module")
def driven(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    path = tmp_path_factory.mktemp("state") / "log"
    forms: list[dict[str, Any]] = []
    with FileLog(path) as log:
        write_inputs(log, workload_records(SPEC))
        drive(log, 25, on_cycle=lambda engine: forms.append(engine.state_form()))
    return path, forms


def test_state_after_each_cycle_equals_the_engines(driven: tuple[Path, list[dict[str, Any]]]) -> None:
    path, forms = driven
    with open_file_log(path) as source:
        found = states_at(source, range(len(forms) + 1))
    assert found[0].form == Engine().state_form()
    for n, form in enumerate(forms, start=1):
        assert found[n].form == form and found[n].digest_matches


def test_state_cli_prints_one_canonical_line(driven: tuple[Path, list[dict[str, Any]]],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path, forms = driven
    assert main(["replay", "state", "--cycle", "2", "--log", str(path)]) == 0
    assert capsys.readouterr().out == dumps(forms[1]).decode() + "\n"
    assert main(["replay", "state", "--cycle", "99", "--log", str(path)]) == 1
    assert f"it holds {len(forms)} complete cycles" in capsys.readouterr().err


def test_state_reports_a_digest_mismatch(driven: tuple[Path, list[dict[str, Any]]], tmp_path: Path) -> None:
    path, _ = driven

    def change(values: list[bytes]) -> list[bytes]:
        out = []
        for v in values:
            obj = orjson.loads(v)
            if obj["type"] == "cycle.completed" and obj["data"]["cycle"] == 2:
                obj["data"]["state_digest"] = "sha256:0"
                v = dumps(obj)
            out.append(v)
        return out

    with FileLog(path, readonly=True) as log:
        copy_log(log, tmp_path / "t", outputs=change).close_sync()
    with open_file_log(tmp_path / "t") as source:
        assert not state_at(source, 2).digest_matches
    assert main(["replay", "state", "--cycle", "2", "--log", str(tmp_path / "t")]) == 2


def test_diff_between_cycles(driven: tuple[Path, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]) -> None:
    path, forms = driven
    assert main(["replay", "diff", "--cycle", "0", "--cycle", "1", "--log", str(path), "--json"]) == 0
    body = orjson.loads(capsys.readouterr().out)
    assert (body["from_cycle"], body["to_cycle"]) == (0, 1)
    assert set(body["nodes"]["added"]) == set(forms[0]["nodes"])
    assert "root.default" in body["queues"]["removed"]  # the workload's config replaced the default tree
    assert main(["replay", "diff", "--cycle", "1", "--cycle", "2", "--log", str(path)]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0] == "state after cycle 1 → after cycle 2"
    assert any(line.startswith("apps: ") for line in text)
    assert any(line.startswith("  ~ root: allocated {") for line in text)
    assert main(["replay", "diff", "--cycle", "1", "--log", str(path)]) == 1


def test_diff_states_shapes() -> None:
    before = {"queues": {"root": {"priority": 0, "allocated": {}}}, "apps": {"a": {"state": "New"}}, "nodes": {}}
    after = {"queues": {"root": {"priority": 5, "allocated": {}}}, "apps": {}, "nodes": {"n": {"capacity": {"x": 1}}}}
    diff = diff_states(before, after)
    assert diff["queues"]["changed"] == {"root": {"priority": {"from": 0, "to": 5}}}
    assert diff["apps"]["removed"] == {"a": {"state": "New"}}
    assert diff["nodes"]["added"] == {"n": {"capacity": {"x": 1}}}
    lines = format_diff(diff, 3, 4)
    assert "  ~ root: priority 0 → 5" in lines and "  - a: state New" in lines and "  + n: capacity {x: 1}" in lines


def test_negative_cycle_is_rejected(driven: tuple[Path, list[dict[str, Any]]]) -> None:
    with open_file_log(driven[0]) as source, pytest.raises(StateError):
        state_at(source, -1)


def test_state_latest_is_the_last_complete_cycle(driven: tuple[Path, list[dict[str, Any]]],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path, forms = driven
    assert main(["replay", "state", "--cycle", "latest", "--log", str(path)]) == 0
    assert capsys.readouterr().out == dumps(forms[-1]).decode() + "\n"
    with pytest.raises(SystemExit):
        main(["replay", "state", "--cycle", "newest", "--log", str(path)])
    assert "neither a cycle number nor 'latest'" in capsys.readouterr().err


def test_diff_text_in_human_units_and_raw(capsys: pytest.CaptureFixture[str]) -> None:
    before: dict[str, Any] = {"queues": {}, "apps": {}, "nodes": {}}
    after = {"queues": {}, "apps": {}, "nodes": {"n": {"capacity": {"memory": 256 << 30, "vcore": 64000, "pods": 3}}}}
    diff = diff_states(before, after)
    assert "  + n: capacity {memory: 256 GiB, pods: 3, vcore: 64 cores}" in format_diff(diff, 1, 2)
    assert f"  + n: capacity {{memory: {256 << 30}, pods: 3, vcore: 64000}}" in format_diff(diff, 1, 2, raw=True)
