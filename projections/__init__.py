"""Derived views kept incrementally up to date as events are applied, each rebuildable from scratch."""

import events.native  # noqa: F401  (first: decides compiled or pure Python before any core module loads)
