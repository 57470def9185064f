"""The audit's own fold of user/group usage and the ``user-limit`` check, without the core.

Read from the configuration alone: at each queue a user's limit is the ``limits`` entry
naming the user, else the ``*`` user entry; an app's group is, from its leaf up, the first
configured group name the user is in, else ``*`` where a wildcard group limit exists
(YuniKorn ``ugm``). Every live allocation is charged to its user and group at every queue
of its path; after a decision, no charged usage may pass a ``maxresources`` it names.
A configuration change re-resolves groups and re-charges the live allocations.
"""

from __future__ import annotations

from collections.abc import Mapping

from events.resources import Resources, add_into, sub_into
from events.units import fmt_quantity as fq
from scheduler.config import QueueSpec, SchedulerConfig

AskKey = tuple[str, str, str]
Caps = dict[tuple[str, str, str], Mapping[str, int]]  # (partition, path, "u:name"/"g:name") → max


def _caps(config: SchedulerConfig) -> tuple[Caps, dict[tuple[str, str], list[str]]]:
    caps: Caps = {}
    named: dict[tuple[str, str], list[str]] = {}
    for part in config.partitions:
        stack: list[QueueSpec] = [part.root]
        while stack:
            q = stack.pop()
            for limit in q.limits:
                for user in limit.users:
                    caps[(part.name, q.path, "u:" + user)] = limit.max_resources
                for group in limit.groups:
                    caps[(part.name, q.path, "g:" + group)] = limit.max_resources
                    if group != "*" and group not in named.setdefault((part.name, q.path), []):
                        named[(part.name, q.path)].append(group)
            stack.extend(q.children)
    return caps, named


def _prefixes(path: str) -> list[str]:
    parts = path.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


class UserLimitAudit:
    """Charged usage per (partition, queue, user or group) and the limits it must respect."""

    def __init__(self, config: SchedulerConfig) -> None:
        self.caps, self.named = _caps(config)
        self.charges: dict[AskKey, tuple[str, str, str, Resources]] = {}  # key → user, group, queue, res
        self.usage: dict[tuple[str, str, str], Resources] = {}

    def group_of(self, partition: str, queue: str, groups: list[str]) -> str:
        """The group the app's usage is charged to ('' = none)."""
        if not groups:
            return ""
        for path in reversed(_prefixes(queue)):
            for name in self.named.get((partition, path), []):
                if name in groups:
                    return name
            if (partition, path, "g:*") in self.caps:
                return "*"
        return ""

    def _apply(self, key: AskKey, sign: int) -> None:
        user, group, queue, res = self.charges[key]
        for path in _prefixes(queue):
            for who in ("u:" + user, "g:" + group) if group else ("u:" + user,):
                total = self.usage.setdefault((key[0], path, who), {})
                (add_into if sign > 0 else sub_into)(total, res)

    def allocate(self, key: AskKey, user: str, groups: list[str], queue: str, res: Resources) -> list[str]:
        """Charge an allocation; the limits it passes, as messages."""
        self.charges[key] = (user, self.group_of(key[0], queue, groups), queue, dict(res))
        self._apply(key, 1)
        return self.violations(key)

    def release(self, key: AskKey) -> None:
        """An allocation ends."""
        if key in self.charges:
            self._apply(key, -1)
            del self.charges[key]

    def reconfigure(self, config: SchedulerConfig, groups_of: Mapping[tuple[str, str], list[str]]) -> None:
        """New limits: re-resolve groups and re-charge every live allocation."""
        old = self.charges
        self.caps, self.named = _caps(config)
        self.charges, self.usage = {}, {}
        for key, (user, _, queue, res) in old.items():
            self.charges[key] = (user, self.group_of(key[0], queue, groups_of.get((key[0], key[1]), [])), queue, res)
            self._apply(key, 1)

    def violations(self, key: AskKey) -> list[str]:
        """Limits the usage charged for ``key`` now passes (named user before ``*``)."""
        user, group, queue, res = self.charges[key]
        out = []
        for path in _prefixes(queue):
            targets = [("u:" + user, f"user {user!r}"), ("g:" + group, f"group {group!r}")] if group else [
                ("u:" + user, f"user {user!r}")
            ]
            for who, label in targets:
                cap = self.caps.get((key[0], path, who))
                if cap is None and who.startswith("u:"):
                    cap = self.caps.get((key[0], path, "u:*"))
                if not cap:
                    continue
                used = self.usage.get((key[0], path, who), {})
                for name in sorted(res):
                    if name in cap and used.get(name, 0) > cap[name]:
                        out.append(f"{label} on {path}: {name} used {fq(name, used.get(name, 0))} > maxresources "
                                   f"{fq(name, cap[name])}")
        return out
