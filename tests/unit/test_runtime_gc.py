"""The CLI's GC tuning applies inside a command and is undone after it, even when it fails."""

from __future__ import annotations

import gc

import pytest

from scheduler.service.gc_thresholds import GC_THRESHOLDS, tuned_gc


def test_thresholds_apply_inside_and_come_back_after() -> None:
    before = gc.get_threshold()
    with tuned_gc():
        assert gc.get_threshold() == GC_THRESHOLDS
    assert gc.get_threshold() == before


def test_thresholds_come_back_after_an_exception() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), tuned_gc((1234, 5, 6)):
        assert gc.get_threshold() == (1234, 5, 6)
        raise RuntimeError("boom")
    assert gc.get_threshold() == before
