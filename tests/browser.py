"""A real browser for page tests: Debian's Chromium driven by Playwright (no browser download).

``chromium_page()`` yields a Playwright page in headless Chromium. When the binary is
missing, it is installed from Debian's packages if this process may (root, apt-get);
otherwise the test skips with the reason — or fails under ``CI=true``, where a missing
browser must never pass as a skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.procs import in_ci

CANDIDATES = ("chromium", "chromium-browser", "/usr/bin/chromium")
# Flags for a closed network and a root sandbox (the machine has no route to Google's hosts).
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


def _unavailable(reason: str) -> None:
    if in_ci():
        pytest.fail(f"browser test: {reason} (CI: a missing browser fails the run)", pytrace=False)
    pytest.skip(f"browser test: {reason}")


def _find() -> str | None:
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def chromium_binary() -> str:
    """The Chromium executable, installed from Debian's packages when absent and allowed."""
    found = _find()
    if found:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        _unavailable("no chromium binary, and this user cannot install Debian's 'chromium' package")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium"]
    done = subprocess.run(install, env=env, capture_output=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:  # a fresh machine may need the package lists first
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, stdin=subprocess.DEVNULL)
        done = subprocess.run(install, env=env, capture_output=True, stdin=subprocess.DEVNULL)
    found = _find()
    if found is None:
        _unavailable(f"installing Debian's chromium failed: {done.stderr.decode(errors='replace')[-800:]}")
    assert found is not None
    return found


@contextmanager
def chromium_page() -> Iterator[Any]:
    """A fresh page in headless Chromium (its own profile directory), closed afterwards."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _unavailable(f"playwright is not installed ({exc})")
    binary = chromium_binary()
    with tempfile.TemporaryDirectory(prefix="evsched-chromium-") as profile, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile, executable_path=binary, headless=True, args=FLAGS, viewport={"width": 1400, "height": 1000}
        )
        try:
            page = context.new_page()
            page.set_default_timeout(60_000)
            yield page
        finally:
            context.close()
