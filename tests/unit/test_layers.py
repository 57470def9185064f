"""The layers of the code (docs/architecture.md): no lower layer imports a higher one, no import cycle.

Every ``import`` in every module of ``events``, ``projections``, ``scheduler`` and ``replay``
counts — at module level, inside functions (lazy imports) and under ``TYPE_CHECKING`` — read
from the source with ``ast``, so nothing needs to be imported to check it. The eight layers,
lowest first (``LAYERS``); a module may import its own package and any package of a lower
layer, never a higher layer nor a sibling package of its own layer:

0. ``events`` — the event model, codec, and the log (file, Kafka, settings, credentials)
1. ``projections`` — pure read models over events (nodes, priorities, digests) and the sort policies
2. ``scheduler.config`` — the YuniKorn queue configuration: parse, validate, resolve
3. ``scheduler.core`` — the pure scheduler: state, apply, cycle, snapshots of state
4. ``scheduler.storage`` | ``scheduler.bridge`` | ``scheduler.simulation`` — snapshot files,
   MQTT topics and clients, workloads and the in-memory simulation
5. ``scheduler.service`` | ``replay`` — the live service loop; replay, verify, explain, audit
6. ``scheduler.http`` | ``scheduler.kubernetes`` — metrics, probes, the state API and the page;
   Kubernetes as the resource manager
7. ``scheduler.cli`` and every ``__main__`` — argument parsing and settings, the only argparse user

The pure layers (``PURE``: the event language, projections, config, core) must also keep the
core's determinism rule: no clock, no randomness, no environment, no I/O. A decision that read
any of them could not be re-derived byte for byte from the log.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("events", "projections", "scheduler", "replay")
LAYERS: tuple[tuple[str, ...], ...] = (
    ("events",),
    ("projections",),
    ("scheduler.config",),
    ("scheduler.core",),
    ("scheduler.storage", "scheduler.bridge", "scheduler.simulation"),
    ("scheduler.service", "replay"),
    ("scheduler.http", "scheduler.kubernetes"),  # surfaces over the service's state and replay's explanations
    ("scheduler.cli",),
)
ENTRY = len(LAYERS) - 1  # ``python -m scheduler`` / ``python -m replay`` start the CLI
ROOTS = frozenset({"scheduler"})  # a bare package marker: may import nothing of ours

# The pure layers: everything a decision is computed from. ``events`` is pure but for the log's
# adapters, the producer API (ids and times for the caller) and the build switch, which reads
# EVSCHED_PURE_PYTHON to choose which machine code runs, never what is decided (docs/native.md).
PURE = ("events", "projections", "scheduler.config", "scheduler.core")
IMPURE = ("events.log", "events.producer", "events.native")
# Standard modules that reach a clock, randomness, the environment, processes or I/O.
FORBIDDEN_MODULES = frozenset({
    "asyncio", "glob", "io", "logging", "multiprocessing", "os", "pathlib", "random", "secrets", "select",
    "selectors", "shutil", "signal", "socket", "ssl", "subprocess", "sys", "tempfile", "threading", "time",
    "urllib", "http", "uuid", "zoneinfo",
})
FORBIDDEN_CALLS = frozenset({"open", "print", "input", "breakpoint"})  # builtins doing I/O
# The clock through datetime/date, which pure code may use to *parse* times (events/times.py).
FORBIDDEN_ATTRIBUTES = frozenset({"now", "utcnow", "today", "fromtimestamp", "utcfromtimestamp"})


def find_modules(root: Path, packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    """Every module under ``packages``: dotted name → file (a package is its ``__init__``)."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, modules: Mapping[str, Path]) -> set[str]:
    """The modules of ours that ``name`` imports anywhere in its source (lazy and TYPE_CHECKING ones too)."""

    def ours(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            # ``from pkg import sub`` imports the module pkg.sub; ``from mod import name`` imports mod
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        for target in targets:
            module = ours(target)
            if module is not None and module != name:
                found.add(module)
    return found


def import_graph(root: Path, packages: Iterable[str] = PACKAGES) -> dict[str, set[str]]:
    """Module → the modules of ours it imports."""
    modules = find_modules(root, packages)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def layer_of(module: str) -> tuple[int, str] | None:
    """(layer index, package) of ``module``; None when no layer claims it."""
    if module.rpartition(".")[2] == "__main__":
        return ENTRY, module
    best: tuple[int, str] | None = None
    for index, packages in enumerate(LAYERS):
        for package in packages:
            if (module == package or module.startswith(package + ".")) and (
                best is None or len(package) > len(best[1])
            ):
                best = (index, package)
    return best


def layer_violations(graph: Mapping[str, set[str]]) -> list[str]:
    """Every import that goes up a layer or across to a sibling package of the same layer."""
    bad: list[str] = []
    for module in sorted(graph):
        for target in sorted(graph[module]):
            if module in ROOTS:
                bad.append(f"{module} -> {target}: a package marker imports nothing")
                continue
            if target in ROOTS:
                continue
            mine, theirs = layer_of(module), layer_of(target)
            if mine is None or theirs is None:
                continue  # reported by test_every_module_has_a_layer
            if theirs[0] > mine[0]:
                bad.append(f"{module} (layer {mine[0]}, {mine[1]}) -> {target} (layer {theirs[0]}, {theirs[1]})")
            elif theirs[0] == mine[0] and theirs[1] != mine[1] and mine[0] != ENTRY:
                bad.append(f"{module} ({mine[1]}) -> {target} ({theirs[1]}): sibling packages of layer {mine[0]}")
    return bad


def import_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(cycles)


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(ROOT)


def test_every_module_has_a_layer(graph: dict[str, set[str]]) -> None:
    """A new package must be placed in LAYERS (and in docs/architecture.md) before it is used."""
    assert [m for m in sorted(graph) if m not in ROOTS and layer_of(m) is None] == []


def test_no_lower_layer_imports_a_higher_one(graph: dict[str, set[str]]) -> None:
    assert layer_violations(graph) == []


def test_no_import_cycle(graph: dict[str, set[str]]) -> None:
    assert import_cycles(graph) == []


def test_only_the_cli_parses_arguments(graph: dict[str, set[str]]) -> None:
    """No function below ``scheduler.cli`` takes an ``argparse.Namespace``: none of it imports argparse."""
    users = []
    for name, path in find_modules(ROOT).items():
        layer = layer_of(name)
        if layer is not None and layer[0] == ENTRY:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            if "argparse" in names:
                users.append(name)
    assert users == []


def _write(root: Path, files: Mapping[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_checks_catch_an_upward_import_a_lazy_one_and_a_cycle(tmp_path: Path) -> None:
    """The checker itself: a core module importing the CLI inside a function, and a two-module cycle."""
    _write(tmp_path, {
        "events/__init__.py": "",
        "events/a.py": "from events import b\n",
        "events/b.py": "def f():\n    from .a import x\n",
        "scheduler/__init__.py": "",
        "scheduler/core/__init__.py": "",
        "scheduler/core/pure.py": "def g():\n    from scheduler.cli.main import run\n",
        "scheduler/cli/__init__.py": "",
        "scheduler/cli/main.py": "import scheduler.core.pure\nfrom events.a import thing\n",
        "scheduler/bridge/__init__.py": "from scheduler.storage import files\n",
        "scheduler/storage/__init__.py": "",
        "scheduler/storage/files.py": "",
    })
    g = import_graph(tmp_path, ("events", "scheduler"))
    assert g["events.a"] == {"events.b"} and g["events.b"] == {"events.a"}
    assert g["scheduler.cli.main"] == {"scheduler.core.pure", "events.a"}
    assert import_cycles(g) == [["events.a", "events.b"], ["scheduler.cli.main", "scheduler.core.pure"]]
    assert layer_violations(g) == [
        "scheduler.bridge (scheduler.bridge) -> scheduler.storage.files (scheduler.storage): "
        "sibling packages of layer 4",
        "scheduler.core.pure (layer 3, scheduler.core) -> scheduler.cli.main (layer 7, scheduler.cli)",
    ]


def test_layers_cover_each_package_once() -> None:
    counts: defaultdict[str, int] = defaultdict(int)
    for packages in LAYERS:
        for package in packages:
            counts[package] += 1
    assert [p for p, n in counts.items() if n > 1] == []


def is_pure(module: str) -> bool:
    """Whether ``module`` is in a pure layer (``PURE`` less ``IMPURE``)."""
    def under(package: str) -> bool:
        return module == package or module.startswith(package + ".")
    return any(map(under, PURE)) and not any(map(under, IMPURE))


def impurities(source: str) -> list[str]:
    """What in ``source`` reaches a clock, randomness, the environment or I/O: imports, builtins, datetime.now."""
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else (
                [node.module] if node.module and not node.level else [])
            found += [(node.lineno, node.col_offset, f"import {n}") for n in names
                      if n.partition(".")[0] in FORBIDDEN_MODULES]
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in FORBIDDEN_CALLS:
                found.append((node.lineno, node.col_offset, f"{func.id}()"))
            elif isinstance(func, ast.Attribute) and func.attr in FORBIDDEN_ATTRIBUTES:
                found.append((node.lineno, node.col_offset, f".{func.attr}()"))
    return [f"line {line}: {what}" for line, _, what in sorted(found)]


def test_the_pure_layers_read_no_clock_randomness_environment_or_io() -> None:
    """The core's determinism rule, checked on the source: decisions are a function of the log alone."""
    bad = [f"{name}: {what}" for name, path in find_modules(ROOT).items() if is_pure(name)
           for what in impurities(path.read_text(encoding="utf-8"))]
    assert bad == []


def test_the_purity_check_catches_each_way_out() -> None:
    source = (
        "import os\nimport time as t\nfrom random import choice\nfrom datetime import datetime\n"
        "from events.models import Ask\nfrom . import sibling\n"
        "def f():\n    import secrets\n    print(open('x').read())\n    return datetime.now(), sorted([])\n"
    )
    assert impurities(source) == [
        "line 1: import os", "line 2: import time", "line 3: import random",
        "line 8: import secrets", "line 9: print()", "line 9: open()", "line 10: .now()",
    ]
    assert is_pure("scheduler.core.cycle") and is_pure("events.codec") and is_pure("projections")
    assert not is_pure("events.log.file") and not is_pure("events.native") and not is_pure("replay.verify")


def test_the_architecture_page_lists_these_layers() -> None:
    """docs/architecture.md's layer table names the packages of ``LAYERS``, layer by layer, and counts them."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| ([^|]+) \|", text, re.M)
    documented = [(int(n), sorted(p for p in re.findall(r"`([a-z_.]+)`", cells) if p != "__main__"))
                  for n, cells in rows]
    assert documented == [(i, sorted(packages)) for i, packages in enumerate(LAYERS)]
    words = {8: "Eight", 9: "Nine", 10: "Ten"}
    assert f"{words.get(len(LAYERS), len(LAYERS))} layers, lowest first" in text


def test_this_docstring_and_the_readme_layout_name_every_package() -> None:
    """This module's docstring lists ``LAYERS`` layer by layer, and the README's layout names every
    package below ``scheduler/`` (a package added to one and not the others is the drift to catch)."""
    listed = re.findall(r"^(\d+)\. (.+?)(?: — |$)", __doc__ or "", re.M)
    assert [(int(n), sorted(set(re.findall(r"``([a-z_.]+)``", names)) - {"__main__"})) for n, names in listed] == [
        (i, sorted(packages)) for i, packages in enumerate(LAYERS)
    ]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = readme[readme.index("## Layout"):]
    layout = layout[: layout.index("\n## ")]
    packages = sorted(p.parent.name for p in (ROOT / "scheduler").glob("*/__init__.py"))
    assert [p for p in packages if f"{p}/" not in layout] == []
