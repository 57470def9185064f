"""``--config F``: the queue configuration a command names, loaded or the command exits 1 with every reason."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import NoReturn

from scheduler.config import ConfigError, SchedulerConfig, check_config, load_config
from scheduler.config.properties import property_problems


def load_config_arg(path: str | None) -> SchedulerConfig | None:
    """The config named by ``--config``, or None; exits 1 with every reason when invalid (a property
    value included: ``scheduler.config.properties``), warns of property keys nothing reads."""
    if path is None:
        return None

    try:
        with open(path, "rb") as fh:
            text = fh.read()
    except OSError as exc:
        print(f"evsched: cannot read config {path}: {exc.strerror}", file=sys.stderr)
        raise SystemExit(1) from None
    try:
        config = load_config(text)
    except ConfigError as exc:
        _invalid(path, exc.reasons)
    errors, warnings = property_problems(config)  # what YuniKorn would silently replace by a default
    if errors:
        _invalid(path, errors)
    for warning in warnings:
        print(f"evsched: config {path}: warning: {warning}", file=sys.stderr)
    return config


def _invalid(path: str, reasons: Sequence[str]) -> NoReturn:
    print(f"evsched: config {path} is invalid:", file=sys.stderr)
    for reason in reasons:
        print(f"  - {reason}", file=sys.stderr)
    raise SystemExit(1) from None


def check_config_file(path: str) -> tuple[int, list[str]]:
    """``evsched config check F``: (0, ["config OK: …"]) for a valid file, (1, reasons) otherwise; never raises."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return 1, [f"cannot read config file {path!r}: {exc.strerror or exc}"]
    return check_config(data)
