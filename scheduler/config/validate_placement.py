"""Validation of ``placementrules`` as YuniKorn's ``checkPlacementRules``.

The rules are applied by ``scheduler.core.placement``; they are validated so that a
configuration YuniKorn rejects is rejected here too:

* a rule's (and each parent rule's) name is an identifier ``^[_a-zA-Z][a-zA-Z0-9_]*$``;
* a filter's type is empty, ``allow`` or ``deny`` (any case); a filter with exactly one
  user (group) holds a valid name or a regular expression with a special character;
* the static part of a rule chain (its ``fixed`` rules up to the first dynamic rule) must
  name queues that exist, or may be created (``create: true``) under a parent: a fixed
  path that ends the chain must not be marked a parent, one followed by a dynamic rule
  must be root or marked ``parent: true`` (children alone do not make a parent here, as
  in YuniKorn); only the first fixed rule may be fully qualified (``root.…``).
"""

from __future__ import annotations

import re

from scheduler.config import go_regexp
from scheduler.config.error_paths import where
from scheduler.config.model import RawFilter, RawPlacementRule, RawQueue
from scheduler.config.structure import ROOT, NormalPartition, children

RULE_NAME = re.compile(r"[_a-zA-Z][a-zA-Z0-9_]*")
USER_NAME = re.compile(r"[_a-zA-Z][a-zA-Z0-9:_.@-]*[$]?")
GROUP_NAME = re.compile(r"[_a-zA-Z][a-zA-Z0-9:_.-]*")
SPECIAL = re.compile(r"[\^$*+?()\[{}|]")
FIXED = "fixed"


def _filter_problem(flt: RawFilter) -> str | None:
    if flt.type and flt.type.lower() not in ("allow", "deny"):
        return f"invalid rule filter type {flt.type!r} (use '', allow or deny)"
    for kind, names, pattern in (("user", flt.users, USER_NAME), ("group", flt.groups, GROUP_NAME)):
        if names and len(names) == 1 and not pattern.fullmatch(names[0]):
            try:
                go_regexp.check(names[0])
                regexp_ok = SPECIAL.search(names[0]) is not None
            except go_regexp.PatternError as exc:
                return f"invalid rule filter {kind} list, not a name list or a regexp: {names!r} ({exc})"
            if not regexp_ok:
                return f"invalid rule filter {kind} list, not a name list or a regexp: {names!r}"
    return None


def _rule_problem(rule: RawPlacementRule) -> str | None:
    """YuniKorn ``checkPlacementRule``: name, then the parent rule, then the filter."""
    if not RULE_NAME.fullmatch(rule.name):
        return f"invalid rule name {rule.name!r}, a name must be a valid identifier"
    if rule.parent is not None:
        problem = _rule_problem(rule.parent)
        if problem is not None:
            return problem
    return _filter_problem(rule.filter) if rule.filter is not None else None


def _chain(rule: RawPlacementRule) -> list[RawPlacementRule]:
    return [*(_chain(rule.parent) if rule.parent is not None else []), rule]


def _static_path(rule: RawPlacementRule) -> tuple[str, str, bool]:
    """YuniKorn ``getLongestStaticPath``: (static path, rule chain text, has a dynamic part)."""
    path, dynamic = "", False
    chain = _chain(rule)
    for r in chain:
        if dynamic:
            continue
        if r.name != FIXED:
            path = path or "<dynamic>"
            dynamic = True
            continue
        if r.value.startswith(ROOT):
            if path:
                raise ValueError(f"illegal fully qualified 'fixed' rule with value {r.value!r}")
            path = r.value
            continue
        path = f"{path or ROOT}.{r.value}"
    return path, "->".join(r.name for r in chain), dynamic


def _path_problem(parts: list[str], create: bool, dynamic: bool, root: RawQueue) -> str | None:
    """YuniKorn ``checkQueueHierarchyForPlacement`` (names compared as written, path lower-cased).

    As there, a queue counts as a parent here only when it is root or marked ``parent: true``
    — having children is not enough: a fixed parent of a dynamic rule (``root.ns`` of
    ``root.ns.<tag>``) with children but no ``parent: true`` is rejected, and a fixed path
    that ends the chain there is accepted (the app is then rejected when placed).
    """
    level, parent = [root], None
    while True:
        if not level:
            assert parent is not None
            if not _marked_parent(parent, root):
                return f"which cannot be created because the last queue ({parent.name}) in the hierarchy is a leaf"
            return None if create else "and create is 'false'"
        queue = next((q for q in level if q.name == parts[0]), None)
        if queue is None:
            return None if create else "and create is 'false'"
        if len(parts) == 1:
            if dynamic:
                return None if _marked_parent(queue, root) else (
                    "which is not a parent: the fixed parent of a dynamic rule must be root or marked "
                    "'parent: true' (YuniKorn reports it as 'not a leaf')")
            return "which is not a leaf" if _marked_parent(queue, root) else None
        parts, parent, level = parts[1:], queue, children(queue)


def _marked_parent(queue: RawQueue, root: RawQueue) -> bool:
    """YuniKorn's ``QueueConfig.Parent`` at validation: root, or ``parent: true`` in the config."""
    return queue is root or queue.parent


def rule_placement_rules(part: NormalPartition) -> list[str]:
    """``placementrules`` are valid as YuniKorn ``checkPlacementRules`` checks them."""
    rules = part.raw.placementrules or []
    if not rules or part.root is None:
        return []
    key = "placementrules"
    for rule in rules:
        problem = _rule_problem(rule)
        if problem is not None:
            return [f"{where(part.name, key=key)}: {problem}"]
    for number, rule in enumerate(rules):
        try:
            path, chain, dynamic = _static_path(rule)
        except ValueError as exc:
            return [f"{where(part.name, key=key)}: {exc}"]
        if not path.startswith(ROOT):
            continue
        problem = _path_problem(path.lower().split("."), rule.create, dynamic, part.root)
        if problem is not None:
            return [f"{where(part.name, key=key)}: rule #{number} ({chain}) references queue {path!r} {problem}"]
    return []
