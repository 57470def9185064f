"""The compiled fast paths of the resource arithmetic (dicts iterated natively, two shares
ordered without a sort call, int division only where a double holds both ints exactly)
give what the plain formulas give, for dicts and for other mappings, up to the largest
quantity an input may carry."""

from __future__ import annotations

from types import MappingProxyType

from hypothesis import given, settings
from hypothesis import strategies as st

from events.resources import MAX_QUANTITY, add_into, dominates, is_positive, sub_into
from projections.policies import usage_share

names = st.sampled_from(["vcore", "memory", "gpu", "pods"])
quantity = st.one_of(st.integers(min_value=-3, max_value=3),
                     st.integers(min_value=-MAX_QUANTITY, max_value=MAX_QUANTITY),
                     st.integers(min_value=2**53 - 3, max_value=2**53 + 3))
vector = st.dictionaries(names, quantity, max_size=4)
guarantee = st.dictionaries(names, st.one_of(st.integers(min_value=0, max_value=3),
                                             st.integers(min_value=0, max_value=MAX_QUANTITY)), max_size=4)


def share_formula(used: dict[str, int], guaranteed: dict[str, int]) -> tuple[float, ...]:
    parts = [q / guaranteed[n] if guaranteed.get(n) else float(q) for n, q in used.items() if q]
    return tuple(sorted(parts, reverse=True))


def dominates_formula(left: dict[str, int], right: dict[str, int]) -> bool:
    keys = left.keys() | right.keys()
    return all(left.get(k, 0) >= right.get(k, 0) for k in keys) and any(left.get(k, 0) > right.get(k, 0) for k in keys)


@settings(max_examples=500, deadline=None)
@given(vector, guarantee)
def test_usage_share_is_the_formula(used: dict[str, int], guaranteed: dict[str, int]) -> None:
    expected = share_formula(used, guaranteed)
    assert usage_share(used, guaranteed) == expected
    assert usage_share(MappingProxyType(used), MappingProxyType(guaranteed)) == expected


@settings(max_examples=500, deadline=None)
@given(vector, vector)
def test_dominates_and_is_positive_are_the_formulas(left: dict[str, int], right: dict[str, int]) -> None:
    assert dominates(left, right) == dominates_formula(left, right)
    assert dominates(MappingProxyType(left), MappingProxyType(right)) == dominates_formula(left, right)
    assert is_positive(left) == any(v > 0 for v in left.values())
    assert is_positive(MappingProxyType(left)) == is_positive(left)


@settings(max_examples=300, deadline=None)
@given(vector, vector)
def test_add_and_sub_into_keep_zeros_out(target: dict[str, int], delta: dict[str, int]) -> None:
    target = {k: v for k, v in target.items() if v}
    expected = {k: target.get(k, 0) + delta.get(k, 0) for k in target.keys() | delta.keys()}
    expected = {k: v for k, v in expected.items() if v}
    for as_given in (delta, MappingProxyType(delta)):
        added = dict(target)
        add_into(added, as_given)
        assert added == expected
        sub_into(added, as_given)
        assert added == target
