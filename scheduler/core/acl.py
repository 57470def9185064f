"""Submit/admin access control lists: ``"user1,user2 group1,group2"``, ``"*"`` for everyone.

>>> Acl.parse("alice,bob devs").admits("carol", ["devs"])
True
>>> Acl.parse(" ").admits("alice", [])
False
>>> Acl.parse("*").admits("anyone", [])
True
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from projections.queues import QueueNode


@dataclass(frozen=True)
class Acl:
    """A parsed ACL: everyone, or sets of users and groups."""

    everyone: bool
    users: frozenset[str]
    groups: frozenset[str]

    @classmethod
    def parse(cls, text: str | None) -> Acl:
        """Parse YuniKorn's ACL syntax; None, empty or a single space admits nobody."""
        if text is None:
            return cls(False, frozenset(), frozenset())
        if text.strip() == "*":
            return cls(True, frozenset(), frozenset())
        fields = text.split(" ")
        users = frozenset(u for u in fields[0].split(",") if u) if fields else frozenset()
        groups = frozenset(g for g in fields[1].split(",") if g) if len(fields) > 1 else frozenset()
        return cls(False, users, groups)

    def admits(self, user: str, groups: Iterable[str]) -> bool:
        """True when the user, or one of the groups, is listed (or the ACL is ``*``)."""
        if self.everyone or user in self.users:
            return True
        if "*" in self.groups:
            return True
        return any(g in self.groups for g in groups)


def may_submit(leaf: QueueNode, user: str, groups: Iterable[str]) -> bool:
    """The submit or admin ACL of the leaf or any ancestor admits the user or a group."""
    group_list = list(groups)
    for q in leaf.ancestry():
        for text in (q.submit_acl, q.admin_acl):
            if text is not None and Acl.parse(text).admits(user, group_list):
                return True
    return False
