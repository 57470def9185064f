"""The compiled core (mypyc, setup.py) and its pure-Python fallback: same bytes, never a stale extension.

- A churning workload and every golden scenario run through ``evsched simulate --state``
  in two processes, one on the compiled build and one with EVSCHED_PURE_PYTHON=1; the
  whole output logs (every decision, rejection, state digest and the final state) must be
  byte-identical. Without a compiled build in this tree the test skips; under CI=true it fails.
- A build with a compiler that fails (CC=/bin/false) still makes a wheel: pure Python,
  which installs, imports and schedules.
- events.native's decision: a source edited after the build runs as source, never the
  stale extension.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import orjson
import pytest

from benchmarks.saturated import preemption_storm
from conformance.compare import under_profile
from events import native
from tests import native_workload
from tests.cli import evsched_env

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = sorted(p for p in (ROOT / "tests" / "golden" / "scenarios").glob("*.jsonl")
                if not p.name.endswith(".expected.jsonl"))


def _env(**extra: str) -> dict[str, str]:
    """The test's environment (tests.cli's: no EVSCHED_* credentials) without the build switch, plus ``extra``."""
    env = {k: v for k, v in evsched_env().items() if k != native.PURE_ENV}
    return {**env, **extra}


def _evsched(args: list[str], env: dict[str, str], cwd: Path = ROOT) -> bytes:
    return subprocess.run([sys.executable, "-m", "scheduler", *args], cwd=cwd, env=env, capture_output=True,
                          check=True).stdout


def test_compiled_and_pure_python_cores_write_identical_logs(tmp_path: Path) -> None:
    compiled, pure = _env(), _env(**{native.PURE_ENV: "1"})
    build = _evsched(["--version"], compiled).decode()
    if "core: compiled (mypyc)" not in build:
        message = f"no compiled build in this tree ({build.strip()}); `make venv` builds it"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    assert "core: pure Python (EVSCHED_PURE_PYTHON is set)" in _evsched(["--version"], pure).decode()
    workload = native_workload.write(tmp_path / "churn.jsonl")
    digests = 0
    for scenario in [workload, *GOLDEN, *_under_1_9(tmp_path)]:
        one = _evsched(["simulate", str(scenario), "--state"], compiled)
        other = _evsched(["simulate", str(scenario), "--state"], pure)
        assert one == other, f"{scenario.name}: the compiled and the pure-Python core wrote different logs"
        outputs = [orjson.loads(line) for line in one.splitlines()]
        cycles = [o["data"]["state_digest"] for o in outputs if o.get("type") == "cycle.completed"]
        assert cycles and all(cycles), scenario.name
        digests += len(cycles)
        if scenario == workload:  # the workload exercises what it says it does
            kinds = {o.get("type") for o in outputs}
            assert {"allocation.decided", "allocation.revoked", "app.state_changed", "input.rejected"} <= kinds
            assert sum(o.get("type") == "allocation.decided" for o in outputs) > 2_000
            assert len(cycles) > 10
    assert digests > len(GOLDEN) + 10


def _under_1_9(dest: Path) -> list[Path]:
    """The preemption golden and a small preemption storm (``benchmarks/saturated.py``'s) under the
    yunikorn-1.9 rules profile: its victim selection and index are compiled too."""
    out = []
    for name in ("preemption",):
        path = dest / f"{name}-yunikorn-1.9.jsonl"
        lines = (ROOT / "tests" / "golden" / "scenarios" / f"{name}.jsonl").read_bytes().splitlines()
        path.write_bytes(b"".join(under_profile(line, "yunikorn-1.9") + b"\n" for line in lines))
        out.append(path)
    storm = preemption_storm(12)
    path = dest / "storm-yunikorn-1.9.jsonl"
    path.write_bytes(storm.jsonl_under("yunikorn-1.9"))
    return [*out, path]


def _copy_sources(dest: Path) -> None:
    """The package sources without any build products (no extension, manifest or bytecode)."""
    skip = shutil.ignore_patterns("*.so", "native.json", "__pycache__", "*.pyc")
    for package in ("events", "projections", "scheduler", "replay"):
        shutil.copytree(ROOT / package, dest / package, ignore=skip)
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)


def test_without_a_working_compiler_the_package_installs_and_schedules_as_pure_python(tmp_path: Path) -> None:
    src, wheels, site = tmp_path / "src", tmp_path / "wheels", tmp_path / "site"
    src.mkdir()
    _copy_sources(src)
    env = _env(CC="/bin/false", PIP_DISABLE_PIP_VERSION_CHECK="1")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w", str(wheels),
                    str(src)], env=env, capture_output=True, check=True)
    (wheel,) = wheels.glob("evsched-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        manifest = json.loads(zf.read("events/native.json"))
    assert not [n for n in names if n.endswith(".so")], "a failed C build left extensions in the wheel"
    assert "scheduler/core/cycle.py" in names
    assert manifest["build"] == "pure" and "no working C compiler" in manifest["reason"]
    assert set(manifest["sources"]) >= {"scheduler.core.cycle", "events.resources"}
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   env=env, capture_output=True, check=True)
    run_env = _env(PYTHONPATH=str(site))
    version = _evsched(["--version"], run_env, cwd=tmp_path).decode()
    assert "core: pure Python (built without the compiler: no working C compiler" in version
    where = subprocess.run([sys.executable, "-c", "import scheduler.core.cycle as c; print(c.__file__)"],
                           cwd=tmp_path, env=run_env, capture_output=True, check=True, text=True).stdout
    assert where.strip() == str(site / "scheduler" / "core" / "cycle.py")
    scenario = GOLDEN[0]
    out = _evsched(["simulate", str(scenario), "--state"], run_env, cwd=tmp_path)
    assert out == scenario.with_name(scenario.stem + ".expected.jsonl").read_bytes()
    assert b'"type":"allocation.decided"' in out


def _built_tree(root: Path, suffix: str) -> dict[str, object]:
    """A fake compiled tree: one module, its 'extension' file and a manifest naming its hash."""
    (root / "pkg").mkdir()
    source = root / "pkg" / "mod.py"
    source.write_text("X = 1\n")
    (root / "pkg" / f"mod{suffix}").write_bytes(b"not really an extension")
    (root / f"grp__mypyc{suffix}").write_bytes(b"")
    return {"build": "compiled", "suffix": suffix, "extensions": ["grp__mypyc", "pkg.mod"],
            "sources": {"pkg.mod": native.source_hash(source)}}


def test_a_source_edited_after_the_build_runs_as_source_never_the_stale_extension(tmp_path: Path) -> None:
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    manifest = _built_tree(tmp_path, suffix)
    assert native.decide({}, manifest, tmp_path) == native.Build(True, "", ("pkg.mod",))
    assert native.stale_sources(manifest, tmp_path) == []
    (tmp_path / "pkg" / "mod.py").write_text("X = 2\n")
    edited = native.decide({}, manifest, tmp_path)
    assert not edited.compiled and "STALE" in edited.reason and "pkg.mod" in edited.reason
    assert native.stale_sources(manifest, tmp_path) == ["pkg.mod"]


def test_the_build_is_pure_python_when_asked_absent_for_another_interpreter_or_incomplete(tmp_path: Path) -> None:
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    manifest = _built_tree(tmp_path, suffix)
    assert not native.decide({native.PURE_ENV: "1"}, manifest, tmp_path).compiled
    assert native.decide({native.PURE_ENV: "0"}, manifest, tmp_path).compiled
    assert not native.decide({}, None, tmp_path).compiled
    assert not native.decide({}, {**manifest, "build": "pure", "reason": "x"}, tmp_path).compiled
    other = native.decide({}, {**manifest, "suffix": ".cpython-399-x.so"}, tmp_path)
    assert not other.compiled and "built for .cpython-399-x.so" in other.reason
    (tmp_path / "pkg" / f"mod{suffix}").unlink()
    missing = native.decide({}, manifest, tmp_path)
    assert not missing.compiled and "pkg.mod" in missing.reason


def test_this_process_runs_one_build_whole() -> None:
    """Every compiled module of the manifest loaded from the same kind of file: never a mix."""
    assert not native.loaded_build().startswith("MIXED")
    import scheduler.core.cycle as cycle

    assert cycle.__file__ is not None
    assert cycle.__file__.endswith(".py") != native.BUILD.compiled


def test_the_isolated_build_has_every_runtime_dependency() -> None:
    """mypyc type-checks the compiled modules inside pip's isolated build environment: a runtime
    package missing from [build-system] requires fails that check, and a fresh clone silently
    falls back to the pure-Python core (google-re2 did, once)."""
    import re
    import tomllib

    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())

    def name(requirement: str) -> str:
        return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower()

    build = {name(r) for r in project["build-system"]["requires"]}
    missing = sorted({name(r) for r in project["project"]["dependencies"]} - build)
    assert missing == [], f"add {missing} to [build-system] requires in pyproject.toml"
