"""The worked examples in module docstrings (policies, key functions, backoff) are run as tests."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from typing import Any

import pytest

PACKAGES = ["events", "projections", "scheduler", "replay"]


def _modules() -> list[str]:
    names = []
    for package in PACKAGES:
        pkg = importlib.import_module(package)
        names.append(package)
        names += [m.name for m in pkgutil.walk_packages(pkg.__path__, prefix=f"{package}.")
                  if not m.name.endswith("__main__")]  # importing those runs the command line
    return sorted(names)


def _with_examples() -> list[Any]:
    finder = doctest.DocTestFinder()
    out: list[Any] = []
    for name in _modules():
        try:
            module = importlib.import_module(name)
        except ImportError as exc:  # an optional dependency (e.g. the kafka extra) is absent: that module only
            out.append(pytest.param(name, marks=pytest.mark.skip(reason=f"{name}: {exc}")))
            continue
        if any(t.examples for t in finder.find(module)):
            out.append(name)
    return out


MODULES = _with_examples()


def test_there_are_worked_examples() -> None:
    assert sum(isinstance(m, str) for m in MODULES) >= 5, MODULES  # not counting modules that cannot import


@pytest.mark.parametrize("name", MODULES)
def test_worked_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
