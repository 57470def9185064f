"""Builds the log-clocked copy of yunikorn-core that the conformance harness links against.

yunikorn-core reads the wall clock; the harness must make it read the log. At build time
(``make conformance-harness``; nothing of YuniKorn is ever committed) this copies the
module the harness's go.mod requires out of the Go module cache into
``conformance/.build/yunikorn-core`` and rewrites it mechanically:

* in ``pkg/scheduler`` (not its tests) ``time.Now()``, ``time.Since(``, ``time.Until(``,
  ``time.AfterFunc(`` and ``*time.Timer`` become ``evclock``'s (the app state timers,
  ask and allocation times, the reservation and preemption delays);
* the partition manager's queue cleaner goroutine (``go manager.cleanRoot()``, every 10 s
  of wall time) becomes ``evclock.Every(manager.cleanRootInterval, …)``, run by the
  harness at log time, and the manager starts synchronously (``go
  part.partitionManager.Run()`` loses its ``go``), so the cleaner's ticks are armed at
  the config's log time, not whenever a goroutine gets to run;
* an app's terminated callback (leaving the partition once Completed) runs through
  ``evclock.Defer`` — by the harness, after the input or step that ended the app — not on
  a goroutine of its own;
* ``conformance/yunikorn/evclock/evclock.go`` goes in as ``pkg/evclock``.

It then writes ``yunikorn.mod``/``yunikorn.sum`` next to it: the harness's go.mod with a
``replace`` of yunikorn-core by the copy, for ``go build -modfile``. Every rewrite is
counted; a module whose sources no longer match the expected counts fails the build
rather than leave a wall-clock read behind.

``--profile yunikorn-1.9`` does the same for the harness's second build, against
yunikorn-core v1.9.0 (``go19.mod``; built with ``-tags yk19``): the copy goes to
``.build/yunikorn-1.9/yunikorn-core``, the module files to ``yunikorn-1.9.mod``/``.sum``.
v1.9.0 holds the same counts of every rewrite as v1.5.2.

    python3 conformance/patch_clock.py [--profile yunikorn-1.9]    # from the repository's root
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODULE_DIR = HERE / "yunikorn"
BUILD = HERE / ".build"
# rules profile -> (the harness's go.mod, go.sum for that core; where the patched copy goes; the module files' stem)
BUILDS = {
    "yunikorn-1.5": ("go.mod", "go.sum", BUILD / "yunikorn-core", "yunikorn"),
    "yunikorn-1.9": ("go19.mod", "go19.sum", BUILD / "yunikorn-1.9" / "yunikorn-core", "yunikorn-1.9"),
}
COPY = BUILDS["yunikorn-1.5"][2]
CORE = "github.com/apache/yunikorn-core"
EVCLOCK_IMPORT = f'"{CORE}/pkg/evclock"'

# (pattern, replacement): applied to every non-test .go file under pkg/scheduler.
CALLS = tuple((old, re.compile(r"(?<![\w.])" + re.escape(old)), new) for old, new in (
    ("time.Now()", "evclock.Now()"),
    ("time.Since(", "evclock.Since("),
    ("time.Until(", "evclock.Until("),
    ("time.AfterFunc(", "evclock.AfterFunc("),
    ("*time.Timer", "*evclock.Timer"),
))
# (old, new): exact rewrites of single statements.
STATEMENTS = (
    # the queue cleaner's goroutine (every 10 s of wall time) becomes a timer of the clock
    ("go manager.cleanRoot()",
     "evclock.Every(manager.cleanRootInterval, func() { manager.cleanQueues(manager.pc.root) })"),
    # the partition manager starts at once, so its cleaner is armed at the config's log time
    ("go part.partitionManager.Run()", "part.partitionManager.Run()"),
    # a Completed (Rejected, Failed) app leaves the partition on a goroutine (it holds the
    # app's lock): run by the harness when no lock is held instead, in order
    ("go sa.terminatedCallback(sa.ApplicationID)",
     "evclock.Defer(func() { sa.terminatedCallback(sa.ApplicationID) })"),
)
# What v1.5.2 holds (a changed module must be looked at again, not patched blindly).
EXPECTED = {"time.AfterFunc(": 2, "*time.Timer": 2, **{old: 1 for old, _ in STATEMENTS}}


def core_version(gomod: str = "go.mod") -> str:
    """The yunikorn-core version the harness's go.mod (``gomod``) requires."""
    found = re.search(rf"^\s*{re.escape(CORE)} (\S+)", (MODULE_DIR / gomod).read_text(), re.M)
    if found is None:
        raise SystemExit(f"patch_clock: {CORE} is not required in {MODULE_DIR / gomod}")
    return found.group(1)


def module_source(version: str) -> Path:
    """The module's directory in the Go module cache (downloaded first if missing)."""
    cache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout.strip()
    source = Path(cache) / f"{CORE}@{version}"
    if not source.is_dir():
        subprocess.run(["go", "mod", "download", f"{CORE}@{version}"], cwd=MODULE_DIR, check=True,
                       env={**os.environ, "GONOSUMDB": "github.com/apache"})
    return source


def with_import(text: str) -> str:
    """``text`` importing evclock, and no longer ``time`` when nothing else of it is used."""
    text = text.replace("import (\n", f"import (\n\t{EVCLOCK_IMPORT}\n", 1)
    body = text.split(")", 1)[1] if "import (" in text else text
    if not re.search(r"\btime\.", body):
        text = text.replace('\t"time"\n', "", 1)
    return text


def patch(copy: Path) -> dict[str, int]:
    """Rewrite the copy in place; how often each rewrite applied."""
    counts: dict[str, int] = {}
    for path in sorted((copy / "pkg" / "scheduler").rglob("*.go")):
        if path.name.endswith("_test.go"):
            continue
        text = original = path.read_text()
        for old, pattern, new in CALLS:
            text, n = pattern.subn(new, text)
            counts[old] = counts.get(old, 0) + n
        for old, new in STATEMENTS:
            counts[old] = counts.get(old, 0) + text.count(old)
            text = text.replace(old, new)
        if text != original:
            path.write_text(with_import(text))
    return counts


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    profile = args[1] if len(args) == 2 and args[0] == "--profile" else "yunikorn-1.5" if not args else ""
    if profile not in BUILDS:
        print(f"patch_clock: usage: patch_clock.py [--profile {'|'.join(BUILDS)}]", file=sys.stderr)
        return 2
    gomod, gosum, copy, stem = BUILDS[profile]
    version = core_version(gomod)
    source = module_source(version)
    if copy.exists():
        for path in copy.rglob("*"):
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
        shutil.rmtree(copy)
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, copy)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    counts = patch(copy)
    for what, want in EXPECTED.items():
        if counts.get(what, 0) != want:
            print(f"patch_clock: expected {want} of {what!r} in {CORE} {version}, found {counts.get(what, 0)}",
                  file=sys.stderr)
            return 1
    (copy / "pkg" / "evclock").mkdir()
    shutil.copy(MODULE_DIR / "evclock" / "evclock.go", copy / "pkg" / "evclock" / "evclock.go")
    (BUILD / f"{stem}.mod").write_text((MODULE_DIR / gomod).read_text() + f"\nreplace {CORE} => {copy}\n")
    shutil.copy(MODULE_DIR / gosum, BUILD / f"{stem}.sum")
    print(f"patch_clock: {CORE} {version} -> {copy} ({', '.join(f'{k} x{v}' for k, v in sorted(counts.items()))})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
