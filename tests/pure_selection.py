"""Which test files also run on the pure-Python build in ``make test``: derived from setup.py's compiled list.

The container image runs the pure build (docs/native.md), so every test file that exercises a
compiled module must also pass without the extensions. A file is selected when it imports a
compiled module (``NATIVE_MODULES``) — directly, through a helper module under ``tests/``, or
through ``scheduler.simulation`` (the core run in memory) — or when it is in ``ALSO``: files that
reach the compiled code another way (a subprocess, doctest). Only ``tests/unit``: the integration
tests' brokers and processes would double ``make test``'s time for code the unit tests already cover.

    python -m tests.pure_selection      # the selected files, one a line (make test's pure-Python run)
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Reached without importing a compiled module: golden scenarios and the byte-identical test run
# `python -m scheduler` (the environment switch goes with it); doctest reads the docstrings of
# pure modules only (a compiled module's are not found).
ALSO = ("tests/unit/test_golden_scenarios.py", "tests/unit/test_doctests.py", "tests/unit/test_native_build.py")
FOLLOW = ("tests", "scheduler.simulation")  # imports followed through these packages' modules


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


def pure_test_files(root: Path = ROOT, also: Iterable[str] = ALSO) -> list[str]:
    """The unit test files to run again on the pure build, relative to ``root``, sorted."""
    native = native_modules(root)
    chosen = {str(p.relative_to(root)) for p in (root / "tests" / "unit").glob("test_*.py")
              if reaches_native(p, native, root)}
    return sorted(chosen | set(also))


def main() -> int:
    print("\n".join(pure_test_files()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
