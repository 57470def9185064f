"""Placement rules: which leaf queue a new application goes to (YuniKorn ``placement``).

Mirrors ``AppPlacementManager.PlaceApplication`` of YuniKorn v1.5.2: the rules are tried in
config order; a rule yields a fully qualified queue name or nothing (filtered out, tag
missing, queue absent and ``create`` off). A named queue that exists must be a leaf and
admit the user (submit ACL); one that does not exist is checked against the ACL of its
nearest existing ancestor, which must be a parent queue. When no rule yields a queue,
``root.default`` is used if it exists. A partition without rules has the implicit
``provided`` rule. A parent rule that names a leaf is an error that rejects the app.
The recovery rule never applies here: applications are never force-created.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from scheduler.config import go_regexp
from scheduler.config.specs import FilterSpec, RuleSpec
from scheduler.core.acl import may_submit
from scheduler.core.dynamic_queues import QUEUE_NAME
from scheduler.core.queues import QueueNode

ROOT = "root"
DEFAULT_QUEUE = "root.default"  # YuniKorn common.DefaultPlacementQueue
DOT_REPLACE = "_dot_"  # YuniKorn configs.DotReplace
IMPLICIT_RULES = (RuleSpec("provided", False, "", FilterSpec(True, (), ()), None),)
_SPECIAL = re.compile(r"[\^$*+?()\[{}|]")  # YuniKorn configs.SpecialRegExp


class PlacementError(Exception):
    """The app cannot be placed: rejected with reason ``no-placement``."""


@dataclass(frozen=True)
class Placement:
    """The leaf an app goes to, and whether it (or a parent) has to be created."""

    path: str
    create: bool


@dataclass(frozen=True)
class Submission:
    """What placement reads of an ``app.added``."""

    queue: str
    user: str
    groups: tuple[str, ...]
    tags: dict[str, str]


def _matches(entries: tuple[str, ...], name: str) -> bool:
    if len(entries) == 1 and _SPECIAL.search(entries[0]):
        return go_regexp.search(entries[0], name)  # linear time, Go's semantics
    return name in entries


def allows(flt: FilterSpec, user: str, groups: tuple[str, ...]) -> bool:
    """YuniKorn ``Filter.allowUser``: an empty filter returns its type; the user list is
    checked first, then each group in the user's order; no match returns the opposite."""
    if not flt.users and not flt.groups:
        return flt.allow
    if flt.users and _matches(flt.users, user):
        return flt.allow
    if flt.groups and any(_matches(flt.groups, g) for g in groups):
        return flt.allow
    return not flt.allow


def _tag(tags: dict[str, str], name: str) -> str:
    value = tags.get(name)
    if value is None:
        value = next((v for k, v in tags.items() if k.lower() == name.lower()), "")
    return value


def _qualify(name: str) -> str:
    return name if name.startswith(ROOT + ".") else f"{ROOT}.{name}"


def evaluate(rule: RuleSpec, sub: Submission, queues: dict[str, QueueNode]) -> str:
    """One rule's queue for the submission ('' when it does not match); raises on a bad parent."""
    if rule.name == "provided":
        base, qualified = sub.queue, sub.queue.lower().startswith(ROOT + ".")
        if not base:
            return ""
    elif rule.name == "tag":
        base = _tag(sub.tags, rule.value)
        if not base:
            return ""
        qualified = base.lower().startswith(ROOT + ".")
    elif rule.name == "user":
        base, qualified = sub.user, False
    elif rule.name == "fixed":
        base, qualified = rule.value, rule.value.lower().startswith(ROOT + ".")
    else:
        return ""
    if not allows(rule.filter, sub.user, sub.groups):
        return ""
    if qualified:
        name = base.lower()
    else:
        parent = ROOT
        if rule.parent is not None:
            parent = evaluate(rule.parent, sub, queues)
            if not parent:
                return ""
            parent = _qualify(parent.lower())
            found = queues.get(parent)
            if found is not None and found.is_leaf:
                raise PlacementError(f"parent rule returned a leaf queue: {parent}")
        leaf = base if rule.name == "fixed" else base.replace(".", DOT_REPLACE)
        name = f"{parent}.{leaf}".lower()
    if not rule.create and name not in queues:
        return ""
    return name


def _acceptable(name: str, sub: Submission, queues: dict[str, QueueNode]) -> bool:
    queue = queues.get(name)
    if queue is not None:
        return queue.is_leaf and may_submit(queue, sub.user, sub.groups)
    current = name
    while queue is None and "." in current:
        current = current.rsplit(".", 1)[0]
        queue = queues.get(current)
    return queue is not None and may_submit(queue, sub.user, sub.groups)


def place_app(rules: tuple[RuleSpec, ...], sub: Submission, queues: dict[str, QueueNode],
              skip: Collection[str] = ()) -> Placement:
    """The leaf for a new app under the partition's rules; raises ``PlacementError``.

    ``skip``: leaves no rule may choose, the next rule is tried instead — the draining ones
    under yunikorn-1.9 (YUNIKORN-2991, ``placement.go:PlaceApplication`` ``queue.IsDraining()``);
    the fallback to ``root.default`` is checked the same way.
    """
    chosen = ""
    for rule in rules or IMPLICIT_RULES:
        name = evaluate(rule, sub, queues)
        if name and name not in skip and _acceptable(name, sub, queues):
            chosen = name
            break
    if (not chosen and DEFAULT_QUEUE in queues and DEFAULT_QUEUE not in skip
            and _acceptable(DEFAULT_QUEUE, sub, queues)):
        chosen = DEFAULT_QUEUE
    if not chosen:
        raise PlacementError("application rejected: no placement rule matched")
    if chosen in queues:
        return Placement(chosen, False)
    _check_creatable(chosen, queues)
    return Placement(chosen, True)


def _check_creatable(path: str, queues: dict[str, QueueNode]) -> None:
    names = path.split(".")
    depth = len(names) - 1
    while ".".join(names[:depth]) not in queues:
        depth -= 1
    ancestor = queues[".".join(names[:depth])]
    if ancestor.is_leaf:
        raise PlacementError(f"failed to create queue {path}: {ancestor.path} is a leaf queue")
    for name in names[depth:]:
        if not QUEUE_NAME.fullmatch(name):
            raise PlacementError(
                f"failed to create queue {path}: invalid queue name {name!r} (letters, digits, _:#/@-, at most 64)"
            )
