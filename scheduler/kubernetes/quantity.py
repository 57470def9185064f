"""Kubernetes resource quantities (``"500m"``, ``"4Gi"``, ``"1.5"``, ``"2e3"``) → evsched's integers.

Kubernetes' ``resource.Quantity`` syntax: a signed decimal number with a binary suffix (Ki … Ei),
a decimal suffix (n, u, m, "", k, M, G, T, P, E) or a decimal exponent (e3, E-2). ``cpu`` becomes
``vcore`` in milli-cores, everything else (memory and ephemeral storage in bytes, pods, extended
resources) its value; a fraction rounds up, as Kubernetes' ``Value()`` and ``MilliValue()`` do.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1), "k": Decimal("1e3"),
            "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"), "P": Decimal("1e15"), "E": Decimal("1e18")}
_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
MAX_TEXT = 64  # Kubernetes' own quantities are far shorter; a longer one is refused unread


class QuantityError(ValueError):
    """Not a Kubernetes quantity."""


def parse_quantity(text: str) -> Decimal:
    """The exact value of a Kubernetes quantity.

    >>> [str(parse_quantity(q)) for q in ("500m", "4Gi", "1.5", "2e3", "1k")]
    ['0.500', '4294967296', '1.5', '2E+3', '1E+3']
    """
    match = _QUANTITY.match(text.strip()) if len(text) <= MAX_TEXT else None
    if match is None:
        raise QuantityError(f"{text[:MAX_TEXT]!r} is not a Kubernetes quantity")
    number, suffix = match.group(1), match.group(2) or ""
    try:
        value = Decimal(number)
    except InvalidOperation as exc:  # the pattern admits only numbers; kept for the type checker's sake
        raise QuantityError(f"{text!r} is not a Kubernetes quantity") from exc
    if suffix in _BINARY:
        return value * _BINARY[suffix]
    if suffix in _DECIMAL:
        return value * _DECIMAL[suffix]
    return value.scaleb(int(suffix[1:]))


def resource_name(kubernetes_name: str) -> str:
    """YuniKorn's names: ``cpu`` is ``vcore``; every other resource keeps its Kubernetes name."""
    return "vcore" if kubernetes_name == "cpu" else kubernetes_name


def to_units(kubernetes_name: str, text: str) -> int:
    """One quantity in evsched's units: milli-cores for cpu, the value (rounded up) for the rest.

    >>> to_units("cpu", "1.5"), to_units("memory", "1Gi"), to_units("cpu", "100m"), to_units("pods", "110")
    (1500, 1073741824, 100, 110)
    """
    value = parse_quantity(text)
    if value < 0:
        raise QuantityError(f"{kubernetes_name}: {text!r} is negative")
    scaled = value * 1000 if kubernetes_name == "cpu" else value
    return math.ceil(scaled)


def resources_of(quantities: dict[str, str] | None) -> dict[str, int]:
    """A Kubernetes resource list (``{"cpu": "500m", "memory": "1Gi"}``) in evsched's names and units."""
    out: dict[str, int] = {}
    for name, text in (quantities or {}).items():
        out[resource_name(name)] = to_units(name, str(text))
    return out
