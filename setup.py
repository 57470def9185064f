"""The build: the hot modules compiled with mypyc when a C compiler works, pure Python otherwise.

Everything else about the package is in pyproject.toml. This file only adds the optional
native build of ``NATIVE_MODULES`` (the same source files; there is no second
implementation). It writes ``events/native.json`` — the build it made, each compiled
module's source hash and extension file — which ``events/native.py`` checks at import: a
stale extension (its source edited since the build) is never run. See docs/native.md.

    EVSCHED_PURE_PYTHON=1 pip install .      # skip the compiler: a pure-Python install
    python setup.py build_ext --inplace     # rebuild the extensions of a source tree
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import json
import os
import sys
import tempfile
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent

# The modules the allocation cycle, the fold of inputs (apply) and the state digest spend their
# time in (benchmarks/RESULTS.md, "Compiled core"); everything else stays interpreted.
NATIVE_MODULES = (
    "events/fast_decode.py",
    "events/log/framing.py",
    "events/model_construct.py",
    "events/resources.py",
    "events/seen.py",
    "events/times.py",
    "projections/digest.py",
    "projections/node_index.py",
    "projections/policies.py",
    "projections/priority.py",
    "scheduler/core/apply.py",
    "scheduler/core/asks.py",
    "scheduler/core/bounds.py",
    "scheduler/core/constrained_nodes.py",
    "scheduler/core/cycle.py",
    "scheduler/core/draining.py",
    "scheduler/core/dynamic_queues.py",
    "scheduler/core/engine.py",
    "scheduler/core/fact_fold.py",
    "scheduler/core/gang.py",
    "scheduler/core/node_constraints.py",
    "scheduler/core/form_cache.py",
    "scheduler/core/logged_cycle.py",
    "scheduler/core/objects.py",
    "scheduler/core/partition.py",
    "scheduler/core/placement.py",
    "scheduler/core/preemption.py",
    "scheduler/core/preemption_19.py",
    "scheduler/core/preemption_queues.py",
    "scheduler/core/preemption_queues_19.py",
    "scheduler/core/preemption_victims.py",
    "scheduler/core/preemption_victims_19.py",
    "scheduler/core/priorityclass.py",
    "scheduler/core/queues.py",
    "scheduler/core/recorded_cycles.py",
    "scheduler/core/required_node_preemption.py",
    "scheduler/core/reservations.py",
    "scheduler/core/reserve_candidates.py",
    "scheduler/core/snapshot.py",
    "scheduler/core/sorting.py",
    "scheduler/core/state.py",
    "scheduler/core/state_form.py",
    "scheduler/core/user_limits.py",
)
GROUP = "evsched_native"  # the shared library every compiled module links: evsched_native__mypyc.*.so
MANIFEST = "events/native.json"
PACKAGES = ("events", "projections", "scheduler", "replay")


def source_hash(path: Path) -> str:
    """What events/native.py compares: sha256 of a module's source bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pure_requested() -> bool:
    return os.environ.get("EVSCHED_PURE_PYTHON", "") not in ("", "0")


class BuildNative(build_ext):
    """build_ext that compiles NATIVE_MODULES with mypyc, or records why it did not."""

    def finalize_options(self) -> None:
        # Hashed before mypyc reads the sources: a module edited during the build's minute then
        # differs from its recorded hash, so its (stale) extension is never run.
        self._sources = {m[:-3].replace("/", "."): source_hash(ROOT / m) for m in NATIVE_MODULES}
        self._skip_reason = ""
        if pure_requested():
            self._skip_reason = "EVSCHED_PURE_PYTHON was set at build time"
        else:
            try:
                from mypyc.build import mypycify
            except ImportError:
                self._skip_reason = "mypyc is not installed"
            else:
                self._skip_reason = self._compiler_fault()
            if not self._skip_reason:
                try:
                    self.distribution.ext_modules = mypycify(list(NATIVE_MODULES), group_name=GROUP, opt_level="3")
                except BaseException as exc:  # mypy's type errors end in SystemExit (printed above)
                    self._skip_reason = f"mypyc failed ({exc!r}): see the type errors above"
        if self._skip_reason:
            self.distribution.ext_modules = []
        super().finalize_options()

    def _compiler_fault(self) -> str:
        """Why C cannot be compiled here ("" when it can): a one-line probe, before mypyc's minute of work."""
        from distutils.ccompiler import new_compiler
        from distutils.sysconfig import customize_compiler

        with tempfile.TemporaryDirectory() as tmp:
            probe = Path(tmp) / "probe.c"
            probe.write_text("int evsched_probe(void) { return 0; }\n")
            try:
                compiler = new_compiler(compiler=self.compiler)
                customize_compiler(compiler)
                compiler.compile([str(probe)], output_dir=tmp)
            except Exception as exc:  # CompileError, DistutilsExecError, a missing compiler
                return f"no working C compiler: {type(exc).__name__}: {exc}"
        return ""

    def run(self) -> None:
        if self._skip_reason:
            return self._pure(self._skip_reason)
        try:
            super().run()
        except Exception as exc:  # no compiler, a failing compiler (CC=/bin/false), a link error
            for path in self._built_paths():
                path.unlink(missing_ok=True)
            return self._pure(f"the C build failed: {type(exc).__name__}: {exc}")
        extensions = sorted(self.get_ext_fullname(ext.name) for ext in self.extensions)
        self._write({"build": "compiled", "compiler": "mypyc", "suffix": importlib.machinery.EXTENSION_SUFFIXES[0],
                     "extensions": extensions})
        return None

    def _built_paths(self) -> list[Path]:
        paths = []
        for ext in self.extensions:
            name = self.get_ext_fullname(ext.name)
            paths.append(Path(self.build_lib) / self.get_ext_filename(name))
            if self.inplace:
                paths.append(Path(self.get_ext_fullpath(name)))
        return paths

    def _pure(self, reason: str) -> None:
        bar = "*" * 78
        print(f"\n{bar}\nevsched: building the PURE-PYTHON core ({reason}).\n"
              f"Everything works; the core is about 1.7x slower than the compiled build.\n{bar}\n", file=sys.stderr)
        self._write({"build": "pure", "reason": reason})

    def _write(self, manifest: dict[str, object]) -> None:
        manifest["sources"] = self._sources
        text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
        in_tree = bool(self.inplace or getattr(self, "editable_mode", False))
        for target in (Path(self.build_lib) / MANIFEST, *([ROOT / MANIFEST] if in_tree else [])):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        if in_tree:  # extensions of an earlier build that this one did not make (all, when pure) go
            keep = {str(ROOT / (name.replace(".", "/") + manifest["suffix"]))
                    for name in manifest.get("extensions", [])} if manifest["build"] == "compiled" else set()
            old = [*ROOT.glob("*__mypyc.*.so"), *(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.so"))]
            for stale in old:
                if str(stale) not in keep:
                    stale.unlink()


class NativeDistribution(Distribution):
    def has_ext_modules(self) -> bool:
        return True  # decided in BuildNative; a platform wheel either way (it may hold extensions)


setup(distclass=NativeDistribution, cmdclass={"build_ext": BuildNative})
