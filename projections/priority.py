"""Priority arithmetic: int32 bounds, clamping, and a queue's adjusted (fenced/offset) priority.

Worked example (YuniKorn's own queue priority test): a leaf with offset 3 under a parent
with offset 5, one pending ask at priority 0:

>>> leaf = adjusted(0, fence=False, offset=3)
>>> leaf, adjusted(leaf, fence=False, offset=5)
(3, 8)
>>> leaf = adjusted(5, fence=False, offset=3)   # an ask at priority 5 arrives
>>> leaf, adjusted(leaf, fence=False, offset=5)
(8, 13)
>>> adjusted(5, fence=True, offset=3)           # a fenced leaf always shows its offset
3
>>> adjusted(MIN_PRIORITY, fence=True, offset=3)  # nothing pending: no offset, no fence
-2147483648
"""

from __future__ import annotations

from typing import Final

MIN_PRIORITY: Final = -(2**31)
MAX_PRIORITY: Final = 2**31 - 1


def clamp_int32(value: int) -> int:
    """Clamp to the int32 range, as YuniKorn does when offsets overflow."""
    if value > MAX_PRIORITY:
        return MAX_PRIORITY
    if value < MIN_PRIORITY:
        return MIN_PRIORITY
    return value


def in_int32(value: int) -> bool:
    """True when value is a valid int32."""
    return MIN_PRIORITY <= value <= MAX_PRIORITY


def adjusted(raw: int, *, fence: bool, offset: int) -> int:
    """The priority a queue shows its parent, given its raw (max of children/apps) priority."""
    if raw == MIN_PRIORITY:
        return MIN_PRIORITY
    if fence:
        return offset
    return clamp_int32(raw + offset)
