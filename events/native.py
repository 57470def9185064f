"""Which build of the hot modules runs: the mypyc-compiled extensions, or the same source as pure Python.

setup.py compiles a few modules with mypyc when it can and writes ``events/native.json``:
the build it made and the sha256 of every compiled module's source. The packages holding
compiled modules (``events``, ``projections``, ``scheduler.core``) import this module
first, so it decides once per process, before any compiled module can load:

- **compiled** when the manifest says so, every extension is there for this interpreter,
  and every source still has the hash it was compiled from;
- **pure Python** otherwise, or when ``EVSCHED_PURE_PYTHON`` is set (to anything but 0).
  A meta-path finder then loads these packages' modules from their ``.py`` files, so an
  extension lying beside its source is never imported. The two are never mixed: compiled
  code relies on the native layout of the compiled classes.

A stale extension (its source edited after the build) is reported once on stderr and the
source runs: whoever edits a core file and runs the tests tests the edit. ``make test``
rebuilds first when ``main(['--check'])`` below says the build is stale.

This is the one place below the CLI that reads the environment. It chooses which machine
code runs, never what is decided: tests/unit/test_native_build.py runs a workload through
both builds and compares every output byte and every state digest. See docs/native.md.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent  # the directory holding events/, projections/, scheduler/
MANIFEST = ROOT / "events" / "native.json"
PACKAGES = frozenset({"events", "projections", "scheduler", "replay"})
PURE_ENV = "EVSCHED_PURE_PYTHON"


@dataclass(frozen=True)
class Build:
    """The decision: compiled or not, why, and the modules the build compiled (its manifest's)."""

    compiled: bool
    reason: str
    modules: tuple[str, ...]

    def describe(self) -> str:
        return "compiled (mypyc)" if self.compiled else f"pure Python ({self.reason})"


def source_hash(path: Path) -> str | None:
    """sha256 of a module's source (what setup.py records), None when it cannot be read."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def read_manifest(path: Path = MANIFEST) -> dict[str, object] | None:
    """The build's manifest, or None when there is none (a tree that was never built)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def stale_sources(manifest: dict[str, object], root: Path = ROOT) -> list[str]:
    """The modules whose source differs from what the build compiled (all of them with no record)."""
    sources = manifest.get("sources")
    if not isinstance(sources, dict) or not sources:
        return ["(no source hashes recorded)"]
    return [m for m, digest in sorted(sources.items()) if source_hash(root / (m.replace(".", "/") + ".py")) != digest]


def decide(env: dict[str, str], manifest: dict[str, object] | None, root: Path = ROOT) -> Build:
    """Compiled or pure Python, for this environment, manifest and tree (pure function of its inputs)."""
    if manifest is None:
        return Build(False, "not built with mypyc: no events/native.json", ())
    sources = manifest.get("sources")
    modules = tuple(sorted(m for m in sources if isinstance(m, str))) if isinstance(sources, dict) else ()
    if env.get(PURE_ENV, "") not in ("", "0"):
        return Build(False, f"{PURE_ENV} is set", modules)
    if manifest.get("build") != "compiled":
        return Build(False, f"built without the compiler: {manifest.get('reason', 'unknown')}", modules)
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    if manifest.get("suffix") != suffix:
        return Build(False, f"the extensions were built for {manifest.get('suffix')}, this is {suffix}", modules)
    extensions = manifest.get("extensions")
    missing = [e for e in extensions if not (root / (e.replace(".", "/") + suffix)).is_file()] \
        if isinstance(extensions, list) else ["(none recorded)"]
    if missing:
        return Build(False, f"extension files missing: {', '.join(missing)}", modules)
    stale = stale_sources(manifest, root)
    if stale:
        return Build(False, f"STALE extensions ignored, source edited since the build: {', '.join(stale)}; "
                            "`make venv` or `python setup.py build_ext --inplace` rebuilds them", modules)
    return Build(True, "", modules)


class _SourceFinder(importlib.abc.MetaPathFinder):
    """Loads every module of our packages from its .py file, so no extension beside it is imported."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname.partition(".")[0] not in PACKAGES or path is None:
            return None
        leaf = fullname.rpartition(".")[2]
        for entry in path:
            source = Path(entry) / f"{leaf}.py"
            if source.is_file():
                return importlib.util.spec_from_file_location(fullname, source)
        return None  # a package directory or not ours: the normal finders


def _install(build: Build) -> None:
    if build.compiled or any(type(f).__name__ == "_SourceFinder" for f in sys.meta_path):  # once (also under -m)
        return
    loaded = [m for m in build.modules if m in sys.modules]
    if loaded:  # cannot happen through the package imports; refuse rather than mix the builds
        raise ImportError(f"events.native decided on pure Python after {loaded} were imported")
    sys.meta_path.insert(0, _SourceFinder())
    if "STALE" in build.reason:
        sys.stderr.write(f"evsched: running the pure-Python core: {build.reason}\n")


BUILD = decide(dict(os.environ), read_manifest())
_install(BUILD)


def loaded_build() -> str:
    """What actually runs, checked on the imported modules themselves (for ``evsched --version``)."""
    files = {m: getattr(importlib.import_module(m), "__file__", "") or "" for m in BUILD.modules}
    native = sorted(m for m, f in files.items() if not f.endswith(".py"))
    if BUILD.compiled and len(native) != len(files):
        return f"MIXED: compiled {native}, the rest pure Python"
    if not BUILD.compiled and native:
        return f"MIXED: pure Python but {native} loaded compiled"
    return BUILD.describe()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -c 'import events.native as n; n.main()' [--check]``: the build; --check: 1 when stale."""
    args = list(sys.argv[1:] if argv is None else argv)
    manifest = read_manifest()
    if "--check" in args:
        stale = ["(no build)"] if manifest is None else stale_sources(manifest)
        print(f"native build {'stale: ' + ', '.join(stale) if stale else 'up to date'}")
        return 1 if stale else 0
    print(loaded_build())
    return 0
