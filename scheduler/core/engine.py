"""The Engine: the core's one entry point for every driver (simulate, the service, replay).

It takes input records (bytes or decoded events), drops duplicates, folds the rest into
the state, and on ``cycle(now, positions)`` runs a cycle and returns that cycle's output
events — the inputs' rejections, state changes, decisions, then ``cycle.completed`` — each
with a deterministic envelope id. The same inputs and cycle boundaries give the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from events.codec import decode_input, reject
from events.model_construct import construct
from events.models import (
    OUTPUT_TYPE,
    CycleCompleted,
    InputEvent,
    InputRejected,
    OutputData,
    OutputEvent,
)
from events.seen import SeenIds
from events.times import format_time
from scheduler.config import SchedulerConfig
from scheduler.config.profiles import DEFAULT_PROFILE, RulesProfile
from scheduler.core.apply import apply
from scheduler.core.cycle import run_cycle
from scheduler.core.rules_version import RULES_VERSION
from scheduler.core.state import SchedulerState
from scheduler.core.state_form import state_digest, state_form

DEFAULT_SOURCE = "evsched"
OUTPUT_EVENT_FIELDS: Final = frozenset(OutputEvent.model_fields)


class Engine:
    """Decode → dedup → apply, and cycles with enveloped outputs."""

    def __init__(self, config: SchedulerConfig | None = None, *, source: str = DEFAULT_SOURCE) -> None:
        self.state = SchedulerState(config)
        self.source = source
        # Applied (source, id) pairs within the windows of events.seen (per source and in all).
        self.seen = SeenIds()
        self.pending_outputs: list[OutputData] = []

    @property
    def cycle_number(self) -> int:
        """Number of the last completed cycle (0 before the first)."""
        return self.state.cycle

    def ingest(self, raw: bytes, *, append_time_us: int, position: str) -> InputEvent | None:
        """Decode and apply one raw record; returns the event when it was readable."""
        decoded = decode_input(raw, append_time_us=append_time_us, position=position)
        if isinstance(decoded, InputRejected):
            self.pending_outputs.append(decoded)
            return None
        self.apply(decoded)
        return decoded

    def apply(self, event: InputEvent) -> None:
        """Apply one decoded event unless its (source, id) was seen before."""
        if not self.seen.add(event.source, event.id):
            message = f"event {event.id!r} from {event.source!r} was already applied"
            self.pending_outputs.append(reject(event.id, event.type, "duplicate", message))
            return
        apply(self.state, event, self.pending_outputs)

    def reject_raw(self, data: InputRejected) -> None:
        """Record a rejection decided outside the core (e.g. by the log reader)."""
        self.pending_outputs.append(data)

    def cycle(
        self, now_us: int, inputs_through: Mapping[str, int], max_allocations: int | None = None
    ) -> list[OutputEvent]:
        """Run one cycle; return every output of it, ``cycle.completed`` last."""
        outputs = self.pending_outputs
        self.pending_outputs = []
        cycle_outputs, decisions = run_cycle(self.state, now_us, max_allocations)
        outputs.extend(cycle_outputs)
        time_text = format_time(now_us)
        outputs.append(
            CycleCompleted.model_construct(
                cycle=self.state.cycle,
                time=time_text,
                inputs_through=dict(sorted(inputs_through.items())),
                decisions=decisions,
                state_digest=self.digest(),
                rules_version=RULES_VERSION,
                profiles=self.profiles(),
            )
        )
        cycle = self.state.cycle
        source = self.source
        # One fields-set for the cycle's envelopes: pydantic only reads it (model_copy copies it first).
        fields_set = set(OUTPUT_EVENT_FIELDS)
        return [
            construct(
                OutputEvent,
                {"specversion": "1.0", "id": f"{cycle}-{i}", "source": source, "type": OUTPUT_TYPE[type(data)],
                 "time": time_text, "data": data},
                fields_set,
            )
            for i, data in enumerate(outputs)
        ]

    def override_profile(self, profile: RulesProfile) -> None:
        """Run every partition under ``profile`` from now on, whatever the configs name (what-if)."""
        self.state.profile_override = profile
        for part in self.state.partitions.values():
            part.set_profile(profile)

    def profiles(self) -> dict[str, str] | None:
        """The partitions not on the default rules profile, and theirs (None: every one is)."""
        chosen = {name: part.profile.value for name, part in sorted(self.state.partitions.items())
                  if part.profile is not DEFAULT_PROFILE}
        return chosen or None

    def state_form(self) -> dict[str, object]:
        """The state in the contract's state form."""
        return state_form(self.state)

    def digest(self) -> str:
        """Digest of the state form (incremental: only changed entries are re-encoded)."""
        return state_digest(self.state)
