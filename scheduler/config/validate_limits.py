"""Per-rule validation of user/group ``limits`` (YuniKorn ``checkLimit*``), all reasons kept.

Limits are validated so that a configuration YuniKorn rejects is rejected here too; the
resolved specs carry them (``scheduler.config.admission``) and the core enforces them
(``scheduler.core.user_limits``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from events.quantities import parse_resources
from events.resources import min_permissive
from scheduler.config import resmath
from scheduler.config.error_paths import where
from scheduler.config.model import RawLimit, RawQueue
from scheduler.config.structure import NormalPartition, child_path, children, walk

USER_NAME = re.compile(r"[_a-zA-Z][a-zA-Z0-9:_.@-]*[$]?")
GROUP_NAME = re.compile(r"[_a-zA-Z][a-zA-Z0-9:_.-]*")
WILDCARD = "*"


def _root(part: NormalPartition) -> RawQueue:
    assert part.root is not None
    return part.root


def _label(limit: RawLimit, index: int) -> str:
    return f"limit {limit.limit!r}" if limit.limit else f"limit #{index}"


def _parse(limit: RawLimit) -> dict[str, int] | None:
    try:
        return parse_resources(limit.maxresources or {})
    except ValueError:
        return None


def rule_limits_structure(part: NormalPartition) -> list[str]:
    """Partition ``limits`` and root ``limits``, when both set, must be identical."""
    if part.root_inserted or not part.raw.queues:
        return []
    own = part.raw.queues[0].limits
    if part.raw.limits and own and part.raw.limits != own:
        return [f"{where(part.name, key='limits')}: partition limits and root queue limits differ"]
    return []


def _check_names(names: list[str], kind: str, pattern: re.Pattern[str], seen: set[str]) -> list[str]:
    problems = []
    for name in names:
        if name != WILDCARD and not pattern.fullmatch(name):
            problems.append(f"invalid {kind} name {name!r}")
        if name in seen:
            problems.append(f"duplicated {kind} name {name!r}")
        seen.add(name)
        if WILDCARD in seen and name != WILDCARD:
            problems.append(f"{kind} {name!r} must not follow the wildcard {kind} limit")
    return problems


def _limit_problems(queue: RawQueue, is_root: bool, limit: RawLimit, users: set[str], groups: set[str]) -> list[str]:
    problems = []
    if not limit.users and not limit.groups:
        problems.append("empty user and group lists")
    problems += _check_names(limit.users or [], "user", USER_NAME, users)
    problems += _check_names(limit.groups or [], "group", GROUP_NAME, groups)
    for name, raw in (limit.maxresources or {}).items():
        try:
            parse_resources({name: raw})
        except ValueError as exc:
            problems.append(f"maxresources.{name}: {exc}")
    res = _parse(limit)
    if limit.maxresources and res is not None and not resmath.strictly_positive(res):
        problems.append("maxresources must be greater than zero")
    if limit.maxapplications == 0 and not limit.maxresources:
        problems.append("neither maxresources nor maxapplications is set")
    if queue.maxapplications != 0 and queue.maxapplications < limit.maxapplications:
        problems.append(
            f"maxapplications {limit.maxapplications} exceeds the queue's maxapplications {queue.maxapplications}"
        )
    if not is_root and res is not None:
        configured_max = queue.resources.max if queue.resources is not None else None
        try:
            queue_max = parse_resources(configured_max or {})
        except ValueError:
            queue_max = {}
        if not resmath.fits_max_undef(queue_max, res):
            problems.append(
                f"maxresources {resmath.fmt(res)} exceed the queue's max resources {resmath.fmt(queue_max)}"
            )
    return problems


def rule_limit_entries(part: NormalPartition) -> list[str]:
    """Each limit names valid, unique users/groups (wildcard last) and sane maxima."""
    reasons = []
    for node in walk(_root(part)):
        users: set[str] = set()
        groups: set[str] = set()
        only_wildcard_group_reported = False
        for index, limit in enumerate(node.queue.limits or []):
            head = f"{where(part.name, node.path, 'limits')}: {_label(limit, index)}"
            for problem in _limit_problems(node.queue, node.parent_path is None, limit, users, groups):
                reasons.append(f"{head}: {problem}")
            if groups == {WILDCARD} and not only_wildcard_group_reported:
                only_wildcard_group_reported = True
                reasons.append(f"{head}: a wildcard group limit needs at least one named group limit before it")
    return reasons


Limits = dict[str, dict[str, int]]


def _merge_resource_limit(kind: str, name: str, res: dict[str, int], parent: Limits, current: Limits) -> str | None:
    if name in parent:
        current[name] = min_permissive(res, parent[name]) or {}
        if not resmath.fits_max_undef(parent[name], res):
            return (
                f"{kind} {name!r} maxresources {resmath.fmt(res)} exceed "
                f"{resmath.fmt(parent[name])} set for that {kind} on a parent queue"
            )
        return None
    current[name] = res
    if name != WILDCARD and WILDCARD in parent and not resmath.fits_max_undef(parent[WILDCARD], res):
        return (
            f"{kind} {name!r} maxresources {resmath.fmt(res)} exceed the wildcard {kind} "
            f"limit {resmath.fmt(parent[WILDCARD])} set on a parent queue"
        )
    return None


def rule_limit_hierarchy_resources(part: NormalPartition) -> list[str]:
    """A user's/group's maxresources fit the limit set for it (or the wildcard) higher up."""
    reasons: list[str] = []

    def visit(queue: RawQueue, path: str, p_users: Limits, p_groups: Limits) -> None:
        users, groups = dict(p_users), dict(p_groups)
        for limit in queue.limits or []:
            res = _parse(limit)
            if res is None:
                continue
            for kind, names, parent, current in (
                ("user", limit.users, p_users, users),
                ("group", limit.groups, p_groups, groups),
            ):
                for name in names or []:
                    problem = _merge_resource_limit(kind, name, res, parent, current)
                    if problem:
                        reasons.append(f"{where(part.name, path, 'limits')}: {problem}")
        for kid in children(queue):
            visit(kid, child_path(path, kid), users, groups)

    visit(_root(part), "root", {}, {})
    return reasons


def _app_limit_exceeds(parent_value: int, value: int) -> bool:
    return parent_value != 0 and (parent_value < value or value == 0)


def rule_limit_hierarchy_apps(part: NormalPartition) -> list[str]:
    """A user's/group's maxapplications fit the limit set for it (or the wildcard) higher up."""
    reasons: list[str] = []

    def visit(queue: RawQueue, path: str, p_users: dict[str, int], p_groups: dict[str, int]) -> None:
        users, groups = dict(p_users), dict(p_groups)
        for limit in queue.limits or []:
            value = limit.maxapplications
            for kind, names, parent, current in (
                ("user", limit.users, p_users, users),
                ("group", limit.groups, p_groups, groups),
            ):
                for name in names or []:
                    if name in parent:
                        bound, source = parent[name], "set for that " + kind
                    elif name != WILDCARD and WILDCARD in parent:
                        bound, source = parent[WILDCARD], f"of the wildcard {kind} limit"
                    else:
                        bound, source = 0, ""
                    if _app_limit_exceeds(bound, value):
                        reasons.append(
                            f"{where(part.name, path, 'limits')}: {kind} {name!r} maxapplications "
                            f"{value or 'unlimited'} exceeds {bound} {source} on a parent queue"
                        )
                    current[name] = value
        for kid in children(queue):
            visit(kid, child_path(path, kid), users, groups)

    visit(_root(part), "root", {}, {})
    return reasons


LIMIT_RULES: tuple[Callable[[NormalPartition], list[str]], ...] = (
    rule_limits_structure,
    rule_limit_entries,
    rule_limit_hierarchy_resources,
    rule_limit_hierarchy_apps,
)
