"""Atheris harness: coverage-guided fuzzing of the YuniKorn config loader.

Not collected by pytest; a long, optional run::

    .venv/bin/python tests/fuzz/fuzz_config.py -max_total_time=600 -rss_limit_mb=1024 tests/fuzz/corpus/config

``load_config`` must return a config or raise ``ConfigError``; any other exception is a
finding, and so is memory over ``-rss_limit_mb`` (an expansion the budgets missed).
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports(include=["scheduler.config"]):
    from scheduler.config import ConfigError, load_config


def one_input(data: bytes) -> None:
    try:
        load_config(data)
    except ConfigError as exc:
        assert exc.reasons


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
