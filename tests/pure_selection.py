"""Which test files also run on the pure-Python build in ``make test``: derived from setup.py's compiled list.

The container image runs the pure build (docs/native.md), so the tests of the compiled modules'
behaviour must also pass without the extensions. A unit test file is selected when it reaches a
compiled module (``NATIVE_MODULES``) — directly, through a helper module under ``tests/``, or
through ``scheduler.simulation`` (the core run in memory) — and is a test *of* that code:

- a core test (it imports nothing of ours outside ``CORE``, and does not run the command line
  through ``tests.cli``): the core's behaviour, on states and workloads; or
- any other test that imports a compiled module itself beyond ``FIXTURES`` (the engine, event
  times): it calls that module's functions, not only builds a state to feed the shell.

Left out are the tests of the shell — replay, explain, audit, HTTP, the command line run as a
subprocess — that use the core only to make their input: on the pure build they would re-run code
the selected tests already run, at the pure build's cost (more than half of the pure run's time).
``ALSO`` adds files that reach the compiled code another way (a subprocess, doctest, a reference
scheduler). ``covered`` checks that the selection still reaches every compiled module. Only
``tests/unit``: the integration tests' brokers and processes would double ``make test``'s time
for code the unit tests already cover.

    python -m tests.pure_selection      # the selected files, one a line (make test's pure-Python run)
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Reached another way: golden scenarios and the byte-identical test run `python -m scheduler` (the
# environment switch goes with it); doctest reads the docstrings of pure modules only (a compiled
# module's are not found); the benchmarks' reference scheduler is held to the core's decisions on
# generated workloads (its subject, ``benchmarks.baseline``, is outside ``CORE``).
ALSO = ("tests/unit/test_golden_scenarios.py", "tests/unit/test_doctests.py", "tests/unit/test_native_build.py",
        "tests/unit/test_bench_baseline.py")
FOLLOW = ("tests", "scheduler.simulation")  # imports followed through these packages' modules
# What a core test may import of ours: the pure layers and the simulation that runs them in memory.
CORE = ("events", "projections", "scheduler.config", "scheduler.core", "scheduler.simulation")
OURS = ("events", "projections", "scheduler", "replay", "benchmarks", "conformance")
CLI = "tests.cli"  # runs ``python -m scheduler`` as a subprocess: a test of the command line
# Compiled modules a shell test imports to make its input (an engine with a state, event times),
# not to test them.
FIXTURES = frozenset({"scheduler.core.engine", "events.times"})


def native_modules(root: Path = ROOT) -> frozenset[str]:
    """setup.py's ``NATIVE_MODULES`` as dotted names, read from its source (setup.py runs a build when imported)."""
    for node in ast.parse((root / "setup.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "NATIVE_MODULES" for t in node.targets):
            return frozenset(p.removesuffix(".py").replace("/", ".") for p in ast.literal_eval(node.value))
    raise LookupError("setup.py has no NATIVE_MODULES")


def imported(path: Path) -> set[str]:
    """Every module ``path`` names in an import (``from a import b`` counts as a and a.b)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def module_file(root: Path, name: str) -> Path | None:
    """Our source file for dotted ``name`` (module or package), or None."""
    base = root.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def reaches_native(path: Path, native: frozenset[str], root: Path, seen: set[Path] | None = None) -> bool:
    """Whether ``path`` imports a compiled module, following imports through ``FOLLOW``'s modules."""
    seen = set() if seen is None else seen
    seen.add(path)
    for name in imported(path):
        if name in native:
            return True
        if name.startswith(tuple(p + "." for p in FOLLOW)):
            found = module_file(root, name)
            if found is not None and found not in seen and reaches_native(found, native, root, seen):
                return True
    return False


def tests_compiled_code(path: Path, native: frozenset[str], root: Path) -> bool:
    """Whether ``path`` is a test of compiled code: it reaches a compiled module and is a core test
    or imports one beyond ``FIXTURES`` itself (see the module docstring)."""
    if not reaches_native(path, native, root):
        return False
    names = imported(path)
    shell = any(n.startswith(OURS) and not n.startswith(CORE) for n in names) or CLI in names
    return not shell or bool({n for n in names if n in native} - FIXTURES)


def pure_test_files(root: Path = ROOT, also: Iterable[str] = ALSO) -> list[str]:
    """The unit test files to run again on the pure build, relative to ``root``, sorted."""
    native = native_modules(root)
    chosen = {str(p.relative_to(root)) for p in (root / "tests" / "unit").glob("test_*.py")
              if tests_compiled_code(p, native, root)}
    return sorted(chosen | set(also))


def covered(files: Iterable[str], root: Path = ROOT) -> set[str]:
    """The compiled modules ``files`` reach: imported by them, by the helpers and simulation modules
    they import (``FOLLOW``), or by a compiled module so reached (the engine reaches what it runs)."""
    native = native_modules(root)
    found: set[str] = set()
    todo = [root / f for f in files]
    seen: set[Path] = set(todo)
    while todo:
        for name in imported(todo.pop()):
            if name in native:
                found.add(name)
            if name in native or name.startswith(tuple(p + "." for p in FOLLOW)):
                path = module_file(root, name)
                if path is not None and path not in seen:
                    seen.add(path)
                    todo.append(path)
    return found


def main() -> int:
    print("\n".join(pure_test_files()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
