"""User and group usage from scratch, from the apps alone: the oracle ``UserLimits`` is held to."""

from __future__ import annotations

from events.resources import add_into
from scheduler.core.objects import App
from scheduler.core.queues import RUNNING_STATES
from scheduler.core.user_limits import Usage, UsageMap


def fold_usage(apps: list[App]) -> UsageMap:
    """Usage from scratch, from the apps alone (what ``UserLimits`` must hold)."""
    out: UsageMap = {}
    for app in apps:
        keys = [("user", app.user, q.path) for q in app.queue.lineage]
        if app.limit_group:
            keys.extend(("group", app.limit_group, q.path) for q in app.queue.lineage)
        running = app.state in RUNNING_STATES
        if not running and not any(app.allocated.values()):
            continue
        for key in keys:
            usage = out.setdefault(key, Usage())
            add_into(usage.resources, app.allocated)
            if running:
                usage.apps.add(app.app_id)
    return out


def comparable(usage: UsageMap) -> dict[tuple[str, str, str], tuple[dict[str, int], tuple[str, ...]]]:
    """A usage map in plain comparable form, empty entries left out."""
    out = {}
    for key, value in usage.items():
        form = value.as_tuple()
        if form[0] or form[1]:
            out[key] = form
    return out
