"""The yunikorn-core Go harness for tests: built once by `make conformance-harness` (patched clock and all)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "conformance" / ".build" / "yunikorn-harness"
HARNESS_19 = ROOT / "conformance" / ".build" / "yunikorn-harness-1.9"  # against yunikorn-core v1.9.0


def built_harness(needed_for: str, profile: str = "yunikorn-1.5") -> Path:
    """The harness (against v1.9.0 for ``profile`` yunikorn-1.9), built if missing or stale; no Go:
    a failure with CI=true, else a skip naming ``needed_for``."""
    if shutil.which("go") is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs Go for {needed_for} (no `go` on the PATH)")
        pytest.skip(f"no Go toolchain on the PATH: {needed_for} needs the yunikorn-core harness")
    target, built = ("conformance-harness-1.9", HARNESS_19) if profile == "yunikorn-1.9" else (
        "conformance-harness", HARNESS)
    subprocess.run(["make", "-s", target], cwd=ROOT, check=True, timeout=280)
    return built
