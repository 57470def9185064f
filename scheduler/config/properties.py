"""Queue property values checked as YuniKorn parses them: what ``config check`` and ``config apply`` refuse.

YuniKorn never fails a config over a property value: ``priority.offset: "five"`` becomes 0,
``application.sort.policy: FIFO`` becomes fifo's default, silently (``resolve.py`` does the
same, so decisions match YuniKorn's). The operator's tools are stricter: every value a
property would not take as written is an error naming the queue path, the key and what it
takes; a key that no rule reads is a warning (it may be meant for another tool, or be a typo).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from scheduler.config.godurations import PREEMPTION_POLICIES, go_duration_us, uint64
from scheduler.config.profiles import RulesProfile
from scheduler.config.resolve import (
    APP_SORT_POLICIES,
    APP_SORT_POLICY,
    APP_SORT_PRIORITY,
    DECIMAL,
    INT32_MAX,
    INT32_MIN,
    PREEMPTION_DELAY,
    PREEMPTION_POLICY,
    PRIORITY_OFFSET,
    PRIORITY_POLICY,
    QUOTA_PREEMPTION_DELAY,
    RESOURCE_TYPES_MAX,
    UNSCHED_BACKOFF,
    UNSCHED_BACKOFF_DELAY,
)
from scheduler.config.specs import QueueSpec, SchedulerConfig, TemplateSpec


def _int32(value: str) -> bool:
    return DECIMAL.fullmatch(value) is not None and INT32_MIN <= int(value) <= INT32_MAX


def _positive_count(value: str) -> bool:
    return value.isascii() and value.isdigit() and len(value) <= 9 and int(value) >= 1


def _uint64(value: str) -> bool:
    return uint64(value) is not None


def _positive_duration(value: str) -> bool:
    parsed = go_duration_us(value)
    return parsed is not None and parsed > 0


# key → (does the value parse, what the key takes)
RULES: Mapping[str, tuple[Callable[[str], bool], str]] = {
    PRIORITY_POLICY: (lambda v: v.lower() in ("default", "fence"), "default or fence"),
    PRIORITY_OFFSET: (_int32, "a whole number from -2147483648 to 2147483647"),
    APP_SORT_POLICY: (lambda v: v in APP_SORT_POLICIES, " | ".join(APP_SORT_POLICIES) + " (lower case)"),
    APP_SORT_PRIORITY: (lambda v: v.lower() in ("enabled", "disabled"), "enabled or disabled"),
    PREEMPTION_POLICY: (lambda v: v.lower() in PREEMPTION_POLICIES, " | ".join(PREEMPTION_POLICIES)),
    PREEMPTION_DELAY: (_positive_duration, 'a positive Go duration such as "30s" or "1m30s"'),
    RESOURCE_TYPES_MAX: (_positive_count, "a whole number from 1 to 999999999"),
    QUOTA_PREEMPTION_DELAY: (_positive_duration, 'a positive Go duration such as "30s" or "1m30s"'),
    UNSCHED_BACKOFF: (_uint64, "a whole number from 0 (off) to 18446744073709551615"),
    UNSCHED_BACKOFF_DELAY: (_positive_duration, 'a positive Go duration such as "30s" or "1m30s"'),
}


def property_problems(config: SchedulerConfig) -> tuple[list[str], list[str]]:
    """(errors, warnings) for every property set in ``config``, at the queue (or child template) that sets it.

    >>> from scheduler.config import load_config
    >>> load = lambda props: load_config("partitions: [{name: default, queues: [{name: root, queues: "
    ...     "[{name: a, properties: %s}]}]}]" % props)
    >>> property_problems(load("{priority.offset: five, colour: blue}"))
    (["queue root.a: priority.offset: 'five' is not a whole number from -2147483648 to 2147483647"], \
["queue root.a: property 'colour' is not one evsched reads (known: application.sort.policy, \
application.sort.priority, application.unschedasks.backoff, application.unschedasks.backoff.delay, \
evsched.resource.types.max, preemption.delay, preemption.policy, priority.offset, \
priority.policy, quota.preemption.delay)"])
    >>> property_problems(load("{priority.offset: '-5', application.sort.policy: fair}"))
    ([], [])
    """
    errors: list[str] = []
    warnings: list[str] = []
    for partition in config.partitions:
        prefix = "" if len(config.partitions) == 1 else f"partition {partition.name}, "
        for where, key, value in _set_properties(partition.root, {}, None):
            rule = RULES.get(key)
            if rule is None:
                known = ", ".join(sorted(RULES))
                warnings.append(f"{prefix}{where}: property {key!r} is not one evsched reads (known: {known})")
            elif not rule[0](value):
                errors.append(f"{prefix}{where}: {key}: {value!r} is not {rule[1]}")
            elif key == QUOTA_PREEMPTION_DELAY and not partition.quota_preemption:
                warnings.append(f"{prefix}{where}: {key} is read only with preemption.quotapreemptionenabled "
                                "under the rules profile yunikorn-1.9 (YUNIKORN-3193)")
            elif key in (UNSCHED_BACKOFF, UNSCHED_BACKOFF_DELAY) and partition.rules is not RulesProfile.YUNIKORN_1_9:
                warnings.append(f"{prefix}{where}: {key} is read only under the rules profile yunikorn-1.9 "
                                "(YUNIKORN-3115, YuniKorn 1.8 on); yunikorn-1.5 has no unschedulable-ask backoff")
            elif (key == "application.sort.policy" and value == "stateaware"
                  and partition.rules is RulesProfile.YUNIKORN_1_9):
                warnings.append(f"{prefix}{where}: application.sort.policy stateaware is fifo under the rules "
                                "profile yunikorn-1.9 (YUNIKORN-2483: removed, as YuniKorn 1.9 warns)")
    return errors, warnings


def _set_properties(
    queue: QueueSpec, inherited: Mapping[str, str], parent_template: TemplateSpec | None
) -> Iterator[tuple[str, str, str]]:
    """(where, key, value) for each property a queue or its child template sets itself (not inherited)."""
    for key in sorted(queue.properties):
        if inherited.get(key) != queue.properties[key]:
            yield f"queue {queue.path}", key, queue.properties[key]
    template = queue.child_template
    if template is not None and template is not parent_template:
        for key in sorted(template.properties):
            yield f"queue {queue.path} (child template)", key, template.properties[key]
    for kid in queue.children:
        yield from _set_properties(kid, queue.properties, template)
