"""The resolved configuration the scheduler core consumes: frozen queue and partition specs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scheduler.config.profiles import DEFAULT_PROFILE, RulesProfile


@dataclass(frozen=True)
class LimitSpec:
    """One ``limits`` entry: who it covers and its caps (``{}``/0 = not set).

    ``users``/``groups`` keep config order; ``"*"`` is the wildcard (YuniKorn ``ugm``).
    """

    users: tuple[str, ...]
    groups: tuple[str, ...]
    max_resources: Mapping[str, int]
    max_applications: int


@dataclass(frozen=True)
class TemplateSpec:
    """A ``childtemplate``: what a dynamically created leaf below the queue gets."""

    max_applications: int
    properties: Mapping[str, str]
    guaranteed: Mapping[str, int]
    max: Mapping[str, int]


@dataclass(frozen=True)
class FilterSpec:
    """A placement rule's ``filter``: allow (or deny) listed users/groups; empty = all."""

    allow: bool
    users: tuple[str, ...]
    groups: tuple[str, ...]


@dataclass(frozen=True)
class RuleSpec:
    """One placement rule (YuniKorn ``placement.rule``): provided, user, tag or fixed."""

    name: str
    create: bool
    value: str
    filter: FilterSpec
    parent: RuleSpec | None


@dataclass(frozen=True)
class QueueSpec:
    """One configured queue, with inherited properties and parsed settings resolved.

    ``submit_acl``/``admin_acl`` are the raw strings as configured (None when absent), in
    YuniKorn's ACL syntax: ``"user1,user2 group1,group2"``; ``"*"`` admits everyone; ``""``
    or ``" "`` admits nobody. Resource maps are in internal units (vcore in milli-cores),
    with zero entries dropped and keys sorted; ``{}`` means "not set".
    """

    name: str
    path: str
    is_leaf: bool
    submit_acl: str | None
    admin_acl: str | None
    max_applications: int
    properties: Mapping[str, str]
    guaranteed: Mapping[str, int]
    max: Mapping[str, int]
    priority_fence: bool
    priority_offset: int
    sort_priority: bool
    app_sort_policy: str
    children: tuple[QueueSpec, ...]
    child_template: TemplateSpec | None = None  # own or nearest ancestor's (YuniKorn inherits)
    limits: tuple[LimitSpec, ...] = ()
    preemption_policy: str = "default"  # default | fence | disabled (YuniKorn PreemptionPolicyFromString)
    # Types the guarantee names with 0 beside a positive one (dropped from ``guaranteed``): under
    # yunikorn-1.9 a used such type counts 1.0 in the fair share (``resources.go:getFairShare``)
    zero_guaranteed: tuple[str, ...] = ()
    preemption_delay_us: int = 30_000_000  # leaf ``preemption.delay``; parents keep the default
    # yunikorn-1.9's unschedulable-ask backoff (``application.unschedasks.backoff`` and ``.delay``,
    # inherited): after this many unschedulable asks in one try an app is skipped for the delay
    unsched_backoff: int = 0
    backoff_delay_us: int = 30_000_000


@dataclass(frozen=True)
class PartitionSpec:
    """One partition: its root queue and node sorting settings."""

    name: str
    root: QueueSpec
    node_sort_policy: str
    resource_weights: Mapping[str, float]
    placement_rules: tuple[RuleSpec, ...] = ()
    preemption_enabled: bool = True  # ``preemption: {enabled: false}`` turns preemption off
    rules: RulesProfile = DEFAULT_PROFILE  # ``rules``: the YuniKorn generation whose rules it runs
    # ``preemption.quotapreemptionenabled`` (yunikorn-1.9, YUNIKORN-3193; scheduler.core.quota_preemption)
    quota_preemption: bool = False


@dataclass(frozen=True)
class SchedulerConfig:
    """A validated configuration: partitions in config order, the text and its sha256."""

    partitions: tuple[PartitionSpec, ...]
    checksum: str
    yaml: str


def find_queue(partition: PartitionSpec, path: str) -> QueueSpec | None:
    """The queue at a fully qualified path (case-insensitive), e.g. ``"root.Sandbox"``."""
    parts = path.lower().split(".")
    queue = partition.root
    if parts[0] != queue.name:
        return None
    for name in parts[1:]:
        found = next((kid for kid in queue.children if kid.name == name), None)
        if found is None:
            return None
        queue = found
    return queue
