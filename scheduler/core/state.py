"""The whole scheduler state: partitions, priority classes, app timers and counters.

``SchedulerState`` is what a fold of the input log produces; ``scheduler.core.apply``
changes it one event at a time and ``scheduler.core.cycle`` runs allocation cycles on it.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from events.models import OutputData
from scheduler.config import SchedulerConfig, default_config
from scheduler.config.profiles import RulesProfile
from scheduler.core import gang, quota_preemption
from scheduler.core.form_cache import DigestMemo
from scheduler.core.gang import PLACEHOLDER_TIMER
from scheduler.core.objects import App
from scheduler.core.partition import COMPLETING_TIMEOUT_US, STARTING_TIMEOUT_US, PartitionState
from scheduler.core.priorityclass import PriorityClasses


@dataclass(order=True)
class _Timer:
    deadline_us: int
    app_seq: int
    app_id: str = field(compare=False)
    partition: str = field(compare=False)
    state: str = field(compare=False)
    since_us: int = field(compare=False)


class SchedulerState:
    """Everything a fold of the input log produces."""

    def __init__(self, config: SchedulerConfig | None = None) -> None:
        self.config = config or default_config()
        # Every partition's rules profile whatever its config names (``replay whatif --rules``); None: the config's.
        self.profile_override: RulesProfile | None = None
        self.partitions: dict[str, PartitionState] = {}
        for spec in self.config.partitions:
            self.partitions[spec.name] = PartitionState(
                spec.name, spec.root, spec.node_sort_policy, spec.resource_weights
            )
            self.partitions[spec.name].set_profile(spec.rules)
            quota_preemption.after_config(self.partitions[spec.name], spec.quota_preemption, {}, 0)
        self.priority_classes = PriorityClasses()
        self.seq = 0  # arrival counter of applied inputs
        self.cycle = 0  # number of the last completed cycle
        self.cycle_time_us: int | None = None  # time of the last cycle (preemption attempt ticks)
        self._timers: list[_Timer] = []
        self.digest_memo = DigestMemo()  # a cache of ``state_digest``, never state
        # The cycle whose every walk ended with nothing left to do, with no input applied since
        # (``apply`` clears it): the next cycle may skip its walks (``scheduler.core.cycle.settled``).
        self.settled_cycle: int | None = None
        self.settled_until_us: int | None = None  # and the time until which that holds (None: no bound)

    def next_seq(self) -> int:
        """The next arrival number (the final tie-break of every sort)."""
        self.seq += 1
        return self.seq

    def schedule(self, deadline_us: int, app: App) -> None:
        """Arm a timer for the app's current state (Starting or Completing)."""
        heapq.heappush(
            self._timers, _Timer(deadline_us, app.seq, app.app_id, app.partition, app.state, app.state_since_us)
        )

    def schedule_placeholder(self, deadline_us: int, app: App) -> None:
        """Arm an app's placeholder timer (``scheduler.core.gang``); kept under the state name
        ``placeholder``, its own deadline as its ``since``."""
        heapq.heappush(self._timers, _Timer(deadline_us, app.seq, app.app_id, app.partition, PLACEHOLDER_TIMER,
                                            deadline_us))

    def timer_due(self, now_us: int) -> bool:
        """True when an app timer would fire in a cycle at ``now_us``."""
        return bool(self._timers) and self._timers[0].deadline_us <= now_us

    def fire_timers(self, now_us: int, out: list[OutputData]) -> None:
        """Starting → Running after 5 min, Completing → Completed (and gone) after 30 s (cycle start)."""
        while self._timers and self._timers[0].deadline_us <= now_us:
            timer = heapq.heappop(self._timers)
            part = self.partitions.get(timer.partition)
            app = part.apps.get(timer.app_id) if part else None
            if app is None or part is None:
                continue
            if timer.state == PLACEHOLDER_TIMER:
                if app.gang is not None and app.gang.timer_us == timer.deadline_us:
                    gang.timeout(part, app, timer.deadline_us, self, out)
                continue
            if app.state != timer.state or app.state_since_us != timer.since_us:
                continue  # the app moved on since the timer was armed
            self.expire(part, app, out)

    def drop_due_timers(self, now_us: int) -> None:
        """Discard every timer due at ``now_us`` (a recorded cycle says which of them fired)."""
        while self._timers and self._timers[0].deadline_us <= now_us:
            heapq.heappop(self._timers)

    def expire(self, part: PartitionState, app: App, out: list[OutputData], *, leave: bool = True) -> None:
        """The timer transition of an app's current state, at the time its timer was due.

        A Completed app leaves queue and partition (YuniKorn moveTerminatedApp); under rules
        version 1 it stayed, so folding a cycle of that version passes ``leave=False``.
        """
        if app.state == "Starting":
            part.transition(app, "Running", app.state_since_us + STARTING_TIMEOUT_US, self, out)
        elif app.state == "Completing":
            if app.gang is not None and app.gang.placeholders:
                gang.release_on_completion(part, app, out)
            part.transition(app, "Completed", app.state_since_us + COMPLETING_TIMEOUT_US, self, out)
            if leave:
                part.detach(app)
