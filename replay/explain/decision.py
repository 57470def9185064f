"""Explain one allocation decision: re-derive its step and say why each queue, app, ask and node won or lost.

``explain_decision`` takes an Engine holding the state *before* the decision's cycle and
that cycle's batch (records, time, positions), applies the batch with the core's own
``scheduler.core.logged_cycle.apply_batch``, opens the cycle with ``begin_cycle`` and walks the
cycle's own loop, ``cycle_steps`` (what ``run_cycle`` runs), committing the steps before the
decision (reservation steps included). For the decision's step it re-walks
the state read-only (``replay.explain.walk``), then checks that walk against the core's
``next_step`` and against the recorded decision; any disagreement is put first in the
summary as a WARNING. A decision that allocated a reserved ask (reserved asks go first)
is explained as such: which node it held and since which cycle.

Pure: no I/O — the caller passes the engine and records (``replay.explain.from_log`` reads logs).
The engine is consumed: afterwards it holds a half-run cycle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from events.log.port import LogRecord
from events.models import AllocationDecided, OutputData
from events.times import format_time
from replay.explain.format import RULE_RESERVATION, RULE_STEP
from replay.explain.pending import PendingExplanation, explain_pending
from replay.explain.report import ask_section, leaf_of, leaf_section, node_section, queue_levels
from replay.explain.summary import summary
from replay.explain.walk import Choice, Walker
from scheduler.config.profiles import DEFAULT_PROFILE
from scheduler.core.cycle import (
    CycleMemo,
    begin_cycle,
    cycle_steps,
    fits_queue_headroom,
    held_by_max_applications,
    next_step,
)
from scheduler.core.engine import Engine
from scheduler.core.logged_cycle import apply_batch
from scheduler.core.partition import PartitionState
from scheduler.core.reservations import Step, reserved_step

__all__ = ["CycleBatch", "ExplainError", "Explanation", "PendingExplanation", "explain_decision", "explain_pending"]


class ExplainError(Exception):
    """The decision cannot be explained from what was given (unknown id, wrong cycle)."""


@dataclass(frozen=True)
class CycleBatch:
    """One logged cycle's inputs and boundaries, as ``cycle.started`` records them."""

    cycle: int
    now_us: int
    inputs_from: Mapping[str, int]
    inputs_through: Mapping[str, int]
    records: Sequence[LogRecord]
    channel_order: Sequence[str] = ("inputs",)
    admin_channels: Sequence[str] | None = None  # as cycle.started records them


@dataclass
class Explanation:
    """Why a decision went the way it did (see the module docstring); ``to_dict`` is the JSON form."""

    decision_id: str
    partition: str
    cycle: int
    step: int
    time: str
    chosen: dict[str, str] | None
    engine_choice: dict[str, str] | None
    recorded: dict[str, Any] | None
    verified: bool
    problems: list[str]
    queue_walk: list[dict[str, Any]]
    leaf: dict[str, Any] | None
    asks: dict[str, Any] | None
    nodes: dict[str, Any] | None
    summary: str
    rule: str = RULE_STEP
    notes: list[str] = field(default_factory=list)
    profile: str = DEFAULT_PROFILE.value  # the partition's rules profile (docs/semantics.md#rules-profiles)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (serialise with sorted keys for a stable text)."""
        return {"type": "explanation", **asdict(self)}


def parse_decision_id(decision_id: str) -> tuple[str, int, int]:
    """``<partition>-<cycle>-<step>`` → its parts (partition names may contain ``-``)."""
    parts = decision_id.rsplit("-", 2)
    if len(parts) != 3 or not parts[0] or not parts[1].isdigit() or not parts[2].isdigit():
        raise ExplainError(f"{decision_id!r} is not a decision id (expected <partition>-<cycle>-<step>)")
    partition, cycle, step = parts[0], int(parts[1]), int(parts[2])
    if cycle < 1 or step < 1:
        raise ExplainError(f"{decision_id!r} is not a decision id (cycle and step count from 1)")
    return partition, cycle, step


def _advance_to_step(engine: Engine, batch: CycleBatch, partition: str, step: int) -> tuple[PartitionState, CycleMemo]:
    """Open the cycle and walk its steps (``cycle_steps``, the cycle's own loop) to decision ``step``, uncommitted."""
    state = engine.state
    out: list[OutputData] = []
    made = 0
    for part, memo, found, decisions in cycle_steps(state, batch.now_us, begin_cycle(state, batch.now_us, out), out):
        if part.name == partition and decisions == step - 1 and found.reserve is None:
            return part, memo  # the memo only learnt failures that stay failures
        made = decisions + (found.reserve is None)
    if partition not in state.partitions:
        raise ExplainError(f"partition {partition!r} does not exist in cycle {batch.cycle}")
    raise ExplainError(f"cycle {batch.cycle} re-derives only {made} decisions; there is no step {step}")


def _ids(choice: Choice | Step | None) -> dict[str, str] | None:
    if choice is None:
        return None
    if isinstance(choice, Step):
        if choice.reserve is not None:
            return None
        choice = (choice.app, choice.ask, choice.node)
    app, ask, node = choice
    return {"app_id": app.app_id, "ask_id": ask.ask_id, "node_id": node.node_id, "queue": app.queue.path}


def _verify(
    mine: dict[str, str] | None,
    engine: dict[str, str] | None,
    scan_node: str | None,
    recorded: AllocationDecided | None,
) -> list[str]:
    problems = []
    if mine != engine:
        problems.append(f"the explaining walk chose {mine} but the scheduler core's next_step chooses {engine}")
    if mine is not None and scan_node != mine["node_id"]:
        problems.append(f"the node scan found {scan_node} first but the node index's first fit is {mine['node_id']}")
    if recorded is not None:
        logged = {"app_id": recorded.app_id, "ask_id": recorded.ask_id, "node_id": recorded.node_id,
                  "queue": recorded.queue}
        if engine != logged:
            problems.append(f"the log records {logged} but re-deriving the step gives {engine}")
    return problems


def explain_decision(
    engine: Engine, batch: CycleBatch, decision_id: str, recorded: AllocationDecided | None = None
) -> Explanation:
    """Explain decision ``decision_id`` of ``batch``'s cycle; ``engine`` is at the end of the cycle before."""
    partition, cycle, step = parse_decision_id(decision_id)
    if batch.cycle != cycle:
        raise ExplainError(f"decision {decision_id} is in cycle {cycle}, the batch is cycle {batch.cycle}")
    if engine.cycle_number != cycle - 1:
        raise ExplainError(f"the engine is after cycle {engine.cycle_number}, not {cycle - 1}")
    apply_batch(engine, batch.records, batch.channel_order, admin_channels=batch.admin_channels)
    part, memo = _advance_to_step(engine, batch, partition, step)
    reserved = reserved_step(part, fits_queue_headroom, held_by_max_applications)
    if reserved is not None:
        return _reserved_explanation(decision_id, partition, cycle, step, batch, reserved, recorded,
                                     part.profile.value)
    walk = Walker(part).try_queue(part.root)
    engine_choice = _ids(next_step(part, memo, batch.now_us))  # reads the state; only the throwaway memo changes
    mine = _ids(walk.choice)
    levels = queue_levels(walk)
    leaf_try = leaf_of(walk)
    leaf = leaf_section(leaf_try) if leaf_try is not None else None
    asks = nodes = None
    scan_node = None
    if walk.choice is not None and leaf_try is not None:
        asks = ask_section(leaf_try.app_tries[-1])
        nodes, scan_node = node_section(part, walk.choice[1])
    problems = _verify(mine, engine_choice, scan_node, recorded)
    return Explanation(
        decision_id=decision_id,
        partition=partition,
        cycle=cycle,
        step=step,
        time=format_time(batch.now_us),
        chosen=mine,
        engine_choice=engine_choice,
        recorded=recorded.model_dump() if recorded is not None else None,
        verified=not problems and recorded is not None,
        problems=problems,
        queue_walk=levels,
        leaf=leaf,
        asks=asks,
        nodes=nodes,
        summary=summary(mine, levels, leaf, asks, nodes, problems),
        notes=[] if recorded is not None else ["no recorded decision was given: only checked against the core"],
        profile=part.profile.value,
    )


def _reserved_explanation(
    decision_id: str, partition: str, cycle: int, step: int, batch: CycleBatch, found: Step,
    recorded: AllocationDecided | None, profile: str,
) -> Explanation:
    """A decision made by the reserved-asks pass (it runs before the walk from root)."""
    chosen = _ids(found)
    assert chosen is not None and found.ask.reserved_node is not None
    problems = _verify(chosen, chosen, chosen["node_id"], recorded)
    held = found.ask.reserved_node
    where = "on the node it held" if held == found.node.node_id else f"on {found.node.node_id} (it held {held})"
    text = (
        f"Decision {decision_id}: ask {found.ask.ask_id} of app {found.app.app_id} (queue {found.app.queue.path}) "
        f"was reserved on node {held} since cycle {found.ask.reserved_cycle}; reserved asks are tried before "
        f"any other ask, and it now fits {where} [{RULE_RESERVATION}]."
    )
    if problems:
        text = "WARNING: " + "; ".join(problems) + ". " + text
    return Explanation(
        decision_id=decision_id, partition=partition, cycle=cycle, step=step, time=format_time(batch.now_us),
        chosen=chosen, engine_choice=chosen, recorded=recorded.model_dump() if recorded is not None else None,
        verified=not problems and recorded is not None, problems=problems, queue_walk=[], leaf=None,
        asks=None, nodes=None, summary=text, rule=RULE_RESERVATION,
        notes=[] if recorded is not None else ["no recorded decision was given: only checked against the core"],
        profile=profile,
    )
