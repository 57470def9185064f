"""An independent audit of a decision log: invariants checked without the scheduler core's decision code.

Feed it the output records in order (``feed``); it buffers each cycle until its
``cycle.completed``, then folds that cycle's inputs (``inputs_from`` … ``inputs_through``,
fetched through the ``InputSource`` callback, minus what the cycle's ``input.rejected``
outputs say the scheduler refused) into ``replay.audit.state`` and checks every output:

- ``cycle-sequence``: cycles run 1, 2, 3 … each opened by ``cycle.started`` and closed by
  ``cycle.completed`` of the same number; ``inputs-contiguous``: each cycle's inputs start
  where the previous cycle's ended; ``cycle-number``: outputs carry their cycle's number;
  ``decision-count``: ``cycle.completed.decisions`` equals the decisions in the cycle;
- ``decision-id-duplicate``: a repeated ``decision_id`` must repeat the same content (a
  copy is then dropped); ``ask-not-pending``/``app-unknown``: every decision names an ask
  that is pending in an existing app (``decision-mismatch``: with that ask's resources and
  the app's queue); ``node-unknown``/``node-unschedulable`` (a required-node ask may use
  its unschedulable node);
- ``node-reserved``: no decision places an ask on a node reserved for another ask;
  ``reservation-unknown``: ``ask.reserved`` names a pending ask and a free node,
  ``ask.unreserved`` an existing reservation; ``reservation-orphaned``: at the end of a
  cycle every reservation's ask is still pending (a reservation never outlives its ask);
- ``node-capacity``: allocated + occupied ≤ capacity on the decision's node, for each type it
  allocates, at the time of the decision; ``queue-max``: each queue's allocated ≤ its max
  for the types the max names — a ``0`` entry forbids its type — (root: the cluster's
  capacity; a missing type counts as 0); ``user-limit``: no user's or group's usage passes
  a ``maxresources`` of its ``limits`` (``replay.audit.user_limits``). Apps placed by
  placement rules are in the queue their ``app.placed`` output names.
- ``admin-channel``: in a cycle that names its admin channels, no rules change
  (``config.updated``, ``priorityclass.*``) is applied from another channel. In cycles that
  name none (logs before the admin channel, ``--accept-admin-on-inputs``) such changes are
  reported (``off_admin``, the summary's ``admin_off_channel``), not counted as violations.
- ``rules-version``: each cycle's ``rules_version`` is one this build knows (1 up to its own)
  and never below an earlier cycle's (``scheduler.core.rules_version.rules_version_problem``),
  and ``cycle.completed`` repeats ``cycle.started``'s;
- gang scheduling (``replay.audit.gang``): ``gang-budget`` (no real ask of a task group is
  allocated by the walk while its group has placeholders left to replace), ``gang-replacement``
  (a replacement follows its placeholder's revocation, same node, app and group, and fits in
  it), ``gang-placeholder`` (a placeholder's revocation names a live placeholder);
  ``ask.released`` ends a pending ask, and a Failed app leaves as a Completed one does;
- preemption (``replay.audit.preemption``), for each ``allocation.revoked`` with reason
  ``preempted``: ``preemption-victim`` (a live allocation, not already preempted, for a pending
  preemptor), ``preemption-priority`` (the victim's priority is at most the preemptor's, as
  adjusted by queue offsets, unless a priority fence lets everything below it go),
  ``preemption-fence`` (the victim's queue is inside the preemptor's preemption fence and not
  ``preemption.policy: disabled``), ``preemption-guarantee`` (the victim's queue is still at
  or above its guarantee without it). A victim stays allocated until ``allocation.released``.

A decision naming no pending ask is reported and not applied (nothing was really placed);
any other violating decision is applied, as the scheduler did. A cycle re-run after a
crash (the same ``cycle.started`` again before ``cycle.completed``) counts once.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from events.codec import decode_input, decode_output
from events.log.port import LogRecord
from events.models import (
    ADMIN_TYPES,
    AllocationDecided,
    AllocationRevoked,
    AppPlaced,
    AppStateChanged,
    AskReleased,
    AskReserved,
    AskUnreserved,
    CycleCompleted,
    CycleStarted,
    InputEvent,
    InputRejected,
    OutputEvent,
)
from events.rules_version import KNOWN, rules_version_problem
from events.units import fmt_quantity as fq
from events.units import fmt_resources
from replay.audit.preemption import check_preemption
from replay.audit.state import AuditState, queue_prefixes

InputSource = Callable[[Mapping[str, int], Mapping[str, int]], Iterable[LogRecord]]


@dataclass(frozen=True)
class Violation:
    """One broken invariant."""

    rule: str
    cycle: int | None
    message: str
    decision_id: str | None = None

    def as_event(self) -> dict[str, Any]:
        """The output-event style record: ``{"type": "audit.violation", "data": {...}}``."""
        data: dict[str, Any] = {"rule": self.rule, "cycle": self.cycle, "message": self.message}
        if self.decision_id is not None:
            data["decision_id"] = self.decision_id
        return {"type": "audit.violation", "data": data}


@dataclass
class _Cycle:
    started: CycleStarted
    outputs: list[OutputEvent] = field(default_factory=list)


class Auditor:
    """Consumes output records and reports violations (see the module docstring)."""

    def __init__(self, inputs: InputSource, channel_order: Sequence[str] = ("inputs",),
                 admin_channels: Sequence[str] = ("admin",)) -> None:
        self.inputs = inputs
        self.channel_order = list(channel_order)
        # The log's admin channels, for cycles that do not name theirs (before the admin channel).
        self.admin_channels = list(admin_channels)
        self.off_admin: list[str] = []  # rules changes applied from elsewhere (reported, not violations)
        self.state = AuditState()
        self.violations: list[Violation] = []
        self.positions: dict[str, int] = {}
        self.last_cycle = 0
        self.rules_version: int | None = None  # the highest known rules version of the cycles so far
        self.open: _Cycle | None = None
        self.decisions: dict[str, AllocationDecided] = {}
        self.completed: dict[int, CycleCompleted] = {}
        self.counts: Counter[str] = Counter()

    def _flag(self, rule: str, cycle: int | None, message: str, decision_id: str | None = None) -> None:
        self.violations.append(Violation(rule, cycle, message, decision_id))

    # -- the output stream ------------------------------------------------------------

    def feed(self, record: LogRecord) -> None:
        """One output record, in log order."""
        self.counts["outputs"] += 1
        try:
            event = decode_output(record.value)
        except (ValueError, KeyError) as exc:
            cycle = self.open.started.cycle if self.open else None
            self._flag("unreadable-output", cycle, f"output {record.position} cannot be read: {exc}")
            return
        data = event.data
        if isinstance(data, CycleStarted):
            self._start(data)
        elif self.open is None:
            self._flag("cycle-sequence", None, f"output {event.id} ({event.type}) is outside any cycle")
        elif isinstance(data, CycleCompleted):
            open_cycle, self.open = self.open, None
            self._close(open_cycle, data)
        else:
            self.open.outputs.append(event)

    def _start(self, started: CycleStarted) -> None:
        if self.open is not None:
            prev = self.open.started
            if prev.cycle == started.cycle:
                if (prev.inputs_from, prev.inputs_through, prev.time) != (
                    started.inputs_from, started.inputs_through, started.time
                ):
                    self._flag("cycle-sequence", started.cycle, f"cycle {started.cycle} was re-run with other inputs")
                self.counts["reruns"] += 1  # a crashed cycle's re-run: its partial outputs are copies
            else:
                self._flag("cycle-sequence", prev.cycle, f"cycle {prev.cycle} started but never completed")
                self._close(self.open, None)
        self.open = _Cycle(started)

    def _close(self, cycle: _Cycle, completed: CycleCompleted | None) -> None:
        k = cycle.started.cycle
        if completed is not None and completed.cycle != k:
            self._flag("cycle-sequence", k, f"cycle {k} closed by cycle.completed of cycle {completed.cycle}")
        if k <= self.last_cycle:
            seen = self.completed.get(k)
            if completed is None or seen is None or seen.state_digest != completed.state_digest:
                self._flag("cycle-sequence", k, f"cycle {k} appears again after cycle {self.last_cycle}")
            for event in cycle.outputs:
                if isinstance(event.data, AllocationDecided):
                    self._duplicate(event.data, k)
            return
        if k != self.last_cycle + 1:
            missing = f"{self.last_cycle + 1}" if k == self.last_cycle + 2 else f"{self.last_cycle + 1}–{k - 1}"
            self._flag("cycle-sequence", k, f"cycle {k} follows cycle {self.last_cycle}: cycle {missing} is missing")
        self.last_cycle = k
        self.counts["cycles"] += 1
        self._check_rules_version(cycle.started, completed)
        if completed is not None:
            self.completed[k] = completed
        self._apply_inputs(cycle)
        self.state.gang.new_cycle()
        decided = 0
        for event in cycle.outputs:
            if not event.id.startswith(f"{k}-"):
                self._flag("cycle-number", k, f"output {event.id} in cycle {k} has another cycle's id")
            if isinstance(event.data, AllocationDecided):
                decided += self._decision(event.data, k)
            elif isinstance(event.data, AskReleased):
                d_rel = event.data
                part = self.state.app_partition.get(d_rel.app_id, "default")
                self.state.gang.ask_released(d_rel, part)
                if self.state.pending.pop((part, d_rel.app_id, d_rel.ask_id), None) is not None:
                    self.state.app_asks.get((part, d_rel.app_id), set()).discard(d_rel.ask_id)
            elif isinstance(event.data, AllocationRevoked) and event.data.reason == "preempted":
                for rule, message in check_preemption(self.state, event.data):
                    self._flag(rule, k, message, event.data.decision_id)
            elif isinstance(event.data, AllocationRevoked):
                d = event.data
                part = self.state.app_partition.get(d.app_id, "default")
                rules_19 = completed is not None and (completed.profiles or {}).get(part) == "yunikorn-1.9"
                for rule, message in self.state.gang.revoked(d, part, rules_19):
                    self._flag(rule, k, message, d.decision_id)
                self.state.release((part, d.app_id, d.ask_id))
            elif isinstance(event.data, AskReserved | AskUnreserved):
                self._reservation(event.data, k)
            elif isinstance(event.data, AppStateChanged) and event.data.to in ("Completed", "Failed"):
                app_id = event.data.app_id
                self.state.remove_app(self.state.app_partition.get(app_id, "default"), app_id)
        for (part, node_id), key in sorted(self.state.reserved.items()):
            if key not in self.state.pending:
                self._flag("reservation-orphaned", k,
                           f"node {node_id} is still reserved for {key[1]}/{key[2]}, which is no longer pending")
                del self.state.reserved[(part, node_id)]
        if completed is not None and completed.decisions != decided:
            self._flag("decision-count", k, f"cycle {k} reports {completed.decisions} decisions but has {decided}")
        if completed is not None and completed.inputs_through != cycle.started.inputs_through:
            self._flag("inputs-contiguous", k, f"cycle {k}'s cycle.started and cycle.completed disagree on inputs")

    def _check_rules_version(self, started: CycleStarted, completed: CycleCompleted | None) -> None:
        k = started.cycle
        problem = rules_version_problem(started.rules_version, self.rules_version)
        if problem is None and completed is not None and completed.rules_version != started.rules_version:
            problem = (f"cycle.started says rules version {started.rules_version}, cycle.completed "
                       f"{completed.rules_version}")
        if problem is not None:
            self._flag("rules-version", k, f"cycle {k}: {problem}")
        if started.rules_version in KNOWN:  # an unknown one says nothing of the versions after it
            self.rules_version = max(started.rules_version, self.rules_version or 0)

    # -- inputs -----------------------------------------------------------------------

    def _apply_inputs(self, cycle: _Cycle) -> None:
        started = cycle.started
        k = started.cycle
        if any(started.inputs_from.get(ch, 0) != self.positions.get(ch, 0) for ch in started.inputs_from):
            self._flag(
                "inputs-contiguous", k,
                f"cycle {k} reads inputs from {dict(started.inputs_from)} but earlier cycles ended at {self.positions}",
            )
        # Read from where the audit stopped, so a gap is still folded in and an overlap not twice.
        start = {ch: self.positions.get(ch, 0) for ch in started.inputs_through}
        rejected = Counter(
            e.data.input_id for e in cycle.outputs
            if isinstance(e.data, InputRejected) and e.data.reason != "duplicate"
        )
        for e in cycle.outputs:
            if isinstance(e.data, AppPlaced):  # the queue placement rules chose (maybe created)
                self.state.placed[(e.data.partition, e.data.app_id)] = e.data.queue
        for channel, event in merged_input_records(self.inputs(start, started.inputs_through), self.channel_order):
            self.counts["inputs"] += 1
            if rejected[event.id] > 0:
                rejected[event.id] -= 1
                continue
            if event.type in ADMIN_TYPES:
                self._admin_event(started, channel, event)
            self.state.apply(event)
        for ch, end in started.inputs_through.items():
            self.positions[ch] = max(self.positions.get(ch, 0), end)

    def _admin_event(self, started: CycleStarted, channel: str, event: InputEvent) -> None:
        """A rules change the scheduler applied: from an admin channel, or reported (``off_admin``)."""
        named = started.admin_channels
        if channel in (named if named is not None else self.admin_channels):
            return
        what = f"{event.type} {event.id!r} from {event.source!r} on {channel}"
        if named is not None:  # the scheduler must have refused it: a tampered log or a bug
            self._flag("admin-channel", started.cycle,
                       f"{what} was applied, but cycle {started.cycle} accepts rules changes only from "
                       f"{', '.join(named) or 'no channel'}")
            return
        self.off_admin.append(f"cycle {started.cycle}: {what} was applied though it did not come from the admin "
                              "channel (a cycle before the admin channel, or run --accept-admin-on-inputs)")

    # -- reservations -----------------------------------------------------------------

    def _reservation(self, d: AskReserved | AskUnreserved, k: int) -> None:
        st = self.state
        part = st.app_partition.get(d.app_id, "default")
        key = (part, d.app_id, d.ask_id)
        where = (part, d.node_id)
        if isinstance(d, AskReserved):
            if key not in st.pending or where not in st.nodes or where in st.reserved:
                self._flag("reservation-unknown", k, f"ask.reserved of {d.app_id}/{d.ask_id} on {d.node_id}: "
                           "the ask is not pending, the node does not exist or is already reserved")
            st.reserved[where] = key
        elif st.reserved.get(where) != key:
            self._flag("reservation-unknown", k,
                       f"ask.unreserved of {d.app_id}/{d.ask_id} on {d.node_id}: no such reservation")
        else:
            del st.reserved[where]

    # -- decisions --------------------------------------------------------------------

    def _duplicate(self, d: AllocationDecided, k: int) -> bool:
        """True when the id was seen; flags it when the content differs."""
        seen = self.decisions.get(d.decision_id)
        if seen is None:
            return False
        if seen != d:
            self._flag(
                "decision-id-duplicate", k,
                f"decision {d.decision_id} repeated with other content ({_diff(seen, d)})", d.decision_id,
            )
        return True

    def _decision(self, d: AllocationDecided, k: int) -> bool:
        """Check one decision and fold it in; False for a repeated id (not counted again)."""
        did = d.decision_id
        if self._duplicate(d, k):
            return False
        self.decisions[did] = d
        self.counts["decisions"] += 1
        if d.cycle != k or not did.startswith(f"{d.partition}-{k}-"):
            self._flag("cycle-number", k, f"decision {did} (cycle {d.cycle}) is written in cycle {k}", did)
        st = self.state
        key = (d.partition, d.app_id, d.ask_id)
        queue = st.apps.get((d.partition, d.app_id))
        if queue is None:
            self._flag("app-unknown", k, f"decision {did} is for app {d.app_id}, which does not exist", did)
            return True
        pending = st.pending.get(key)
        if pending is None:
            alloc = st.allocs.get(key)
            what = f"is already allocated by {alloc.decision_id}" if alloc else "was never added (or was removed)"
            self._flag("ask-not-pending", k, f"decision {did} names ask {d.app_id}/{d.ask_id}, which {what}", did)
            return True
        if pending != {n: v for n, v in d.resources.items() if v}:
            self._flag("decision-mismatch", k, f"decision {did} allocates {fmt_resources(d.resources)}, the ask asks "
                       f"{fmt_resources(pending)}", did)
        if d.queue != queue:
            self._flag("decision-mismatch", k, f"decision {did} names queue {d.queue}, the app is in {queue}", did)
        for rule, message in st.gang.decided(d, d.partition, pending):
            self._flag(rule, k, message, did)
        node = st.nodes.get((d.partition, d.node_id))
        if node is None:
            self._flag("node-unknown", k, f"decision {did} uses node {d.node_id}, which does not exist", did)
        elif not node.schedulable and st.required.get(key) != d.node_id:
            self._flag("node-unschedulable", k, f"decision {did} uses node {d.node_id}, which is unschedulable", did)
        holder = st.reserved.get((d.partition, d.node_id))
        if holder is not None and holder != key:
            self._flag("node-reserved", k, f"decision {did} uses node {d.node_id}, which is reserved for "
                       f"{holder[1]}/{holder[2]}", did)
        for message in st.allocate(key, d.node_id, pending, queue, did, d.priority):
            self._flag("user-limit", k, f"decision {did} puts {message}", did)
        if node is not None:
            for name in sorted(pending):
                used = node.allocated.get(name, 0) + node.occupied.get(name, 0)
                if used > node.capacity.get(name, 0):
                    self._flag(
                        "node-capacity", k,
                        f"decision {did} puts node {d.node_id} over capacity: {name} allocated + occupied "
                        f"{fq(name, used)} > capacity {fq(name, node.capacity.get(name, 0))}", did,
                    )
        for path in queue_prefixes(queue):
            self._check_queue(d.partition, path, pending, k, did)
        return True

    def _check_queue(self, partition: str, path: str, request: Mapping[str, int], k: int, did: str) -> None:
        limit = self.state.queue_max(partition, path)
        if limit is None:
            return
        allocated = self.state.queue_allocated.get((partition, path), {})
        is_root = "." not in path
        for name in sorted(request):
            if name not in limit and not is_root:
                continue  # types a max does not name are unlimited (except at root)
            cap = limit.get(name, 0)
            if allocated.get(name, 0) > cap:
                what = "the cluster's capacity" if is_root else "its max"
                self._flag(
                    "queue-max", k,
                    f"decision {did} puts queue {path} over {what}: {name} allocated "
                    f"{fq(name, allocated.get(name, 0))} > {fq(name, cap)}",
                    did,
                )

    # -- results ----------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        """Counts, violations by rule, and whether the log is clean."""
        by_rule = Counter(v.rule for v in self.violations)
        return {
            "type": "audit.summary",
            "data": {
                "clean": not self.violations,
                "cycles": self.counts["cycles"],
                "decisions": self.counts["decisions"],
                "inputs": self.counts["inputs"],
                "outputs": self.counts["outputs"],
                "reruns": self.counts["reruns"],
                "violations": len(self.violations),
                "admin_off_channel": len(self.off_admin),
                "by_rule": dict(sorted(by_rule.items())),
                "open_cycle": self.open.started.cycle if self.open else None,
            },
        }


def merged_inputs(records: Iterable[LogRecord], channel_order: Sequence[str]) -> list[InputEvent]:
    """The readable input events of ``records`` in docs/contract.md §4 merge order.

    An unreadable record still takes its place in the merge, at its append time (as the
    scheduler orders it): dropping it first would change which record heads its channel,
    and so the interleaving of the others.
    """
    return [event for _, event in merged_input_records(records, channel_order)]


def merged_input_records(records: Iterable[LogRecord], channel_order: Sequence[str]) -> list[tuple[str, InputEvent]]:
    """``merged_inputs`` with the channel each event was read from."""
    rank = {ch: i for i, ch in enumerate(channel_order)}
    decoded: list[_Item] = []
    for rec in records:
        result = decode_input(rec.value, append_time_us=rec.append_time_us, position=rec.position)
        event = result if isinstance(result, InputEvent) else None
        time_us = event.time_us if event is not None else rec.append_time_us
        decoded.append((time_us, rank.get(rec.channel, len(rank)), rec.offset, event, rec.channel))
    return [(item[4], item[3]) for item in _merged(decoded) if item[3] is not None]


_Item = tuple[int, int, int, InputEvent | None, str]


def _merged(items: list[_Item]) -> list[_Item]:
    """docs/contract.md §4 merge: by event time then channel order, each channel kept in offset order."""
    channels: dict[int, list[_Item]] = {}
    for item in items:
        channels.setdefault(item[1], []).append(item)
    if len(channels) <= 1:
        return sorted(items, key=lambda i: i[2])
    lists = {ch: sorted(v, key=lambda i: i[2]) for ch, v in channels.items()}
    heap = [(v[0][0], ch, 0) for ch, v in lists.items()]
    heapq.heapify(heap)
    out: list[_Item] = []
    while heap:
        _, ch, i = heapq.heappop(heap)
        out.append(lists[ch][i])
        if i + 1 < len(lists[ch]):
            heapq.heappush(heap, (lists[ch][i + 1][0], ch, i + 1))
    return out


def _diff(a: AllocationDecided, b: AllocationDecided) -> str:
    da, db = a.model_dump(), b.model_dump()
    return ", ".join(f"{k}: {da[k]!r} vs {db[k]!r}" for k in sorted(da) if da[k] != db[k])
