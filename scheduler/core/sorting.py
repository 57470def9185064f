"""Sorting policies for queues and applications: enums plus pure key functions.

Every order is total and ends in arrival order (config order for queues, log order for
apps), so the same state always sorts the same way, whatever the hash seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from events.resources import dominates, is_positive
from projections.queues import QueueNode, usage_share
from scheduler.core.objects import App


class AppSortPolicy(Enum):
    """``application.sort.policy`` of a leaf queue."""

    FIFO = "fifo"
    FAIR = "fair"
    STATEAWARE = "stateaware"

    @classmethod
    def parse(cls, value: str) -> AppSortPolicy:
        """Case-sensitive, as YuniKorn: anything unknown is fifo."""
        return _POLICY_BY_VALUE.get(value, cls.FIFO)


_POLICY_BY_VALUE = {member.value: member for member in AppSortPolicy}

AppKey = tuple[object, ...]


def app_sort_key(app: App, policy: AppSortPolicy, sort_priority: bool) -> AppKey:
    """The key apps in a leaf sort by (ascending).

    As YuniKorn ``sorters.go``: fifo+enabled (priority desc, submission), fifo+disabled
    (submission, priority desc), fair+enabled (priority desc, usage share), fair+disabled
    (usage share, priority desc). The usage share is vs the leaf's guarantee, dominant
    component first. Our deterministic tie-breaks follow: submission time (fair only),
    then arrival order. stateaware sorts as fifo (its filter is ``stateaware_allowed``).

    Worked example (fifo, priority enabled): a (P0, t=1), b (P5, t=2), c (P5, t=3)
    sort b, c, a; with priority disabled a, b, c. Under fair with priority disabled and
    equal shares: b, c, a (priority before submission time).
    """
    if policy is AppSortPolicy.FAIR:
        share = app.share
        if share is None:
            share = app.share = usage_share(app.allocated, app.queue.guaranteed)
        if sort_priority:
            return (-app.priority, share, app.submit_us, app.seq)
        return (share, -app.priority, app.submit_us, app.seq)
    if sort_priority:
        return (-app.priority, app.submit_us, app.seq)
    return (app.submit_us, -app.priority, app.seq)


def stateaware_allowed(apps_in_order: Sequence[App], starting: Sequence[App]) -> set[str]:
    """Which apps of a stateaware leaf may be scheduled now (YuniKorn 1.5 ``stateAwareFilter``).

    Every app with pending asks that is not Accepted (Running and Starting); plus, when no
    app is Starting, the oldest Accepted app with pending asks. A Starting app blocks every
    Accepted app even when it has nothing pending. ``apps_in_order`` are the leaf's apps
    with pending asks, in fifo order; ``starting`` the leaf's Starting apps (pending or not).
    """
    allowed = {a.app_id for a in apps_in_order if a.state != "Accepted"}
    if starting:
        return allowed
    oldest_accepted = min(
        (a for a in apps_in_order if a.state == "Accepted"), key=lambda a: (a.submit_us, a.seq), default=None
    )
    if oldest_accepted is not None:
        allowed.add(oldest_accepted.app_id)
    return allowed


def sort_queues(children: Sequence[QueueNode], sort_priority: bool) -> list[QueueNode]:
    """Order the child queues that have pending resources, for the walk from their parent.

    Primary keys, all total: with priority sorting enabled on the parent, priority desc
    then fair share asc; disabled, fair share asc then priority desc. Within a run of equal
    primary keys, a queue moves ahead of an earlier one only when its pending resources
    dominate (every component ≥, one >) — a stable insertion pass, which keeps config
    order wherever neither dominates.

    Worked example: a (P5, share 0.5), b (P5, share 0.2), c (P9, share 0.9) under an
    enabled parent sort c, b, a; under a disabled parent b, a, c.
    """
    candidates = [c for c in children if is_positive(c.pending)]
    if len(candidates) < 2:
        return candidates
    # Each key is computed once; ``order`` is unique among siblings, so tuples never tie.
    keyed: list[tuple[tuple[object, object, int], QueueNode]]
    if sort_priority:
        keyed = sorted(((-q.priority, q.fair_share(), q.order), q) for q in candidates)
    else:
        keyed = sorted(((q.fair_share(), -q.priority, q.order), q) for q in candidates)
    out: list[QueueNode] = []
    keys: list[object] = []
    for full_key, q in keyed:
        key = full_key[:2]
        i = len(out)
        while i > 0 and keys[i - 1] == key and dominates(q.pending, out[i - 1].pending):
            i -= 1
        out.insert(i, q)
        keys.insert(i, key)
    return out
