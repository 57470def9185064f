"""Resource quantities in YuniKorn's syntax: ``"2Gi"``, ``"500m"`` → internal integer units.

Grammar (YuniKorn ``resources.ParseQuantity`` / ``ParseVCore``), applied after trimming
surrounding whitespace::

    <quantity> ::= <digits> <spaces>? <suffix>
    <suffix>   ::= "" | k | M | G | T | P | E          (10^3 … 10^18)
                 | Ki | Mi | Gi | Ti | Pi | Ei          (2^10 … 2^60)
                 | m                                    (vcore only: milli-cores)

``vcore`` is counted in milli-cores: ``"1"`` → 1000, ``"500m"`` → 500, ``"2k"`` → 2,000,000.
Every other resource is a plain count: ``"1G"`` → 10^9, ``"1Gi"`` → 2^30. There are no
fractions (``"1.5"`` is invalid), no signs (``"-1"`` and ``"+1"`` are invalid), and the
result must fit in a signed 64-bit integer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from events.gostrings import trim_space
from events.units import VCORE

INT64_MAX = (1 << 63) - 1

# Go RE2 `\s` is ASCII [\t\n\f\r ]; `[0-9]` is ASCII digits only.
_LEGAL = re.compile(r"([0-9]+)[\t\n\f\r ]*((?:[mkKMGTPE]i?)?)")

_MULTIPLIERS: Mapping[str, int] = {
    "": 1,
    "m": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 1 << 10,
    "Mi": 1 << 20,
    "Gi": 1 << 30,
    "Ti": 1 << 40,
    "Pi": 1 << 50,
    "Ei": 1 << 60,
}


def parse_quantity(resource_name: str, value: object) -> int:
    """Parse one configured quantity of ``resource_name`` into internal units.

    ``value`` is a string or a (non-bool) int. Raises ValueError with a short reason.

    >>> parse_quantity("vcore", 1), parse_quantity("vcore", "500m"), parse_quantity("memory", "1Gi")
    (1000, 500, 1073741824)
    """
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"invalid quantity {value!r} for {resource_name!r}: expected a string or an integer")
    text = str(value)
    match = _LEGAL.fullmatch(trim_space(text))
    if match is None:
        raise ValueError(f"invalid quantity {text!r} for {resource_name!r}")
    digits = match.group(1)
    suffix = match.group(2)
    # Checked before int(): past 4,300 digits int() raises its own, confusing error.
    if len(digits.lstrip("0")) > len(str(INT64_MAX)) or int(digits) > INT64_MAX:
        raise ValueError(f"invalid quantity {text!r} for {resource_name!r}: overflow")
    milli = resource_name == VCORE
    scale = _MULTIPLIERS.get(suffix)
    if scale is None or (suffix == "m" and not milli):
        allowed = "k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei" + (", m" if milli else "")
        raise ValueError(
            f"invalid quantity {text!r} for {resource_name!r}: invalid suffix {suffix!r} (allowed: {allowed})"
        )
    result = int(digits) * scale
    if milli and suffix != "m":
        result *= 1000
    if result > INT64_MAX:
        raise ValueError(f"invalid quantity {text!r} for {resource_name!r}: overflow")
    return result


def parse_resources(values: Mapping[str, object]) -> dict[str, int]:
    """Parse a whole ``{resource: quantity}`` map; raises ValueError naming the first bad entry."""
    return {name: parse_quantity(name, raw) for name, raw in values.items()}
