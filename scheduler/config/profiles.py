"""Rules profiles: which YuniKorn generation's scheduling rules a partition runs under.

The partition-level key ``rules`` (evsched's extension of YuniKorn's queue YAML; YuniKorn
itself has no such key) picks one. ``yunikorn-1.5`` (the default, and every log written
before the key existed) is YuniKorn v1.5.2; ``yunikorn-1.9`` is yunikorn-core v1.9.0
(docs/semantics.md, *Rules profiles*). The key is part of the queue configuration, so a
change of profile is a ``config.updated`` on the admin channel, recorded in the log like any
rules change, and every cycle records the profiles it ran under (``cycle.completed``).
"""

from __future__ import annotations

from enum import Enum


class RulesProfile(Enum):
    """A partition's rules profile (``partitions[].rules``)."""

    YUNIKORN_1_5 = "yunikorn-1.5"
    YUNIKORN_1_9 = "yunikorn-1.9"

    @classmethod
    def parse(cls, value: str) -> RulesProfile:
        """The profile a (validated) ``rules`` value names; empty is the default.

        >>> RulesProfile.parse(""), RulesProfile.parse("yunikorn-1.9")
        (<RulesProfile.YUNIKORN_1_5: 'yunikorn-1.5'>, <RulesProfile.YUNIKORN_1_9: 'yunikorn-1.9'>)
        """
        return _BY_VALUE[value] if value else DEFAULT_PROFILE


DEFAULT_PROFILE = RulesProfile.YUNIKORN_1_5
_BY_VALUE = {member.value: member for member in RulesProfile}
PROFILE_NAMES = tuple(_BY_VALUE)


def profile_problem(value: str) -> str | None:
    """Why ``value`` names no profile (None when it does, or is empty: the default)."""
    if not value or value in _BY_VALUE:
        return None
    return f"unknown rules profile {value!r} (use {' or '.join(PROFILE_NAMES)})"
