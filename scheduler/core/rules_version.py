"""Which rules versions this build's core can re-derive (the versions themselves: ``events.rules_version``)."""

from __future__ import annotations

from events.rules_version import KNOWN, LEGACY_RULES_VERSION, RULES_VERSION, rules_version_problem

IMPLEMENTED = frozenset({RULES_VERSION})  # versions whose cycles this build can re-derive

__all__ = ["IMPLEMENTED", "KNOWN", "LEGACY_RULES_VERSION", "RULES_VERSION", "rules_version_problem"]
