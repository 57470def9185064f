"""User and group limits (YuniKorn ``ugm``): who may use how much, per queue, tracked incrementally.

Limits come from ``limits`` entries on queues (partition limits are root's). At each queue a
user's limit is the entry naming the user, else the ``*`` entry; an app's group is resolved
once, at admission (``ensureGroupInternal``): from its leaf up to root, the first configured
group (config order) the user belongs to, else ``*`` when that queue has a wildcard group
limit; no match anywhere means the app's group is not tracked. Usage is kept per user and
per group at every queue of the app's path: the allocated resources and the apps counted
as running. ``fits`` is YuniKorn's ``Headroom`` + ``FitInMaxUndef`` (only the resource types
a limit names are capped), ``can_run`` is ``CanRunApp``.
"""

from __future__ import annotations

from collections.abc import Mapping

from events.resources import Resources, add_into, sub_into
from events.units import fmt_resources
from scheduler.config.specs import LimitSpec, QueueSpec
from scheduler.core.objects import App
from scheduler.core.queues import RUNNING_STATES, QueueNode

WILDCARD = "*"
Limit = tuple[Mapping[str, int], int]  # (max resources, max applications)


class LimitIndex:
    """The configured limits by queue path: named users, the user wildcard, groups."""

    __slots__ = ("configured_groups", "groups", "users")

    def __init__(self) -> None:
        self.users: dict[str, dict[str, Limit]] = {}  # path → user (or "*") → limit
        self.groups: dict[str, dict[str, Limit]] = {}  # path → group (or "*") → limit
        self.configured_groups: dict[str, list[str]] = {}  # path → named groups, config order

    @classmethod
    def from_spec(cls, root: QueueSpec) -> LimitIndex | None:
        """The index of a queue tree, or None when no queue has limits."""
        index = cls()
        stack = [root]
        while stack:
            spec = stack.pop()
            for limit in spec.limits:
                index._add(spec.path, limit)
            stack.extend(spec.children)
        return index if index.users or index.groups else None

    def _add(self, path: str, limit: LimitSpec) -> None:
        value: Limit = (limit.max_resources, limit.max_applications)
        for user in limit.users:
            self.users.setdefault(path, {})[user] = value
        for group in limit.groups:
            self.groups.setdefault(path, {})[group] = value
            if group != WILDCARD and group not in self.configured_groups.setdefault(path, []):
                self.configured_groups[path].append(group)

    def user_limit(self, path: str, user: str) -> tuple[str, Limit] | None:
        """The user's limit at one queue (most specific wins) and whom it names."""
        at = self.users.get(path)
        if at is None:
            return None
        if user in at:
            return user, at[user]
        if WILDCARD in at:
            return WILDCARD, at[WILDCARD]
        return None

    def group_limit(self, path: str, group: str) -> Limit | None:
        """The limit of the app's resolved group (a name or ``*``) at one queue."""
        at = self.groups.get(path)
        return at.get(group) if at is not None and group else None

    def resolve_group(self, leaf: QueueNode, groups: list[str]) -> str:
        """The group an app is tracked under ('' = none), leaf upwards (``ensureGroupInternal``)."""
        if not groups:
            return ""
        for q in leaf.lineage:
            for configured in self.configured_groups.get(q.path, ()):
                if configured in groups:
                    return configured
            if WILDCARD in self.groups.get(q.path, {}):
                return WILDCARD
        return ""


class Usage:
    """What one user or group uses at one queue: resources and the apps counted as running."""

    __slots__ = ("apps", "resources")

    def __init__(self) -> None:
        self.resources: Resources = {}
        self.apps: set[str] = set()

    def as_tuple(self) -> tuple[dict[str, int], tuple[str, ...]]:
        """Comparable form: non-zero resources and the sorted app ids."""
        return {k: v for k, v in sorted(self.resources.items()) if v}, tuple(sorted(self.apps))


UsageMap = dict[tuple[str, str, str], Usage]  # (kind "user"/"group", name, queue path) → usage


class UserLimits:
    """The limit index of a partition and its users' and groups' usage, kept incrementally."""

    __slots__ = ("index", "usage")

    def __init__(self, index: LimitIndex) -> None:
        self.index = index
        self.usage: UsageMap = {}

    def _keys(self, app: App) -> list[tuple[str, str, str]]:
        keys = [("user", app.user, q.path) for q in app.queue.lineage]
        if app.limit_group:
            keys.extend(("group", app.limit_group, q.path) for q in app.queue.lineage)
        return keys

    def _at(self, key: tuple[str, str, str]) -> Usage:
        usage = self.usage.get(key)
        if usage is None:
            usage = self.usage[key] = Usage()
        return usage

    def add_resources(self, app: App, delta: Mapping[str, int]) -> None:
        """An allocation of the app was made."""
        for key in self._keys(app):
            add_into(self._at(key).resources, delta)

    def sub_resources(self, app: App, delta: Mapping[str, int]) -> None:
        """An allocation of the app ended."""
        for key in self._keys(app):
            usage = self._at(key)
            sub_into(usage.resources, delta)
            self._drop_if_empty(key, usage)

    def set_running(self, app: App, running: bool) -> None:
        """The app entered (True) or left (False) the states counted as running."""
        for key in self._keys(app):
            usage = self._at(key)
            if running:
                usage.apps.add(app.app_id)
            else:
                usage.apps.discard(app.app_id)
                self._drop_if_empty(key, usage)

    def _drop_if_empty(self, key: tuple[str, str, str], usage: Usage) -> None:
        if not usage.apps and not any(usage.resources.values()):
            del self.usage[key]

    def _limits(self, app: App, q: QueueNode) -> list[tuple[str, str, Limit]]:
        out: list[tuple[str, str, Limit]] = []
        user = self.index.user_limit(q.path, app.user)
        if user is not None:
            out.append(("user", app.user, user[1]))
        if app.limit_group:
            group = self.index.group_limit(q.path, app.limit_group)
            if group is not None:
                out.append(("group", app.limit_group, group))
        return out

    def blocking_resources(self, app: App, request: Mapping[str, int]) -> str | None:
        """Why the request does not fit the app's user/group headroom (None: it fits)."""
        for q in app.queue.lineage:
            for kind, name, (max_res, _) in self._limits(app, q):
                if not max_res:
                    continue
                usage = self.usage.get((kind, name, q.path))
                used = usage.resources if usage is not None else {}
                for rtype, qty in request.items():
                    cap = max_res.get(rtype)
                    if cap is not None and used.get(rtype, 0) + qty > cap:
                        return (
                            f"{kind} {name!r} limit on {q.path}: maxresources {fmt_resources(max_res)}, "
                            f"used {fmt_resources(used)}, asked {fmt_resources(request)}"
                        )
        return None

    def fits(self, app: App, request: Mapping[str, int]) -> bool:
        """The request fits every user/group maxresources on the app's path."""
        return self.blocking_resources(app, request) is None

    def blocking_apps(self, app: App) -> str | None:
        """Why the app may not start running (None: it may) — ``CanRunApp``."""
        for q in app.queue.lineage:
            for kind, name, (_, max_apps) in self._limits(app, q):
                if not max_apps:
                    continue
                usage = self.usage.get((kind, name, q.path))
                running = usage.apps if usage is not None else set()
                if app.app_id not in running and len(running) + 1 > max_apps:
                    return f"{kind} {name!r} limit on {q.path}: maxapplications {max_apps}, running {len(running)}"
        return None


def charge(limits: UserLimits | None, app: App) -> None:
    """Resolve an existing app's group and charge its usage (after a config change)."""
    if limits is None:
        app.limit_group = ""
        return
    app.limit_group = limits.index.resolve_group(app.queue, app.groups)
    if app.state in RUNNING_STATES:
        limits.set_running(app, True)
    limits.add_resources(app, app.allocated)
    if app.gang is not None and app.gang.placeholders:
        limits.add_resources(app, app.gang.placeholders)  # a gang's placeholders count as YuniKorn's ugm counts them
