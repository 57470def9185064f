"""The repository documents itself: nothing committed points outside it (``../shared``, ``/work/shared``), the docs
link only to files that exist, and the references list what the code has — every reason code of
``input.rejected``, every YuniKorn key the config model accepts, every ``evsched`` command."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from scheduler.cli.main import build_parser
from scheduler.config.model import RawChildTemplate, RawConfig, RawLimit, RawPartition, RawQueue, RawResources

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _comment_in_tests(path: str, text: str, match: int) -> bool:
    """A test's own comment may mention the outside path (to say it must not be used)."""
    return path.startswith("tests/") and "#" in text[:match]


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_nothing_committed_points_outside_the_repository() -> None:
    proc = subprocess.run(["git", "grep", "-n", "-e", r"\.\./shared", "-e", "/work/shared"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    hits = []
    for line in proc.stdout.splitlines():
        path, _, rest = line.partition(":")
        _, _, text = rest.partition(":")
        found = re.search(r"\.\./shared|/work/shared", text)
        if found and path != "tests/unit/test_docs_self_contained.py" and not _comment_in_tests(path, text,
                                                                                                 found.start()):
            hits.append(line[:160])
    assert not hits, "references outside the repository:\n" + "\n".join(hits)


def test_links_in_readme_and_docs_resolve() -> None:
    broken = []
    for page in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} → {target}")
    assert not broken, broken


def _reason_codes() -> set[str]:
    codes: set[str] = set()
    for source in [*ROOT.glob("events/*.py"), *ROOT.glob("scheduler/core/*.py")]:
        text = source.read_text()
        codes |= set(re.findall(r'\b(?:Rejected|PriorityError|reject|InputRejected)\([^")]*?"([a-z][a-z-]+)"', text))
        codes |= set(re.findall(r"reason=\"([a-z][a-z-]+)\"", text))
    return codes


def test_every_reason_code_is_in_the_event_reference() -> None:
    page = (DOCS / "event-reference.md").read_text()
    codes = _reason_codes()
    assert {"duplicate", "unknown-queue", "acl-denied", "config-invalid"} <= codes  # the scan finds them
    missing = sorted(c for c in codes if f"`{c}`" not in page)
    assert not missing, f"reason codes not documented in docs/event-reference.md: {missing}"


def test_every_config_key_is_in_the_configuration_reference() -> None:
    page = (DOCS / "configuration.md").read_text()
    keys = set()
    for model in (RawConfig, RawPartition, RawQueue, RawResources, RawLimit, RawChildTemplate):
        keys |= set(model.model_fields)
    missing = sorted(k for k in keys if k not in page)
    assert not missing, f"YuniKorn keys not in docs/configuration.md: {missing}"


def test_every_command_is_documented() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    commands = set(sub.choices)  # type: ignore[arg-type]
    text = (ROOT / "README.md").read_text() + "".join(p.read_text() for p in DOCS.glob("*.md"))
    missing = sorted(c for c in commands if f"evsched {c}" not in text)
    assert not missing, f"commands missing from README and docs: {missing}"


def test_source_comments_cite_the_committed_contract() -> None:
    """Comments cite docs/contract.md §n (a section that exists), never a document outside the repository."""
    sections = set(re.findall(r"^## §(\d+)", (DOCS / "contract.md").read_text(encoding="utf-8"), re.M))
    stale, missing = [], []
    for package in ("events", "projections", "scheduler", "replay", "tests", "conformance", "benchmarks"):
        for path in sorted((ROOT / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            where = path.relative_to(ROOT)
            stale += [f"{where}: {m.group(0)}" for m in re.finditer(r"\bCONTRACT\b|\bDESIGN\b", text)
                      if path.name != "test_docs_self_contained.py"]
            missing += [f"{where}: §{n}" for n in re.findall(r"docs/contract\.md §(\d+)", text) if n not in sections]
    assert stale == [] and missing == []


def test_every_source_file_the_docs_name_exists() -> None:
    """A `path/to/module.py` in the docs resolves from the repository (or the page); a bare `module.py`
    names a module the tree has somewhere (the page names its package nearby)."""
    ours = {path.name for package in ("events", "projections", "scheduler", "replay", "tests", "benchmarks",
                                      "conformance") for path in (ROOT / package).rglob("*.py")}
    missing = []
    for page in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        for name in re.findall(r"`([A-Za-z0-9_./-]+\.py)`", page.read_text(encoding="utf-8")):
            found = (ROOT / name).exists() or (page.parent / name).exists() or ("/" not in name and name in ours)
            if not found:
                missing.append(f"{page.relative_to(ROOT)}: {name}")
    assert missing == []


def test_native_md_counts_the_compiled_modules() -> None:
    """docs/native.md says how many modules are compiled: setup.py's ``NATIVE_MODULES``, whatever was added since."""
    from tests.pure_selection import native_modules

    stated = re.search(r"`NATIVE_MODULES` in `setup.py` \((\d+) modules", (DOCS / "native.md").read_text())
    assert stated is not None and int(stated.group(1)) == len(native_modules(ROOT))


def test_open_log_is_the_one_place_a_kafka_log_is_built() -> None:
    """docs/architecture.md: ``open_log`` is the one place the product builds a ``KafkaLog`` (a call of
    it anywhere else below the CLI would take its own subset of the settings)."""
    builders = []
    for package in ("events", "projections", "scheduler", "replay"):
        for path in sorted((ROOT / package).rglob("*.py")):
            calls = [n.func for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.Call)]
            if any(getattr(func, "id", getattr(func, "attr", "")) == "KafkaLog" for func in calls):
                builders.append(str(path.relative_to(ROOT)))
    assert builders == ["events/log/open.py"]
    assert "`events.log.open.open_log(settings)` is the one place a log is opened from settings" in (
        DOCS / "architecture.md").read_text(encoding="utf-8")
