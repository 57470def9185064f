"""Every dataclass that writes out its own ``__init__`` (docs/native.md) agrees with its field list.

The compiled core writes ``__init__`` by hand on the classes it makes per ask, decision and
step (a dataclass's generated one is interpreted Python that compiled code calls back into).
That is a second list of the fields; this test reads both from the source and fails when they
part: a field added, dropped, reordered or given another default in one place only.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.unit.test_layers import ROOT, find_modules


def _is_dataclass(node: ast.ClassDef) -> bool:
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if (isinstance(target, ast.Name) and target.id == "dataclass") or (
                isinstance(target, ast.Attribute) and target.attr == "dataclass"):
            return True
    return False


def _factory(value: ast.expr | None) -> bool:
    """Whether ``value`` is ``field(default_factory=…)``."""
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "field"
            and any(k.arg == "default_factory" for k in value.keywords))


def mismatches(cls: ast.ClassDef) -> list[str]:
    """How a dataclass's written ``__init__`` differs from its fields (empty: they agree)."""
    fields = [s for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
              and "ClassVar" not in ast.unparse(s.annotation)]
    init = next(s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__")
    args = init.args
    params = [*args.posonlyargs, *args.args, *args.kwonlyargs][1:]
    defaults = dict(zip([a.arg for a in [*args.posonlyargs, *args.args]][::-1], args.defaults[::-1], strict=False))
    defaults |= {a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None}
    names = [f.target.id for f in fields if isinstance(f.target, ast.Name)]
    bad: list[str] = []
    if [p.arg for p in params] != names:
        bad.append(f"parameters {[p.arg for p in params]} != fields {names}")
    assigned = {t.attr for s in ast.walk(init) if isinstance(s, ast.Assign) for t in s.targets
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}
    bad += [f"{name} never assigned" for name in names if name not in assigned]
    for f in fields:
        assert isinstance(f.target, ast.Name)
        name, given = f.target.id, defaults.get(f.target.id)
        if _factory(f.value):
            if not (isinstance(given, ast.Constant) and given.value is None):
                bad.append(f"{name}: a default_factory field needs the default None (a fresh value per call)")
        elif f.value is None:
            if given is not None:
                bad.append(f"{name}: no default in the field, {ast.unparse(given)} in __init__")
        elif given is None or ast.dump(given) != ast.dump(f.value):
            bad.append(f"{name}: default {ast.unparse(f.value)} in the field, "
                       f"{'none' if given is None else ast.unparse(given)} in __init__")
    return bad


def written_inits(root: Path = ROOT) -> dict[str, ast.ClassDef]:
    """Module.Class → its class node, for every dataclass of ours that defines ``__init__`` itself."""
    found: dict[str, ast.ClassDef] = {}
    for name, path in find_modules(root).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and _is_dataclass(node) and any(
                    isinstance(s, ast.FunctionDef) and s.name == "__init__" for s in node.body):
                found[f"{name}.{node.name}"] = node
    return found


INITS = written_inits()


def test_the_known_written_inits_are_found() -> None:
    assert {"scheduler.core.asks.Ask", "scheduler.core.objects.Allocation",
            "scheduler.core.reservations.Step"} <= set(INITS)


@pytest.mark.parametrize("name", sorted(INITS))
def test_a_written_init_matches_its_fields(name: str) -> None:
    assert mismatches(INITS[name]) == []


def _class(source: str) -> ast.ClassDef:
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.ClassDef)
    return node


def test_the_check_catches_each_drift() -> None:
    head = ("@dataclass(slots=True)\nclass C:\n    a: int\n    b: int = 1\n"
            "    c: list[int] = field(default_factory=list)\n")
    good = head + ("    def __init__(self, a: int, b: int = 1, c: list[int] | None = None) -> None:\n"
                   "        self.a = a\n        self.b = b\n        self.c = [] if c is None else c\n")
    assert mismatches(_class(good)) == []
    assert mismatches(_class(good.replace("b: int = 1, c", "b: int = 2, c"))) == [
        "b: default 1 in the field, 2 in __init__"]
    assert mismatches(_class(good.replace("        self.b = b\n", ""))) == ["b never assigned"]
    assert mismatches(_class(good.replace("    b: int = 1\n    c:", "    c:"))) == [
        "parameters ['a', 'b', 'c'] != fields ['a', 'c']"]
    assert mismatches(_class(good.replace("c: list[int] | None = None", "c: list[int] = []"))) == [
        "c: a default_factory field needs the default None (a fresh value per call)"]
