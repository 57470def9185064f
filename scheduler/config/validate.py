"""Per-rule validation of partitions and queues (YuniKorn ``configvalidator``), all reasons kept.

Each ``rule_*`` function checks one rule and returns its reasons (empty when it holds).
Unlike YuniKorn, which stops at the first error, every rule runs and every reason is kept.
User/group ``limits`` rules live in ``validate_limits``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping

from events.gostrings import fields, trim_space
from events.quantities import parse_resources
from events.resources import min_permissive
from scheduler.config import resmath
from scheduler.config.error_paths import where
from scheduler.config.model import RawConfig, RawQueue, RawResources
from scheduler.config.profiles import RulesProfile, profile_problem
from scheduler.config.structure import NormalPartition, child_path, children, walk
from scheduler.config.validate_limits import LIMIT_RULES
from scheduler.config.validate_placement import rule_placement_rules

QUEUE_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
NODE_SORT_TYPES = ("fair", "binpacking")

PartitionRule = Callable[[NormalPartition], list[str]]


def validate(config: RawConfig, partitions: list[NormalPartition]) -> list[str]:
    """Every reason the configuration is invalid, in a stable order."""
    reasons = rule_partitions_present(config) + rule_unique_partition_names(partitions)
    for part in partitions:
        for rule in PARTITION_RULES:
            reasons.extend(rule(part))
        if part.root is not None:
            for rule in QUEUE_RULES + LIMIT_RULES:
                reasons.extend(rule(part))
    return reasons


# --- configuration -----------------------------------------------------------------------


def rule_partitions_present(config: RawConfig) -> list[str]:
    """At least one partition must be defined."""
    if not config.partitions:
        return ["top level: key 'partitions': at least one partition must be defined"]
    return []


def rule_unique_partition_names(partitions: list[NormalPartition]) -> list[str]:
    """Partition names are unique, case-insensitively (an empty name means 'default')."""
    seen: set[str] = set()
    reasons = []
    for part in partitions:
        if part.name in seen:
            reasons.append(f"{where(part.name)}: duplicate partition name (partition #{part.index})")
        seen.add(part.name)
    return reasons


# --- partition ---------------------------------------------------------------------------


def rule_queues_set(part: NormalPartition) -> list[str]:
    """A partition must have a ``queues`` list (an empty list yields a bare root)."""
    if part.root is None:
        return [f"{where(part.name, key='queues')}: queue config is not set"]
    return []


def rule_node_sort_policy(part: NormalPartition) -> list[str]:
    """``nodesortpolicy.type`` is fair, binpacking or empty; weights finite and ≥ 0."""
    policy = part.raw.nodesortpolicy
    if policy is None:
        return []
    reasons = []
    if policy.type not in ("", *NODE_SORT_TYPES):  # case-sensitive, as YuniKorn
        reasons.append(
            f"{where(part.name, key='nodesortpolicy.type')}: undefined policy {policy.type!r} (use fair or binpacking)"
        )
    weights = policy.resourceweights or {}
    for name, weight in weights.items():
        if math.isnan(weight) or weight < 0 or math.isinf(weight):
            reasons.append(
                f"{where(part.name, key='nodesortpolicy.resourceweights.' + name)}: "
                f"resource weight {weight} is not allowed (must be a finite number ≥ 0)"
            )
    total = sum(w for w in weights.values() if math.isfinite(w) and w > 0)  # inf past the float range
    if not reasons and total > MAX_WEIGHT_SUM:
        reasons.append(
            f"{where(part.name, key='nodesortpolicy.resourceweights')}: the weights sum to {total:g}, more than "
            f"{MAX_WEIGHT_SUM:g}: a node's weighted usage (ratios up to 2^64) would overflow"
        )
    return reasons


# A node's usage ratio per resource lies within ±2^64 (sums are bounded to 64 bits), so a
# weighted sum with weights summing to at most this stays finite (2^64 × 1e288 < 1.8e308).
MAX_WEIGHT_SUM = 1e288


def rule_rules_profile(part: NormalPartition) -> list[str]:
    """``rules`` (evsched's own key) names a profile, or is absent."""
    problem = profile_problem(part.raw.rules)
    return [] if problem is None else [f"{where(part.name, key='rules')}: {problem}"]


def rule_quota_preemption_key(part: NormalPartition) -> list[str]:
    """``preemption.quotapreemptionenabled`` is yunikorn-1.9's: under yunikorn-1.5 an unknown key, as
    YuniKorn 1.5's strict parser has it."""
    raw = part.raw.preemption
    if raw is None or raw.quotapreemptionenabled is None or profile_problem(part.raw.rules) is not None:
        return []
    if RulesProfile.parse(part.raw.rules) is RulesProfile.YUNIKORN_1_9:
        return []
    return [f"{where(part.name, key='preemption.quotapreemptionenabled')}: unknown key under the rules profile "
            "yunikorn-1.5 (YuniKorn 1.5 refuses it; it is yunikorn-1.9's quota preemption, YUNIKORN-3193)"]


PARTITION_RULES: tuple[PartitionRule, ...] = (
    rule_queues_set, rule_node_sort_policy, rule_placement_rules, rule_rules_profile, rule_quota_preemption_key,
)


# --- queues ------------------------------------------------------------------------------


def _root(part: NormalPartition) -> RawQueue:
    assert part.root is not None
    return part.root


def rule_root_resources(part: NormalPartition) -> list[str]:
    """The root queue must not set guaranteed or max resources."""
    res = _root(part).resources
    if res is not None and (res.guaranteed is not None or res.max is not None):
        return [f"{where(part.name, 'root', 'resources')}: root queue must not have resources set"]
    return []


def rule_queue_names(part: NormalPartition) -> list[str]:
    """Child queue names match ``[a-zA-Z0-9_-]{1,64}`` (no dots)."""
    reasons = []
    for node in walk(_root(part)):
        for kid in children(node.queue):
            if not QUEUE_NAME.fullmatch(kid.name):
                reasons.append(
                    f"{where(part.name, node.path)}: invalid child queue name {kid.name!r}: a name "
                    "must only have alphanumeric characters, - or _, and be 1 to 64 characters"
                )
    return reasons


def rule_unique_sibling_names(part: NormalPartition) -> list[str]:
    """No two children of one queue share a name, case-insensitively."""
    reasons = []
    for node in walk(_root(part)):
        seen: set[str] = set()
        for kid in children(node.queue):
            lowered = kid.name.lower()
            if lowered in seen:
                reasons.append(f"{where(part.name, node.path)}: duplicate child queue name {kid.name!r}")
            seen.add(lowered)
    return reasons


def acl_problem(acl: str) -> str | None:
    """Why an ACL string is invalid, or None. ``"*"``, ``""`` and ``" "`` are valid.

    YuniKorn's validator rejects more than two white-space separated fields after trimming;
    its ACL parser (applied when the queue is built) also rejects more than two parts when
    splitting the raw string on single spaces. Both are enforced here.
    """
    if len(fields(trim_space(acl))) > 2 or len(acl.split(" ")) > 2:
        return f"ACL {acl!r} has more than two space-separated fields (format: 'user1,user2 group1,group2')"
    return None


def rule_acls(part: NormalPartition) -> list[str]:
    """``submitacl`` and ``adminacl`` have at most two space-separated fields."""
    reasons = []
    for node in walk(_root(part)):
        for key, acl in (("adminacl", node.queue.adminacl), ("submitacl", node.queue.submitacl)):
            problem = acl_problem(acl) if acl is not None else None
            if problem:
                reasons.append(f"{where(part.name, node.path, key)}: {problem}")
    return reasons


def parse_or_none(values: Mapping[str, str] | None) -> dict[str, int] | None:
    """Parsed quantities; ``{}`` when not set, None when any quantity is invalid."""
    try:
        return parse_resources(values or {})
    except ValueError:
        return None


def _quantity_reasons(part: str, path: str, key: str, res: RawResources | None) -> list[str]:
    reasons = []
    for kind, values in (
        ("guaranteed", res.guaranteed if res else None),
        ("max", res.max if res else None),
    ):
        for name, raw in (values or {}).items():
            try:
                parse_resources({name: raw})
            except ValueError as exc:
                reasons.append(f"{where(part, path, f'{key}.{kind}.{name}')}: {exc}")
    return reasons


def rule_quantities(part: NormalPartition) -> list[str]:
    """Every quantity in ``resources`` and ``childtemplate.resources`` parses."""
    reasons = []
    for node in walk(_root(part)):
        reasons += _quantity_reasons(part.name, node.path, "resources", node.queue.resources)
        template = node.queue.childtemplate
        if template is not None:
            reasons += _quantity_reasons(part.name, node.path, "childtemplate.resources", template.resources)
    return reasons


def _guaranteed(queue: RawQueue) -> dict[str, int] | None:
    return parse_or_none(queue.resources.guaranteed if queue.resources else None)


def _max(queue: RawQueue) -> dict[str, int] | None:
    return parse_or_none(queue.resources.max if queue.resources else None)


def rule_guaranteed_within_max(part: NormalPartition) -> list[str]:
    """A queue's guaranteed does not exceed its own max for any type named in both."""
    reasons = []
    for node in walk(_root(part)):
        g, m = _guaranteed(node.queue), _max(node.queue)
        if g is not None and m is not None and not resmath.fits_max_undef(m, g):
            reasons.append(
                f"{where(part.name, node.path)}: guaranteed resources {resmath.fmt(g)} are larger "
                f"than max resources {resmath.fmt(m)}"
            )
    return reasons


def rule_child_max_within_parent(part: NormalPartition) -> list[str]:
    """A queue's max does not exceed the max in force at its parent (min over the ancestors)."""
    reasons: list[str] = []

    def visit(queue: RawQueue, path: str, inherited: dict[str, int]) -> None:
        own = _max(queue) or {}
        if not resmath.fits_max_undef(inherited, own):
            reasons.append(
                f"{where(part.name, path)}: max resources {resmath.fmt(own)} are larger than the "
                f"max {resmath.fmt(inherited)} set on its parent queues"
            )
        effective = min_permissive(own, inherited) or {}
        for kid in children(queue):
            visit(kid, child_path(path, kid), effective)

    visit(_root(part), "root", {})
    return reasons


def rule_children_guaranteed(part: NormalPartition) -> list[str]:
    """The children's guarantees add up to no more than the parent's guaranteed and max.

    A child without a guarantee of its own counts with the sum of its own children's; the
    parent's max here is the max in force (min over the parent and its ancestors).
    """
    reasons: list[str] = []

    def visit(queue: RawQueue, path: str, inherited: dict[str, int]) -> dict[str, int]:
        own_g = _guaranteed(queue) or {}
        effective_max = min_permissive(_max(queue) or {}, inherited) or {}
        kids = children(queue)
        total = resmath.add_all([visit(kid, child_path(path, kid), effective_max) for kid in kids])
        if kids and not resmath.fits_max_undef(own_g, total):
            reasons.append(
                f"{where(part.name, path)}: guaranteed resources {resmath.fmt(own_g)} are smaller "
                f"than the sum of the children's guaranteed resources {resmath.fmt(total)}"
            )
        if kids and not resmath.fits_max_undef(effective_max, total):
            reasons.append(
                f"{where(part.name, path)}: max resources {resmath.fmt(effective_max)} are smaller "
                f"than the sum of the children's guaranteed resources {resmath.fmt(total)}"
            )
        return total if resmath.is_zero(own_g) else own_g

    visit(_root(part), "root", {})
    return reasons


def rule_max_applications(part: NormalPartition) -> list[str]:
    """When a queue sets ``maxapplications``, each child needs 0 < child ≤ parent."""
    reasons = []
    for node in walk(_root(part)):
        limit = node.queue.maxapplications
        if limit == 0:
            continue
        for kid in children(node.queue):
            path = child_path(node.path, kid)
            if kid.maxapplications == 0:
                reasons.append(
                    f"{where(part.name, path, 'maxapplications')}: must be set (> 0) because the "
                    f"parent queue {node.path!r} sets maxapplications {limit}"
                )
            elif kid.maxapplications > limit:
                reasons.append(
                    f"{where(part.name, path, 'maxapplications')}: {kid.maxapplications} is larger "
                    f"than the parent queue's maxapplications {limit}"
                )
    return reasons


QUEUE_RULES: tuple[PartitionRule, ...] = (
    rule_root_resources,
    rule_queue_names,
    rule_unique_sibling_names,
    rule_acls,
    rule_quantities,
    rule_guaranteed_within_max,
    rule_child_max_within_parent,
    rule_children_guaranteed,
    rule_max_applications,
)
