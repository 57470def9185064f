"""make test's pure-Python selection (tests/pure_selection.py) follows setup.py's compiled module list."""

from __future__ import annotations

from pathlib import Path

from tests import pure_selection


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def test_a_file_is_chosen_when_it_reaches_a_compiled_module(tmp_path: Path) -> None:
    _tree(tmp_path, {
        "setup.py": 'NATIVE_MODULES = (\n    "scheduler/core/cycle.py",\n    "events/seen.py",\n)\n',
        "tests/helper.py": "from scheduler.simulation.run import go\n",
        "scheduler/simulation/run.py": "from scheduler.core import cycle\n",
        "tests/unit/test_direct.py": "from events.seen import SeenWindow\n",
        "tests/unit/test_helper.py": "from tests.helper import thing\n",
        "tests/unit/test_module_form.py": "import scheduler.core.cycle\n",
        "tests/unit/test_other.py": "from events.codec import dumps\nfrom tests import nothing_here\n",
        "tests/integration/test_far.py": "from events.seen import SeenWindow\n",
    })
    assert pure_selection.native_modules(tmp_path) == {"scheduler.core.cycle", "events.seen"}
    assert pure_selection.pure_test_files(tmp_path, also=("tests/unit/test_listed.py",)) == [
        "tests/unit/test_direct.py", "tests/unit/test_helper.py", "tests/unit/test_listed.py",
        "tests/unit/test_module_form.py",
    ]


def test_this_tree_runs_every_compiled_modules_tests_pure() -> None:
    """The hand-kept list this replaced, and the files the review found never ran pure, are all chosen."""
    chosen = set(pure_selection.pure_test_files())
    for name in ("test_core_rules", "test_golden_scenarios", "test_bench_baseline", "test_native_build",
                 "test_reservation_search", "test_doctests", "test_fuzz_log_file", "test_fast_decode",
                 "test_seen_window", "test_fact_fold", "test_user_limits"):
        assert f"tests/unit/{name}.py" in chosen
    assert all((pure_selection.ROOT / path).is_file() for path in chosen)
