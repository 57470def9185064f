"""The yunikorn-core Go harness for tests: built once by `make conformance-harness` (patched clock and all)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "conformance" / ".build" / "yunikorn-harness"


def built_harness(needed_for: str) -> Path:
    """The harness, built if missing or stale; no Go: a failure with CI=true, else a skip naming ``needed_for``."""
    if shutil.which("go") is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs Go for {needed_for} (no `go` on the PATH)")
        pytest.skip(f"no Go toolchain on the PATH: {needed_for} needs the yunikorn-core harness")
    subprocess.run(["make", "-s", "conformance-harness"], cwd=ROOT, check=True, timeout=280)
    return HARNESS
