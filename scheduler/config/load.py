"""Entry points: YAML text → validated, resolved ``SchedulerConfig``; the built-in default."""

from __future__ import annotations

import hashlib

from pydantic import ValidationError

from scheduler.config.error_paths import schema_reasons
from scheduler.config.errors import ConfigError
from scheduler.config.model import parse_raw
from scheduler.config.resolve import resolve_partition
from scheduler.config.specs import SchedulerConfig
from scheduler.config.structure import normalise
from scheduler.config.validate import validate
from scheduler.config.yamltree import decode_text, parse_tree

DEFAULT_CONFIG_YAML = """\
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: default
"""


def load_config(text: str | bytes) -> SchedulerConfig:
    """Parse, validate and resolve a YuniKorn queue configuration.

    Raises ConfigError listing every reason found. ``checksum`` is the sha256 (lower-case
    hex) of the exact UTF-8 bytes of ``text``.
    """
    decoded, raw_bytes = decode_text(text)
    tree = parse_tree(decoded)
    try:
        config = parse_raw(tree or {})
    except ValidationError as exc:
        raise ConfigError(schema_reasons(exc, tree or {})) from None
    partitions = [normalise(index, part) for index, part in enumerate(config.partitions or [])]
    reasons = validate(config, partitions)
    if reasons:
        raise ConfigError(reasons)
    return SchedulerConfig(
        partitions=tuple(resolve_partition(part) for part in partitions),
        checksum=hashlib.sha256(raw_bytes).hexdigest(),
        yaml=decoded,
    )


def default_config() -> SchedulerConfig:
    """Partition ``default``: root (``submitacl: '*'``) with one leaf, ``root.default``."""
    return load_config(DEFAULT_CONFIG_YAML)
