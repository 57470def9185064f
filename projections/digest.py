"""The state digest: sha256 of the canonical JSON of the state form (docs/contract.md §6)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson


def canonical(obj: Mapping[str, Any]) -> bytes:
    """Canonical JSON bytes: sorted keys, no whitespace."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


def digest(state_form: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of the canonical state form; equal states give equal digests."""
    return "sha256:" + hashlib.sha256(canonical(state_form)).hexdigest()
