"""The demo's upgrade preview: ``replay whatif --rules yunikorn-1.9`` on a log like ``make demo``'s
lists real changes — department 2 orders its leaves by fair share, half of them guaranteed, and
YuniKorn 1.9's fair share (YUNIKORN-2678) orders them otherwise than 1.5's."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay.reader import open_file_log
from replay.verify import verify
from replay.whatif import whatif
from scheduler.cli.demo import demo_spec
from scheduler.config import load_config
from scheduler.config.profiles import RulesProfile
from scheduler.simulation.workload import config_yaml
from tests.logdrive import driven_file_log

SPEC = demo_spec(nodes=12, apps=24, asks=600)


@pytest.fixture(scope="module")
def demo_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return driven_file_log(tmp_path_factory.mktemp("demo") / "log", SPEC, 150)


def test_the_demo_config_orders_department_2_by_fair_share() -> None:
    config = load_config(config_yaml(SPEC))
    dept2 = next(q for q in config.partitions[0].root.children if q.name == "dept2")
    assert dept2.properties["application.sort.priority"] == "disabled"
    guaranteed = {q.name: dict(q.guaranteed) for q in dept2.children if q.guaranteed}
    assert guaranteed == {"team8": {"vcore": 16_000, "memory": 40 << 30},
                          "team10": {"vcore": 18_000, "memory": 42 << 30}}


def test_whatif_1_9_on_the_demo_log_lists_changed_queue_orders_and_decisions(demo_log: Path) -> None:
    with open_file_log(demo_log) as source:
        report = whatif(source, None, profile=RulesProfile.YUNIKORN_1_9)
    assert report.recorded_profiles == {"yunikorn-1.5": report.cycles}
    orders = report.queue_orders()
    # the order within department 2 (fair share first) changes; the other departments sort by priority
    def dept2(order: list[str]) -> list[str]:
        return [q for q in order if q.startswith("root.dept2.")]

    assert any(dept2(before) != dept2(after) for _, before, after in orders), orders
    assert report.differing() > 0
    text = "\n".join(report.lines())
    assert "queue order:" in text and "root.dept2." in text.split("queue order:")[1]
    with open_file_log(demo_log) as source:
        same = whatif(source, None, profile=RulesProfile.YUNIKORN_1_5)
    assert same.differing() == 0 and same.queue_orders() == []


def test_the_demo_log_verifies_under_its_own_rules(demo_log: Path) -> None:
    with open_file_log(demo_log) as source:
        result = verify(source)
    assert result.ok, result
