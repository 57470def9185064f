"""``evsched config check F.yaml``: read one file, validate it, return (exit code, lines)."""

from __future__ import annotations

from events.display import printable_lines
from scheduler.config.errors import ConfigError
from scheduler.config.load import load_config
from scheduler.config.properties import property_problems
from scheduler.config.specs import QueueSpec


def _count(queue: QueueSpec) -> int:
    return 1 + sum(_count(kid) for kid in queue.children)


def check_config_file(path: str) -> tuple[int, list[str]]:
    """(0, [warnings…, "config OK: …"]) for a valid file, (1, reasons) otherwise; never raises.

    Stricter than the service (``scheduler.config.properties``): a property value YuniKorn would
    silently replace by its default is a reason here."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return 1, [f"cannot read config file {path!r}: {exc.strerror or exc}"]
    try:
        config = load_config(data)
    except ConfigError as exc:
        return 1, printable_lines(list(exc.reasons))
    errors, warnings = property_problems(config)
    if errors:
        return 1, printable_lines(errors + [f"warning: {w}" for w in warnings])
    queues = sum(_count(part.root) for part in config.partitions)
    ok = f"config OK: {len(config.partitions)} partitions, {queues} queues, checksum {config.checksum}"
    return 0, [*printable_lines([f"warning: {w}" for w in warnings]), ok]
