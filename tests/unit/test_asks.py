"""AskList (an app's sorted pending asks) against a from-scratch sort after random adds and removes."""

from __future__ import annotations

import random

import pytest

from scheduler.core.asks import AskList
from scheduler.core.objects import Ask


@pytest.mark.parametrize("seed", range(8))
def test_ask_list_matches_a_from_scratch_sort_after_random_adds_and_removes(seed: int) -> None:
    rng = random.Random(seed)
    asks = AskList(load=3)  # tiny blocks: splits and emptied blocks happen often
    held: list[Ask] = []
    for seq in range(400):
        if held and rng.random() < 0.4:
            victim = held.pop(rng.randrange(len(held)))
            asks.remove(victim)
        else:  # few priorities and creation times: most order is decided by the later fields
            ask = Ask("app", f"a{seq}", {"vcore": 1}, rng.randrange(-2, 3), rng.randrange(4), seq)
            asks.add(ask)
            held.append(ask)
        if seq % 37 == 0 or seq == 399:
            expected = sorted(held, key=Ask.sort_key)
            assert list(asks) == expected
            assert len(asks) == len(expected) and bool(asks) == bool(expected)
            assert [asks[i] for i in range(len(expected))] == expected
            if expected:
                assert asks[-1] is expected[-1]


def test_removing_an_ask_not_in_the_list_is_an_error_and_changes_nothing() -> None:
    asks = AskList()
    kept = Ask("app", "kept", {}, 1, 0, 1)
    asks.add(kept)
    twin = Ask("app", "twin", {}, 1, 0, 1)  # same sort key, a different ask
    with pytest.raises(ValueError, match="twin"):
        asks.remove(twin)
    with pytest.raises(IndexError):
        asks[1]
    assert list(asks) == [kept]
