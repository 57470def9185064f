"""Submit/admin access control lists: ``"user1,user2 group1,group2"``, ``"*"`` for everyone.

>>> Acl.parse("alice,bob devs").admits("carol", ["devs"])
True
>>> Acl.parse(" ").admits("alice", [])
False
>>> Acl.parse("*").admits("anyone", [])
True

As YuniKorn ``security/acl.go``: a user list or group list that is exactly ``*`` admits
everyone (``"* devs"``); a ``*`` among other names is just an invalid name; user names not
matching ``^[_a-zA-Z][a-zA-Z0-9_.@-]*[$]?$`` and group names not matching
``^[_a-zA-Z][a-zA-Z0-9_-]*$`` are ignored.

>>> Acl.parse("* devs").admits("carol", [])
True
>>> Acl.parse("alice ops,*").admits("carol", [])
False
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from scheduler.core.queues import QueueNode

USER_NAME = re.compile(r"[_a-zA-Z][a-zA-Z0-9_.@-]*[$]?")
GROUP_NAME = re.compile(r"[_a-zA-Z][a-zA-Z0-9_-]*")
NOBODY_NAMES: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Acl:
    """A parsed ACL: everyone, or sets of users and groups."""

    everyone: bool
    users: frozenset[str]
    groups: frozenset[str]

    @classmethod
    def parse(cls, text: str | None) -> Acl:
        """Parse YuniKorn's ACL syntax; None, empty or a single space admits nobody."""
        if not text:
            return cls(False, NOBODY_NAMES, NOBODY_NAMES)
        fields = text.split(" ")
        user_list = fields[0].split(",")
        group_list = fields[1].split(",") if len(fields) > 1 else []
        if text.strip() == "*" or user_list == ["*"] or group_list == ["*"]:
            return cls(True, NOBODY_NAMES, NOBODY_NAMES)
        users = frozenset(u for u in user_list if USER_NAME.fullmatch(u))
        groups = frozenset(g for g in group_list if GROUP_NAME.fullmatch(g))
        return cls(False, users, groups)

    def admits(self, user: str, groups: Iterable[str]) -> bool:
        """True when the user, or one of the groups, is listed (or the ACL is ``*``)."""
        if self.everyone or user in self.users:
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
