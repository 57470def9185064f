"""Human units for resource quantities: ``274877906944`` memory → ``256 GiB``, ``64000`` vcore → ``64 cores``.

The log and every JSON output carry exact integers: ``vcore`` in milli-cores, ``memory``
(and ``ephemeral-storage``, ``hugepages-*``) in bytes, every other resource a plain count.
People read the same numbers in the units they wrote them in a queue configuration
(``256Gi``, ``64``, ``500m``). This module is the one place that turns the integers into
those words; it is pure, and ``raw=True`` keeps the exact integer everywhere (``--raw``).

Worked examples::

    >>> fmt_quantity("memory", 274877906944)       # the config said 256Gi
    '256 GiB'
    >>> fmt_quantity("memory", 2_000_000_000)       # the config said 2G: decimal units stay decimal
    '2 GB'
    >>> fmt_quantity("memory", 1536 * 2**20)        # neither: 3 significant figures of the largest unit
    '1.5 GiB'
    >>> fmt_quantity("memory", 1000), fmt_quantity("memory", 11)
    ('1 kB', '11 B')
    >>> fmt_quantity("vcore", 64000), fmt_quantity("vcore", 1000), fmt_quantity("vcore", 500)
    ('64 cores', '1 core', '500m')
    >>> fmt_quantity("vcore", 2500)                 # milli-cores that are not whole cores
    '2500m'
    >>> fmt_quantity("nvidia.com/gpu", 4), fmt_quantity("vcore", 64000, raw=True)
    ('4', '64000')
    >>> fmt_resources({"vcore": 64000, "memory": 274877906944, "pods": 0})
    'memory 256 GiB, vcore 64 cores'
    >>> fmt_resources({}), fmt_resources({"vcore": 500}, raw=True)
    ('nothing', 'vcore 500')
"""

from __future__ import annotations

from collections.abc import Mapping

VCORE = "vcore"
_BINARY = (("EiB", 60), ("PiB", 50), ("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10))
_DECIMAL = (("EB", 18), ("PB", 15), ("TB", 12), ("GB", 9), ("MB", 6), ("kB", 3))


def is_bytes(name: str) -> bool:
    """Whether a resource type counts bytes (YuniKorn: memory, ephemeral-storage, hugepages-*)."""
    return name in ("memory", "ephemeral-storage") or name.startswith("hugepages-")


def fmt_bytes(value: int) -> str:
    """Bytes as a whole number (< 1024) of a binary unit (``256 GiB``) or else of a decimal one (``2 GB``),
    else 3 significant figures of the largest binary unit they reach (``1.5 GiB``)."""
    if value < 0:
        return "-" + fmt_bytes(-value)
    for units, base in ((_BINARY, 2), (_DECIMAL, 10)):
        for unit, power in units:
            size = base**power
            if value >= size and value % size == 0 and value // size < 1024:
                return f"{value // size} {unit}"
    for unit, shift in _BINARY:
        if value >= 1 << shift:
            return f"{value / (1 << shift):.3g} {unit}"
    return f"{value} B"


def fmt_vcore(milli: int) -> str:
    """Milli-cores as whole cores (``64 cores``, ``1 core``) or, when not whole, as ``500m``."""
    if milli % 1000 == 0:
        cores = milli // 1000
        return f"{cores} core" if abs(cores) == 1 else f"{cores} cores"
    return f"{milli}m"


def fmt_quantity(name: str, value: int, *, raw: bool = False) -> str:
    """One quantity of resource ``name`` in human units (``raw``: the exact integer)."""
    if raw:
        return str(value)
    if name == VCORE:
        return fmt_vcore(value)
    if is_bytes(name):
        return fmt_bytes(value)
    return str(value)


def fmt_resources(res: Mapping[str, int], *, raw: bool = False) -> str:
    """``{vcore: 1000, memory: 2**30}`` → ``memory 1 GiB, vcore 1 core`` (sorted, zeros left out; ``nothing``)."""
    items = [f"{k} {fmt_quantity(k, v, raw=raw)}" for k, v in sorted(res.items()) if v]
    return ", ".join(items) if items else "nothing"
