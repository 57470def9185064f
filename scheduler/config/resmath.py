"""Resource-map arithmetic for validation, as YuniKorn's ``resources`` package defines it.

A resource is a ``{type: quantity}`` dict. In a *limit* (max, or a guarantee used as a
bound) a type that is not named is unlimited.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from events.units import fmt_quantity

Resource = Mapping[str, int]
INT64_MAX = (1 << 63) - 1


def fits_max_undef(larger: Resource, smaller: Resource) -> bool:
    """``FitInMaxUndef``: every type of ``smaller`` named in ``larger`` is ≤ it (negatives as 0).

    >>> fits_max_undef({"memory": 5}, {"memory": 5, "vcore": 99})
    True
    """
    return all(value <= max(0, larger[name]) for name, value in smaller.items() if name in larger)


def add_all(resources: Iterable[Resource]) -> dict[str, int]:
    """Sum of resources, saturating at int64 max like YuniKorn's ``AddTo``."""
    out: dict[str, int] = {}
    for res in resources:
        for name, value in res.items():
            out[name] = min(INT64_MAX, out.get(name, 0) + value)
    return out


def is_zero(resource: Resource) -> bool:
    """``IsZero``: empty or every quantity 0."""
    return all(value == 0 for value in resource.values())


def strictly_positive(resource: Resource) -> bool:
    """``StrictlyGreaterThanZero``: no negative quantity and at least one above 0."""
    return all(v >= 0 for v in resource.values()) and any(v > 0 for v in resource.values())


def fmt(resource: Resource) -> str:
    """``{memory: 256 GiB, vcore: 1 core}`` with sorted types, in human units (``events.units``)."""
    return "{" + ", ".join(f"{name}: {fmt_quantity(name, resource[name])}" for name in sorted(resource)) + "}"
