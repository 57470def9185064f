"""Re-derivation: run every recorded cycle again, from the inputs and the recorded boundaries.

``Rederiver(source).steps()`` walks the recorded cycles in order; for each it takes the
cycle's inputs (``cycle.started``'s ``inputs_from`` … ``inputs_through``) and runs
``scheduler.core.logged_cycle.run_logged_cycle`` — the very function the live service runs —
at the recorded time, yielding the recorded records next to the re-derived outputs.
The engine is shared and mutated from step to step; a consumer that wants the state
after cycle ``k`` reads it from the step of cycle ``k``.

Start points: by default a fresh ``Engine`` (the built-in default config, as the
service) whose ``source`` is taken from the first recorded output, at positions ``{}``
and output offset 0. A ``StartPoint`` (e.g. restored from a snapshot by
``replay.snapshot_start``) supplies another engine, the input positions it has consumed
and the output offset of the next cycle's ``cycle.started``; its engine's
``cycle_number`` is the last cycle it contains.

Channels of one cycle are merged in the source's channel order
(``replay.reader.channel_order``), which is the order the service merged them in.

Rules versions: only cycles made under a rules version this build implements
(``scheduler.core.rules_version.IMPLEMENTED``) can be re-derived. A complete cycle of
another version is folded as fact (``scheduler.core.fact_fold``: its inputs, then its
recorded outputs), as recovery does, so the cycles after it start from the recorded state;
its step has ``folded`` set and no re-derived outputs. ``rederive_versions=None`` re-runs
every cycle with the current rules, ``rederive_from=N`` every cycle from N on (what-if: how
this code would have decided).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from events.log.port import LogRecord
from events.models import OutputEvent
from events.times import TimeFormatError, parse_time
from replay.reader import InputCursor, InputGap, LogSource, channel_order
from scheduler.core.engine import DEFAULT_SOURCE, Engine
from scheduler.core.fact_fold import FoldError, fold_recorded_cycle
from scheduler.core.logged_cycle import run_logged_cycle
from scheduler.core.recorded_cycles import LogStructureError, RecordedCycle, parse_record, recorded_cycles
from scheduler.core.rules_version import IMPLEMENTED, LEGACY_RULES_VERSION, rules_version_problem


@dataclass
class StartPoint:
    """Where re-derivation starts: an engine holding cycles ``1..engine.cycle_number``."""

    engine: Engine
    positions: dict[str, int] = field(default_factory=dict)
    output_offset: int = 0
    recorded_digest: str | None = None  # the log's state_digest for the engine's last cycle, when known


@dataclass
class RederivedCycle:
    """One re-derived cycle: what was recorded, what came out again, and the engine after it."""

    recorded: RecordedCycle
    derived: list[OutputEvent]
    inputs: list[LogRecord]
    engine: Engine
    folded: bool = False  # made under rules this build does not implement: folded from the record
    folded_digest: str | None = None

    @property
    def number(self) -> int:
        """The cycle number."""
        return self.recorded.number

    @property
    def rules_version(self) -> int:
        """The rules version that made the cycle (recorded in its ``cycle.started``)."""
        return self.recorded.started.rules_version

    def state_digest(self) -> str | None:
        """The state digest after this step: re-derived, or folded from the record."""
        if self.folded:
            return self.folded_digest
        final = self.derived[-1].data if self.derived else None
        digest = getattr(final, "state_digest", None)
        return digest if isinstance(digest, str) else None


RecordFilter = Callable[[int, LogRecord], bool]
CycleHook = Callable[[Engine, int, int], None]


class Rederiver:
    """Re-runs recorded cycles (see the module docstring).

    ``engine_factory(source)`` builds the starting engine when no ``StartPoint`` is given.
    ``keep(cycle, record)`` may drop input records before a cycle runs (what-if);
    ``before_cycle(engine, cycle, now_us)`` runs before a cycle's inputs are applied.
    ``through_cycle`` stops after that cycle. ``channel_order`` defaults to the source's
    (``replay.reader.channel_order``). Structural problems (a gap in the inputs, a cycle
    out of sequence) raise ``LogStructureError`` when the walk reaches them.
    """

    def __init__(
        self,
        source: LogSource,
        *,
        start: StartPoint | None = None,
        engine_factory: Callable[[str], Engine] | None = None,
        keep: RecordFilter | None = None,
        before_cycle: CycleHook | None = None,
        channel_order: Callable[[Iterable[str]], list[str]] | None = None,
        through_cycle: int | None = None,
        rederive_versions: frozenset[int] | None = IMPLEMENTED,
        rederive_from: int | None = None,
    ) -> None:
        self.source = source
        self.rederive_versions = rederive_versions
        self.rederive_from = rederive_from
        self._start = start
        self._factory = engine_factory or (lambda src: Engine(source=src))
        self._keep = keep
        self._before = before_cycle
        self._channel_order = channel_order or (lambda names: _source_order(source, names))
        self.through_cycle = through_cycle
        self.engine: Engine | None = start.engine if start is not None else None
        self.cursor = InputCursor(source, start.positions if start is not None else {})
        self.inputs_consumed = 0
        self.outputs_read = 0
        # Rules versions never go back (rules_version_problem); a range that starts from a
        # snapshot does not know the version before it: verify_parallel compares the ranges'.
        self.first_rules_version: int | None = None
        self.last_rules_version: int | None = None

    def _engine_for(self, first: LogRecord) -> Engine:
        if self.engine is None:
            obj = parse_record(first)
            src = obj.get("source") if obj is not None else None
            self.engine = self._factory(src if isinstance(src, str) and src else DEFAULT_SOURCE)
        return self.engine

    def steps(self) -> Iterator[RederivedCycle]:
        """Re-derive cycle after cycle, yielding each as it is done."""
        offset = self._start.output_offset if self._start is not None else 0
        for recorded in recorded_cycles(self.source.iter_outputs(offset)):
            if self.through_cycle is not None and recorded.number > self.through_cycle:
                return
            yield self._step(recorded)
            if self.through_cycle is not None and recorded.number >= self.through_cycle:
                return

    def _step(self, recorded: RecordedCycle) -> RederivedCycle:
        engine = self._engine_for(recorded.records[0])
        started = recorded.started
        off = recorded.records[0].offset
        expected = engine.cycle_number + 1
        if recorded.number != expected:
            raise LogStructureError(
                f"cycle.started at output offset {off} is for cycle {recorded.number}, "
                f"but the next cycle is {expected}",
                cycle=expected, output_offset=off,
            )
        problem = self.cursor.check_from(started.inputs_from)
        if problem is None:
            problem = rules_version_problem(started.rules_version, self.last_rules_version)
        if problem is None and recorded.complete and recorded.completed_data is not None:
            closing = recorded.completed_data.get("rules_version", LEGACY_RULES_VERSION)
            if closing != started.rules_version:
                problem = (f"cycle.started says rules version {started.rules_version}, cycle.completed "
                           f"{closing!r}")
        if problem is not None:
            raise LogStructureError(f"cycle {recorded.number}: {problem}", cycle=recorded.number, output_offset=off)
        self.last_rules_version = started.rules_version
        if self.first_rules_version is None:
            self.first_rules_version = started.rules_version
        try:
            now_us = parse_time(started.time)
            records = self.cursor.take(started.inputs_from, started.inputs_through)
        except (TimeFormatError, InputGap) as exc:
            raise LogStructureError(
                f"cycle {recorded.number}: {exc}", cycle=recorded.number, output_offset=off
            ) from None
        self.inputs_consumed += len(records)
        self.outputs_read += sum(len(a) for a in recorded.attempts) + len(recorded.records)
        applied = records if self._keep is None else [r for r in records if self._keep(recorded.number, r)]
        if self._before is not None:
            self._before(engine, recorded.number, now_us)
        channels = self._channel_order(set(started.inputs_through) | set(started.inputs_from))
        versions = self.rederive_versions
        always = self.rederive_from is not None and recorded.number >= self.rederive_from
        if recorded.complete and not always and versions is not None and started.rules_version not in versions:
            return self._fold(recorded, applied, channels, now_us, records, engine)
        derived = run_logged_cycle(
            engine, applied, channels, now_us, started.inputs_from, started.inputs_through,
            admin_channels=started.admin_channels,
        )
        return RederivedCycle(recorded, derived, records, engine)


    def _fold(self, recorded: RecordedCycle, applied: list[LogRecord], channels: list[str], now_us: int,
              records: list[LogRecord], engine: Engine) -> RederivedCycle:
        outputs = [parse_record(rec) for rec in recorded.records[1:-1]]
        off = recorded.records[0].offset
        try:
            if any(obj is None or not isinstance(obj.get("data"), dict) for obj in outputs):
                raise FoldError("an output record is unreadable")
            folded = fold_recorded_cycle(
                engine, applied, channels, now_us, outputs, recorded.started.rules_version,  # type: ignore[arg-type]
                recorded.started.admin_channels,
            )
        except (FoldError, KeyError, TypeError) as exc:
            raise LogStructureError(
                f"cycle {recorded.number} (rules version {recorded.started.rules_version}): cannot fold its "
                f"recorded outputs: {exc}", cycle=recorded.number, output_offset=off,
            ) from None
        return RederivedCycle(recorded, [], records, engine, folded=True, folded_digest=folded.digest)


def _source_order(source: LogSource, names: Iterable[str]) -> list[str]:
    return channel_order(source, names)


def inputs_range(started_from: Mapping[str, int], started_through: Mapping[str, int]) -> str:
    """``inputs@0..99`` style text for a cycle's input range (empty ranges left out)."""
    parts = []
    for ch in sorted(set(started_from) | set(started_through)):
        lo, hi = started_from.get(ch, 0), started_through.get(ch, started_from.get(ch, 0))
        parts.append(f"{ch}@{lo}..{hi - 1}" if hi > lo else f"{ch}: none")
    return ", ".join(parts) or "none"
