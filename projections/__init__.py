"""Derived views kept up to date as events are applied (each rebuildable from scratch) and the sort policies."""

import events.native  # noqa: F401  (first: decides compiled or pure Python before any core module loads)
