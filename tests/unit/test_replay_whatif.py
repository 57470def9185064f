"""replay whatif: a config with reversed queue priorities changes who gets the scarce capacity."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from replay.reader import open_file_log
from replay.whatif import WhatIfError, whatif
from scheduler.cli.replay import main
from scheduler.config import load_config
from scheduler.simulation.workload import WorkloadSpec, config_yaml
from tests.logdrive import driven_file_log

SPEC = WorkloadSpec(nodes=3, apps=9, asks=150, departments=3, leaves=6, seed=4)


def reversed_yaml() -> str:
    text = config_yaml(SPEC)
    text = text.replace("priority.policy: fence\n              priority.offset: '100'", "priority.offset: '0'")
    return text.replace("priority.offset: '10'", "priority.offset: '100000'")


@pytest.fixture(scope="module")
def driven(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return driven_file_log(tmp_path_factory.mktemp("whatif") / "log", SPEC, 60)


def test_reversed_priorities_move_allocations(driven: Path) -> None:
    with open_file_log(driven) as source:
        report = whatif(source, load_config(reversed_yaml()))
    per_queue = report.per_queue()
    dept0 = [q for q in per_queue if q.startswith("root.dept0.")]
    dept2 = [q for q in per_queue if q.startswith("root.dept2.")]
    assert sum(per_queue[q][0] for q in dept0) > sum(per_queue[q][1] for q in dept0)
    assert sum(per_queue[q][0] for q in dept2) < sum(per_queue[q][1] for q in dept2)
    assert report.differing() > 0 and report.ignored_config_updates == 1
    first = report.first_difference()
    assert first is not None and first[1] is not None and first[2] is not None
    assert first[1]["queue"] != first[2]["queue"]


def test_same_config_changes_nothing(driven: Path) -> None:
    with open_file_log(driven) as source:
        report = whatif(source, load_config(config_yaml(SPEC)))
    assert report.differing() == 0 and report.first_difference() is None
    assert len(report.before) == len(report.after) > 0


def test_whatif_cli(driven: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "new.yaml"
    cfg.write_text(reversed_yaml())
    assert main(["replay", "whatif", "--config", str(cfg), "--log", str(driven)]) == 0
    out = capsys.readouterr().out
    assert "config.updated events from cycle 1 on are ignored (1 in the log)" in out
    assert "first differing decision" in out and "before: {" in out and "after:  {" in out
    assert main(["replay", "whatif", "--config", str(cfg), "--from-cycle", "2", "--log", str(driven), "--json"]) == 0
    body = orjson.loads(capsys.readouterr().out)
    assert body["from_cycle"] == 2 and body["ignored_config_updates"] == 0
    assert body["decisions"]["differing"] > 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("partitions: 3\n")
    assert main(["replay", "whatif", "--config", str(bad), "--log", str(driven)]) == 1
    assert "is invalid" in capsys.readouterr().err
    assert main(["replay", "whatif", "--config", str(cfg), "--from-cycle", "99", "--log", str(driven)]) == 1


def test_config_the_state_refuses(driven: Path) -> None:
    with open_file_log(driven) as source, pytest.raises(WhatIfError) as exc:
        # a queue that holds apps may drain, but never become (or end up under) a leaf's place as a parent
        leaf_depts = "partitions:\n  - name: default\n    queues:\n      - name: root\n        queues:\n" \
                     "          - name: dept0\n          - name: dept1\n"
        whatif(source, load_config(leaf_depts), from_cycle=2)
    assert "cannot be applied at cycle 2" in str(exc.value)
