"""The audit's own view of gang scheduling: task groups' budgets, placeholders, and their checks.

Kept apart from the scheduler core (``scheduler/core/gang.py``): it counts from the inputs and the
recorded outputs alone. The rules (docs/semantics.md#gang-scheduling):

- ``gang-budget``: a real ask of a task group is allocated by the walk (not a replacement) while
  that group still has placeholders left to replace (asked for, minus replaced, minus given up);
- ``gang-replacement``: a decision that names a replaced placeholder follows, in its cycle, that
  placeholder's ``placeholder-replaced`` revocation, on the same node, of the same app and task
  group, and the placeholder held at least the real ask of every type;
- ``gang-placeholder``: a revocation for a placeholder's reason (``placeholder-replaced``,
  ``placeholder-timeout``) names a live placeholder allocation (under yunikorn-1.9 a
  ``placeholder-timeout`` may name a real allocation too).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from events.models import AllocationDecided, AllocationRevoked, AskAdded, AskReleased
from events.resources import Resources, normalized

AskKey = tuple[str, str, str]  # partition, app, ask
GroupKey = tuple[str, str, str]  # partition, app, task group


@dataclass
class GangAudit:
    """Task groups' budgets and the placeholders allocated, as the log tells them."""

    asks: dict[AskKey, tuple[bool, str]] = field(default_factory=dict)  # a gang ask → placeholder?, group
    left: dict[GroupKey, int] = field(default_factory=dict)  # placeholders left to replace per group
    placeholders: dict[AskKey, tuple[str, Resources]] = field(default_factory=dict)  # allocated → node, resources
    replaced: dict[AskKey, tuple[str, Resources, str]] = field(default_factory=dict)  # this cycle: node, res, group

    def ask_added(self, d: AskAdded, new: bool) -> None:
        """A pending ask (``new``: not an update of a pending one) of a gang."""
        if not (d.placeholder or d.task_group) or not new:
            return
        key = (d.partition, d.app_id, d.ask_id)
        self.asks[key] = (d.placeholder, d.task_group)
        if d.placeholder:
            group = (d.partition, d.app_id, d.task_group)
            self.left[group] = self.left.get(group, 0) + 1

    def _give_up(self, key: AskKey) -> None:
        placeholder, group = self.asks.get(key, (False, ""))
        if placeholder:
            g = (key[0], key[1], group)
            self.left[g] = self.left.get(g, 0) - 1

    def released_by_owner(self, key: AskKey) -> None:
        """``allocation.released`` of an allocation: a placeholder counts as given up."""
        if self.placeholders.pop(key, None) is not None:
            self._give_up(key)

    def ask_released(self, d: AskReleased, partition: str) -> None:
        """``ask.released``: a pending ask given up (a placeholder's counts)."""
        self._give_up((partition, d.app_id, d.ask_id))

    def app_left(self, partition: str, app_id: str) -> None:
        for store in (self.asks, self.placeholders, self.replaced):
            for key in [k for k in store if k[0] == partition and k[1] == app_id]:
                del store[key]
        for group in [g for g in self.left if g[0] == partition and g[1] == app_id]:
            del self.left[group]

    def new_cycle(self) -> None:
        self.replaced.clear()

    def revoked(self, d: AllocationRevoked, partition: str, rules_19: bool = False) -> Iterator[tuple[str, str]]:
        """A revocation (before the audit's state releases it): the violations it shows. ``rules_19``:
        its cycle ran the partition under yunikorn-1.9, whose placeholder timeout also revokes an app's
        real allocations (``placeholder-timeout``; docs/semantics.md#yunikorn-19)."""
        key = (partition, d.app_id, d.ask_id)
        if d.reason not in ("placeholder-replaced", "placeholder-timeout"):
            self.placeholders.pop(key, None)
            return
        held = self.placeholders.pop(key, None)
        if held is None and rules_19 and d.reason == "placeholder-timeout" and not self.asks.get(key, (False, ""))[0]:
            return  # a real allocation
        if held is None:
            yield "gang-placeholder", (f"allocation.revoked ({d.reason}) of {d.app_id}/{d.ask_id}: "
                                       "not a live placeholder")
            return
        if d.reason == "placeholder-timeout":
            self._give_up(key)
        else:
            self.replaced[key] = (held[0], held[1], self.asks.get(key, (True, ""))[1])

    def decided(self, d: AllocationDecided, partition: str, pending: Resources) -> Iterator[tuple[str, str]]:
        """A decision for a pending ask of ``pending`` resources: the violations it shows."""
        key = (partition, d.app_id, d.ask_id)
        placeholder, group = self.asks.get(key, (False, ""))
        replaced_ask = getattr(d, "replaced_ask_id", None)
        if placeholder:
            self.placeholders[key] = (d.node_id, dict(pending))
        elif replaced_ask is not None:
            ph = self.replaced.pop((partition, d.app_id, replaced_ask), None)
            if ph is None:
                yield "gang-replacement", (f"decision {d.decision_id} replaces {d.app_id}/{replaced_ask}, which was "
                                           "not revoked as placeholder-replaced before it in its cycle")
                return
            node, held, ph_group = ph
            if node != d.node_id:
                yield "gang-replacement", (f"decision {d.decision_id} is on {d.node_id}; the placeholder it replaces "
                                           f"was on {node}")
            if ph_group != group:
                yield "gang-replacement", (f"decision {d.decision_id} (task group {group!r}) replaces a placeholder "
                                           f"of task group {ph_group!r}")
            if any(held.get(name, 0) < qty for name, qty in normalized(pending).items()):
                yield "gang-replacement", f"decision {d.decision_id} asks more than the placeholder it replaces held"
            g = (partition, d.app_id, group)
            self.left[g] = self.left.get(g, 0) - 1
        elif group and self.left.get((partition, d.app_id, group), 0) > 0:
            yield "gang-budget", (f"decision {d.decision_id} places real ask {d.app_id}/{d.ask_id} of task group "
                                  f"{group!r} while {self.left[(partition, d.app_id, group)]} of its placeholders "
                                  "are left to replace")
