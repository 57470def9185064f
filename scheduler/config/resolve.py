"""Validated raw partitions → resolved specs: property inheritance and parsed queue settings.

Inheritance (YuniKorn ``mergeProperties``/``filterParentProperty``): a configured child gets
every effective property of its parent, then its own properties override. Never inherited:
``priority.policy`` and ``priority.offset`` (additive offsets would double count), and
``preemption.policy`` unless its value is ``disabled`` (YuniKorn resets any other value to
the default). Invalid property values never fail; they fall back to the defaults.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from events.quantities import parse_resources
from scheduler.config.admission import resolve_limits, resolve_rules, resolve_template
from scheduler.config.frozenmap import FrozenMap
from scheduler.config.godurations import (
    DEFAULT_PREEMPTION_DELAY_US,
    backoff_delay_us,
    preemption_delay_us,
    preemption_policy,
    unschedulable_backoff,
)
from scheduler.config.model import RawQueue
from scheduler.config.profiles import RulesProfile
from scheduler.config.specs import PartitionSpec, QueueSpec, TemplateSpec
from scheduler.config.structure import ROOT, NormalPartition, child_path, children, is_leaf

PRIORITY_POLICY = "priority.policy"
PRIORITY_OFFSET = "priority.offset"
APP_SORT_PRIORITY = "application.sort.priority"
APP_SORT_POLICY = "application.sort.policy"
PREEMPTION_POLICY = "preemption.policy"
PREEMPTION_DELAY = "preemption.delay"
# yunikorn-1.9 (YUNIKORN-3115): skip an app for ``.delay`` after this many unschedulable asks
UNSCHED_BACKOFF = "application.unschedasks.backoff"
UNSCHED_BACKOFF_DELAY = "application.unschedasks.backoff.delay"
QUOTA_PREEMPTION_DELAY = "quota.preemption.delay"  # yunikorn-1.9 (scheduler.core.quota_preemption)

APP_SORT_POLICIES = ("fifo", "fair", "stateaware")
DEFAULT_APP_SORT_POLICY = "fifo"
DEFAULT_NODE_SORT_POLICY = "fair"
DEFAULT_RESOURCE_WEIGHTS: Mapping[str, float] = FrozenMap({"memory": 1.0, "vcore": 1.0})

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
# evsched's own: the root queue's property bounding the distinct resource types in use in a
# partition (docs/reliability.md). A property, so that the config stays one YuniKorn reads.
RESOURCE_TYPES_MAX = "evsched.resource.types.max"
DEFAULT_RESOURCE_TYPES_MAX = 1024
DECIMAL = re.compile(r"[+-]?[0-9]+")  # Go strconv.ParseInt(s, 10, 32): no spaces, no "_"


def inherited_properties(parent: Mapping[str, str]) -> dict[str, str]:
    """The part of a parent's effective properties its configured children receive."""
    out = {}
    for key, value in parent.items():
        if key in (PRIORITY_POLICY, PRIORITY_OFFSET):
            continue
        if key == PREEMPTION_POLICY and value.lower() != "disabled":
            continue
        out[key] = value
    return out


def priority_offset(value: str | None) -> int:
    """``priority.offset`` as int32 decimal; empty, unparsable or out of range → 0."""
    if value is None or not DECIMAL.fullmatch(value):
        return 0
    number = int(value)
    return number if INT32_MIN <= number <= INT32_MAX else 0


def resource_types_max(value: str | None) -> int:
    """``evsched.resource.types.max``: a positive decimal (ASCII digits); absent or invalid → 1,024.

    >>> resource_types_max("64"), resource_types_max(None), resource_types_max("-3"), resource_types_max("1_0")
    (64, 1024, 1024, 1024)
    """
    if value is None or not value.isascii() or not value.isdigit() or len(value) > 9 or int(value) < 1:
        return DEFAULT_RESOURCE_TYPES_MAX
    return int(value)


def priority_fence(value: str | None) -> bool:
    """``priority.policy``: ``fence`` (any case) → True; default, empty or invalid → False."""
    return value is not None and value.lower() == "fence"


def sort_priority(value: str | None) -> bool:
    """``application.sort.priority``: ``disabled`` (any case) → False; anything else → True."""
    return value is None or value.lower() != "disabled"


def app_sort_policy(value: str | None) -> str:
    """``application.sort.policy``: fifo | fair | stateaware, case-sensitive; else fifo."""
    return value if value in APP_SORT_POLICIES else DEFAULT_APP_SORT_POLICY


def resource_map(values: Mapping[str, str] | None) -> FrozenMap[str, int]:
    """Parsed quantities, zero entries dropped, keys sorted (``{}`` = not set)."""
    parsed = parse_resources(values or {})
    return FrozenMap({name: parsed[name] for name in sorted(parsed) if parsed[name] != 0})


def zero_types(values: Mapping[str, str] | None) -> tuple[str, ...]:
    """The types a guarantee sets to 0 while it sets another above 0, sorted: YuniKorn keeps such a
    guarantee whole (``queue.go:setResources``, ``StrictlyGreaterThanZero``), zeros and all; one of
    zeros only it ignores."""
    parsed = parse_resources(values or {})
    if not any(v > 0 for v in parsed.values()) or any(v < 0 for v in parsed.values()):
        return ()
    return tuple(sorted(name for name, v in parsed.items() if v == 0))


def max_map(values: Mapping[str, str] | None) -> FrozenMap[str, int]:
    """A queue's ``max``: all zeros = not set (``{}``); otherwise zero entries are kept, and
    forbid their type (YuniKorn ``queue.go:setResources``: ``nvidia.com/gpu: 0``)."""
    parsed = parse_resources(values or {})
    if not any(v > 0 for v in parsed.values()):
        return FrozenMap({})
    return FrozenMap({name: parsed[name] for name in sorted(parsed)})


def resolve_queue(
    queue: RawQueue, path: str, parent_properties: Mapping[str, str] | None, template: TemplateSpec | None = None
) -> QueueSpec:
    """Resolve one validated queue and its subtree; ``parent_properties`` is None at root."""
    is_root = parent_properties is None
    merged = inherited_properties(parent_properties or {})
    merged.update(queue.properties or {})
    properties = FrozenMap({key: merged[key] for key in sorted(merged)})
    resources = queue.resources
    own_template = resolve_template(queue.childtemplate, template)
    kids = tuple(resolve_queue(kid, child_path(path, kid), properties, own_template) for kid in children(queue))
    return QueueSpec(
        name=path.rsplit(".", 1)[-1],
        path=path,
        is_leaf=is_leaf(queue, is_root),
        submit_acl=queue.submitacl,
        admin_acl=queue.adminacl,
        max_applications=queue.maxapplications,
        properties=properties,
        guaranteed=resource_map(resources.guaranteed if resources else None),
        max=max_map(resources.max if resources else None),
        priority_fence=False if is_root else priority_fence(properties.get(PRIORITY_POLICY)),
        priority_offset=0 if is_root else priority_offset(properties.get(PRIORITY_OFFSET)),
        sort_priority=sort_priority(properties.get(APP_SORT_PRIORITY)),
        app_sort_policy=app_sort_policy(properties.get(APP_SORT_POLICY)),
        children=kids,
        child_template=own_template,
        limits=resolve_limits(queue.limits),
        preemption_policy=preemption_policy(properties.get(PREEMPTION_POLICY)),
        preemption_delay_us=(preemption_delay_us(properties.get(PREEMPTION_DELAY))
                             if is_leaf(queue, is_root) else DEFAULT_PREEMPTION_DELAY_US),
        zero_guaranteed=zero_types(resources.guaranteed if resources else None),
        unsched_backoff=unschedulable_backoff(properties.get(UNSCHED_BACKOFF)),
        backoff_delay_us=backoff_delay_us(properties.get(UNSCHED_BACKOFF_DELAY)),
    )


def resolve_partition(part: NormalPartition) -> PartitionSpec:
    """Resolve one validated partition."""
    assert part.root is not None
    policy = part.raw.nodesortpolicy
    node_sort = policy.type if policy is not None and policy.type else ""
    weights = policy.resourceweights if policy is not None else None
    return PartitionSpec(
        name=part.name,
        root=resolve_queue(part.root, ROOT, None),
        node_sort_policy=node_sort or DEFAULT_NODE_SORT_POLICY,
        resource_weights=(
            FrozenMap({name: weights[name] for name in sorted(weights)}) if weights else DEFAULT_RESOURCE_WEIGHTS
        ),
        placement_rules=resolve_rules(part.raw.placementrules),
        preemption_enabled=part.raw.preemption is None or part.raw.preemption.enabled is not False,
        quota_preemption=part.raw.preemption is not None and part.raw.preemption.quotapreemptionenabled is True,
        rules=RulesProfile.parse(part.raw.rules),
    )
