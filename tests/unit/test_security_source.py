"""The source tree holds no way for input to become code: no eval/exec, no pickle, no unsafe YAML,
no shell. A scan of every Python file's syntax tree (a grep that comments and strings
cannot fool), and a test that the scan does find what it looks for.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ["events", "projections", "scheduler", "replay", "benchmarks", "tests"]
# Findings that are not input paths, each with why (path, what → reason).
ALLOWED = {
    ("tests/unit/test_config_resolve.py", "imports pickle"): "round-trips a config object the test builds",
    ("tests/unit/test_security_source.py", "uses yaml.FullLoader"): "asserts the config loader is not one",
    ("tests/unit/test_security_source.py", "uses yaml.UnsafeLoader"): "asserts the config loader is not one",
}

DANGEROUS_CALLS = {"eval", "exec", "compile", "__import__", "execfile", "input"}
DANGEROUS_MODULES = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle", "jsonpickle"}
DANGEROUS_ATTRS = {
    ("os", "system"), ("os", "popen"), ("os", "execl"), ("os", "execv"), ("os", "execvp"), ("os", "execlp"),
    ("os", "spawnl"), ("os", "spawnv"), ("tempfile", "mktemp"),
    ("yaml", "unsafe_load"), ("yaml", "unsafe_load_all"), ("yaml", "full_load"), ("yaml", "full_load_all"),
    ("yaml", "UnsafeLoader"), ("yaml", "FullLoader"), ("yaml", "Loader"), ("yaml", "CLoader"),
    ("yaml", "CFullLoader"), ("yaml", "CUnsafeLoader"),
}  # fmt: skip
SAFE_LOADERS = {"SafeLoader", "CSafeLoader", "BaseLoader", "CBaseLoader"}


def findings(source: str, name: str = "<src>") -> list[str]:
    """What the scan objects to in one module, as ``name:line: what``."""
    found: list[str] = []
    tree = ast.parse(source, name)

    def note(node: ast.AST, what: str) -> None:
        found.append(f"{name}:{getattr(node, 'lineno', 0)}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for module in modules:
                if module.split(".")[0] in DANGEROUS_MODULES:
                    note(node, f"imports {module}")
            if isinstance(node, ast.ImportFrom) and node.module in {"os", "yaml", "tempfile"}:
                for alias in node.names:
                    if (node.module, alias.name) in DANGEROUS_ATTRS:
                        note(node, f"imports {node.module}.{alias.name}")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in DANGEROUS_ATTRS:
                note(node, f"uses {node.value.id}.{node.attr}")
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in DANGEROUS_CALLS:
                note(node, f"calls {func.id}()")
            if isinstance(func, ast.Attribute) and func.attr in {"load", "load_all"} and _is_name(func.value, "yaml"):
                loader = next((k.value for k in node.keywords if k.arg == "Loader"), None)
                if loader is None and len(node.args) > 1:
                    loader = node.args[1]
                if not (isinstance(loader, ast.Attribute) and loader.attr in SAFE_LOADERS):
                    note(node, f"calls yaml.{func.attr}() without a safe Loader")
            for keyword in node.keywords:
                if keyword.arg == "shell" and not (isinstance(keyword.value, ast.Constant) and not keyword.value.value):
                    note(node, "runs a shell (shell=…)")
    return found


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def python_files() -> list[Path]:
    return sorted(p for d in SCANNED for p in (ROOT / d).rglob("*.py"))


def test_the_tree_has_no_code_execution_paths() -> None:
    files = python_files()
    assert len(files) > 100  # the scan really walked the tree
    problems = [f for path in files for f in findings(path.read_text(), str(path.relative_to(ROOT)))]
    unexpected = [f for f in problems if (f.split(":")[0], f.split(": ", 1)[1]) not in ALLOWED]
    assert unexpected == []


@pytest.mark.parametrize(
    "snippet",
    [
        "eval(data)", "exec(code)", "compile(src, 'f', 'exec')", "__import__(name)",
        "import pickle", "from pickle import loads", "import marshal", "import dill.settings",
        "os.system(cmd)", "os.popen(cmd)", "from os import system",
        "yaml.load(text)", "yaml.load(text, Loader=yaml.Loader)", "yaml.load(text, yaml.FullLoader)",
        "yaml.unsafe_load(text)", "yaml.full_load(text)", "from yaml import UnsafeLoader",
        "subprocess.run(cmd, shell=True)", "subprocess.Popen(cmd, shell=flag)", "tempfile.mktemp()",
    ],
)  # fmt: skip
def test_the_scan_finds_each_pattern(snippet: str) -> None:
    assert findings(snippet) != []


@pytest.mark.parametrize(
    "snippet",
    [
        "yaml.load(text, Loader=yaml.SafeLoader)", "yaml.safe_load(text)", "re.compile('x')",
        "subprocess.run(['ls'], check=True)", "subprocess.run(cmd, shell=False)", "'eval(x)  # in a string'",
        "loop.create_subprocess_exec('x')", "model.model_validate(obj)",
    ],
)  # fmt: skip
def test_the_scan_allows_the_safe_forms(snippet: str) -> None:
    assert findings(snippet) == []


def test_the_config_loader_is_a_safe_loader() -> None:
    from scheduler.config.yamltree import _BoundedLoader

    assert issubclass(_BoundedLoader, yaml.SafeLoader)
    assert not issubclass(_BoundedLoader, yaml.FullLoader | yaml.UnsafeLoader)
    python_tags = [tag for tag in _BoundedLoader.yaml_constructors if tag and "python" in tag]
    assert python_tags == []
    assert not any("python" in prefix for prefix in _BoundedLoader.yaml_multi_constructors if prefix)
