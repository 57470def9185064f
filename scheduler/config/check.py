"""``evsched config check``'s verdict on a configuration's bytes: (exit code, lines); the CLI reads the file."""

from __future__ import annotations

from events.display import printable_lines
from scheduler.config.errors import ConfigError
from scheduler.config.load import load_config
from scheduler.config.properties import property_problems
from scheduler.config.specs import QueueSpec


def _count(queue: QueueSpec) -> int:
    return 1 + sum(_count(kid) for kid in queue.children)


def check_config(data: bytes) -> tuple[int, list[str]]:
    """(0, [warnings…, "config OK: …"]) for a valid configuration, (1, reasons) otherwise; never raises.

    Stricter than the service (``scheduler.config.properties``): a property value YuniKorn would
    silently replace by its default is a reason here."""
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
