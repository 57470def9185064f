"""Derived views kept incrementally up to date as events are applied, each rebuildable from scratch."""
