"""Resource vectors: ``{name: non-negative int}`` maps in internal units, and their arithmetic.

Zero entries are always left out, so two equal vectors are equal dicts and serialise to
the same bytes. ``memory`` is in bytes, ``vcore`` in milli-cores, anything else a count.
"""

from __future__ import annotations

from collections.abc import Mapping

Resources = dict[str, int]
ResourcesView = Mapping[str, int]

MAX_QUANTITY = 2**63 - 1


def normalized(res: ResourcesView) -> Resources:
    """Copy without zero entries, keys sorted (so equal vectors serialise identically)."""
    return {k: res[k] for k in sorted(res) if res[k]}


def add_into(target: Resources, delta: ResourcesView) -> None:
    """``target += delta`` in place, keeping zero entries out."""
    if isinstance(delta, dict):  # the usual case: compiled, a typed dict iterates without method calls
        typed: Resources = delta
        for k, v in typed.items():
            nv = target.get(k, 0) + v
            if nv:
                target[k] = nv
            else:
                target.pop(k, None)
        return
    for k, v in delta.items():
        nv = target.get(k, 0) + v
        if nv:
            target[k] = nv
        else:
            target.pop(k, None)


def sub_into(target: Resources, delta: ResourcesView) -> None:
    """``target -= delta`` in place, keeping zero entries out (results may go negative)."""
    if isinstance(delta, dict):  # as in add_into
        typed: Resources = delta
        for k, v in typed.items():
            nv = target.get(k, 0) - v
            if nv:
                target[k] = nv
            else:
                target.pop(k, None)
        return
    for k, v in delta.items():
        nv = target.get(k, 0) - v
        if nv:
            target[k] = nv
        else:
            target.pop(k, None)


def fits(request: ResourcesView, available: ResourcesView) -> bool:
    """True when every requested quantity is available (missing types count as 0)."""
    return all(v <= available.get(k, 0) for k, v in request.items())


def is_positive(res: ResourcesView) -> bool:
    """True when any component is greater than zero."""
    if isinstance(res, dict):  # as in add_into
        typed: Resources = res
        for v in typed.values():  # noqa: SIM110
            if v > 0:
                return True
        return False
    for v in res.values():  # noqa: SIM110 - a plain loop is faster than any(); this runs per ask
        if v > 0:
            return True
    return False


def dominates(left: ResourcesView, right: ResourcesView) -> bool:
    """True when every component of left >= right's and at least one is strictly greater.

    >>> dominates({"vcore": 2, "memory": 5}, {"vcore": 1, "memory": 5})
    True
    >>> dominates({"vcore": 2}, {"vcore": 1, "memory": 5})
    False
    """
    strictly = False
    if isinstance(left, dict) and isinstance(right, dict):  # as in add_into, and no key set built
        lefts: Resources = left
        rights: Resources = right
        for k, lv in lefts.items():
            rv = rights.get(k, 0)
            if lv < rv:
                return False
            if lv > rv:
                strictly = True
        for k, rv in rights.items():
            if k not in lefts:  # left's component is 0
                if rv > 0:
                    return False
                if rv < 0:
                    strictly = True
        return strictly
    for k in left.keys() | right.keys():
        lv, rv = left.get(k, 0), right.get(k, 0)
        if lv < rv:
            return False
        if lv > rv:
            strictly = True
    return strictly


def equals(left: ResourcesView | None, right: ResourcesView | None) -> bool:
    """YuniKorn's ``resources.Equals``: the same quantity of every type, a missing type read as 0;
    None (Go's nil) equals only None.

    >>> equals({"vcore": 1, "memory": 0}, {"vcore": 1}), equals({}, None), equals(None, None)
    (True, False, True)
    """
    if left is None or right is None:
        return left is None and right is None
    return all(left.get(k, 0) == right.get(k, 0) for k in left.keys() | right.keys())


def min_permissive(left: ResourcesView | None, right: ResourcesView | None) -> Resources | None:
    """YuniKorn's ``ComponentWiseMinPermissive``: per type the smaller value, a type on one side only
    keeps its value; None when both are None (Go's nil), so callers tell "no limit" from "limit 0".

    >>> min_permissive({"vcore": 4, "memory": 8}, {"vcore": 2, "pods": 1})
    {'vcore': 2, 'memory': 8, 'pods': 1}
    >>> min_permissive(None, None) is None, min_permissive(None, {"vcore": 1})
    (True, {'vcore': 1})
    """
    if left is None and right is None:
        return None
    if left is None:
        return dict(right or {})
    if right is None:
        return dict(left)
    out = dict(left)
    for name, value in right.items():
        out[name] = min(value, left[name]) if name in left else value
    return out

