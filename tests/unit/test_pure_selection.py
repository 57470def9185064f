"""make test's pure-Python selection (tests/pure_selection.py) follows setup.py's compiled module list."""

from __future__ import annotations

from pathlib import Path

from tests import pure_selection


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def test_a_file_is_chosen_when_it_tests_compiled_code(tmp_path: Path) -> None:
    _tree(tmp_path, {
        "setup.py": 'NATIVE_MODULES = (\n    "scheduler/core/cycle.py",\n    "scheduler/core/engine.py",\n'
                    '    "events/seen.py",\n)\n',
        "tests/helper.py": "from scheduler.simulation.run import go\n",
        "tests/cli.py": "from tests.helper import go\n",
        "scheduler/simulation/run.py": "from scheduler.core import cycle\n",
        "scheduler/core/engine.py": "from scheduler.core.cycle import run_cycle\n",
        "tests/unit/test_direct.py": "from events.seen import SeenWindow\n",
        "tests/unit/test_helper.py": "from tests.helper import thing\n",
        "tests/unit/test_module_form.py": "import scheduler.core.cycle\n",
        "tests/unit/test_other.py": "from events.codec import dumps\nfrom tests import nothing_here\n",
        "tests/integration/test_far.py": "from events.seen import SeenWindow\n",
        # shell tests: chosen only when they call a compiled module beyond the engine that makes their input
        "tests/unit/test_replay_fixture.py": "from replay.verify import verify\n"
                                             "from scheduler.core.engine import Engine\n",
        "tests/unit/test_replay_direct.py": "from replay.verify import verify\nfrom events.seen import SeenWindow\n",
        "tests/unit/test_shell_helper.py": "from scheduler.service.loop import Service\nfrom tests.helper import go\n",
        "tests/unit/test_command_line.py": "from tests.cli import evsched\n",
    })
    assert pure_selection.native_modules(tmp_path) == {"scheduler.core.cycle", "scheduler.core.engine", "events.seen"}
    assert pure_selection.pure_test_files(tmp_path, also=("tests/unit/test_listed.py",)) == [
        "tests/unit/test_direct.py", "tests/unit/test_helper.py", "tests/unit/test_listed.py",
        "tests/unit/test_module_form.py", "tests/unit/test_replay_direct.py",
    ]


def test_covered_follows_helpers_and_what_compiled_modules_import(tmp_path: Path) -> None:
    _tree(tmp_path, {
        "setup.py": 'NATIVE_MODULES = (\n    "scheduler/core/cycle.py",\n    "scheduler/core/engine.py",\n'
                    '    "events/seen.py",\n)\n',
        "scheduler/core/engine.py": "from scheduler.core.cycle import run_cycle\n",
        "tests/helper.py": "from scheduler.core.engine import Engine\n",
        "tests/unit/test_a.py": "from events.seen import SeenWindow\n",
        "tests/unit/test_b.py": "from tests.helper import thing\n",
    })
    assert pure_selection.covered(["tests/unit/test_a.py"], tmp_path) == {"events.seen"}
    assert pure_selection.covered(["tests/unit/test_b.py"], tmp_path) == {"scheduler.core.engine",
                                                                           "scheduler.core.cycle"}


def test_the_selection_reaches_every_compiled_module() -> None:
    """Leaving the shell's tests out must not leave a compiled module that no pure-run test reaches."""
    assert pure_selection.covered(pure_selection.pure_test_files()) == pure_selection.native_modules()


def test_this_tree_runs_every_compiled_modules_tests_pure() -> None:
    """The hand-kept list this replaced, and the files the review found never ran pure, are all chosen;
    the tests of the shell that only use the core to make their input are not."""
    chosen = set(pure_selection.pure_test_files())
    for name in ("test_core_rules", "test_core_properties", "test_golden_scenarios", "test_bench_baseline",
                 "test_native_build", "test_queue_order", "test_resource_fast_paths", "test_asks",
                 "test_reservation_search", "test_doctests", "test_fuzz_log_file", "test_fast_decode",
                 "test_seen_window", "test_fact_fold", "test_user_limits"):
        assert f"tests/unit/{name}.py" in chosen
    for name in ("test_submit_checks", "test_cli_feed_and_read", "test_replay_verify", "test_replay_explain"):
        assert f"tests/unit/{name}.py" not in chosen
    assert all((pure_selection.ROOT / path).is_file() for path in chosen)
