"""Known differences between evsched and yunikorn-core v1.5.2, by scenario family, with their cause.

A family listed here is left out of ``make conformance`` and of the test sample unless
asked for (``--include-known``); docs/conformance.md keeps the same list with details.
"""

from __future__ import annotations

KNOWN: dict[str, str] = {}
