"""A queue's pending asks, Kueue-style: each with its place in the queue and the partition, every reason, and a way out.

``pending_in_queue(engine, partition, queue, offset, limit)`` lists the pending asks under
``queue`` (a leaf, or a parent: its whole subtree) in the order the next cycle tries them
(``scheduler.core.try_order``, built from the cycle's own orders), each with its position
among them (``positionInQueue``, from 1), in its leaf queue (``positionInLeafQueue``) and in
the partition (``positionInPartition``), every reason it is held (``replay.explain.pending``,
the explain walk's checks) and what would let it run (``replay.explain.remedy``). Only the
page asked for is explained (``offset``/``limit``), so a request costs the order plus
``limit`` explanations; facts that depend only on a request's shape are found once per page.
"""

from __future__ import annotations

from typing import Any, Final

from events.resources import normalized
from replay.explain.format import fmt_res
from replay.explain.pending import explain_pending
from replay.explain.remedy import Remedy, Shape, remedies
from replay.explain.walk import Walker
from scheduler.core.engine import Engine
from scheduler.core.objects import App, Ask
from scheduler.core.try_order import try_order

MAX_LIMIT: Final = 500  # asks explained per request (each costs an explanation)
DEFAULT_LIMIT: Final = 50


class UnknownQueue(KeyError):
    """The partition or queue asked about does not exist."""


def _under(app: App, queue: str) -> bool:
    path = app.queue.path
    return path == queue or path.startswith(queue + ".")


def _item(engine: Engine, partition: str, walker: Walker, by_shape: dict[Shape, list[Remedy]], app: App, ask: Ask,
          in_queue: int, in_partition: int, in_leaf: int) -> dict[str, Any]:
    why = explain_pending(engine, app.app_id, ask.ask_id, partition, walker=walker)
    part = engine.state.partitions[partition]
    fixes = remedies(part, app, ask, {r["rule"] for r in why.reasons}, by_shape)
    return {
        "applicationID": app.app_id,
        "allocationKey": ask.ask_id,
        "queueName": app.queue.path,
        "user": app.user,
        "applicationState": app.state,
        "priority": ask.priority,
        "resource": normalized(ask.resources),
        "requiredNodeId": ask.required_node,
        "reservedNodeId": ask.reserved_node,
        "positionInQueue": in_queue,
        "positionInPartition": in_partition,
        "positionInLeafQueue": in_leaf,
        "reasons": why.reasons,
        "wouldRun": fixes,
        "preemption": why.preemption,  # for an ask that may preempt: its preconditions, what an attempt finds now
        "summary": why.summary,
    }


def pending_in_queue(engine: Engine, partition: str, queue: str, offset: int = 0, limit: int = DEFAULT_LIMIT,
                     only: tuple[str, str] | None = None) -> dict[str, Any]:
    """The pending asks under ``queue`` in try order, ``limit`` of them from ``offset`` (``UnknownQueue``);
    ``only`` (app, ask): just that ask, with its positions (no items when it is not pending there)."""
    part = engine.state.partitions.get(partition)
    if part is None:
        raise UnknownQueue(f"unknown partition {partition!r}")
    if queue not in part.queues:
        raise UnknownQueue(f"partition {partition!r} has no queue {queue!r}")
    if not 0 <= limit <= MAX_LIMIT or offset < 0:
        raise ValueError(f"limit must be 0..{MAX_LIMIT} and offset at least 0")
    order = try_order(part)
    leaf_seen: dict[str, int] = {}
    mine: list[tuple[int, int, App, Ask]] = []  # (position in the partition, in its leaf, app, ask)
    for at, (app, ask) in enumerate(order, 1):
        in_leaf = leaf_seen[app.queue.path] = leaf_seen.get(app.queue.path, 0) + 1
        if _under(app, queue):
            mine.append((at, in_leaf, app, ask))
    walker = Walker(part)  # both keep per-shape facts across the page's asks: the state does not change
    by_shape: dict[Shape, list[Remedy]] = {}
    if only is not None:
        items = [_item(engine, partition, walker, by_shape, app, ask, n, at, leaf)
                 for n, (at, leaf, app, ask) in enumerate(mine, 1) if (app.app_id, ask.ask_id) == only]
    else:
        items = [_item(engine, partition, walker, by_shape, app, ask, offset + n, at, leaf)
                 for n, (at, leaf, app, ask) in enumerate(mine[offset:offset + limit], 1)]
    return {"partition": partition, "queue": queue, "afterCycle": engine.cycle_number, "total": len(mine),
            "partitionTotal": len(order), "offset": offset, "limit": limit, "items": items}


def render_pending_list(report: dict[str, Any]) -> str:
    """The report as text: one block per ask, its places, reasons and remedies."""
    head = (f"Pending in {report['queue']} (partition {report['partition']}) after cycle {report['afterCycle']}: "
            f"{report['total']} asks ({report['partitionTotal']} in the partition)")
    lines = [head]
    shown = report["items"]
    if shown:
        lines.append(f"showing {shown[0]['positionInQueue']}-{shown[-1]['positionInQueue']}, in the order the next "
                     "cycle tries them")
    for item in shown:
        lines.append("")
        lines.append(f"{item['positionInQueue']:>4}. {item['applicationID']}/{item['allocationKey']}  "
                     f"queue {item['queueName']}  {fmt_res(item['resource'])}  priority {item['priority']}  "
                     f"(#{item['positionInLeafQueue']} in its leaf, #{item['positionInPartition']} in the partition)")
        for reason in item["reasons"] or [{"message": "nothing holds it now: the next cycle should allocate it",
                                           "rule": "docs/semantics.md#one-allocation-step"}]:
            lines.append(f"      why:   {reason['message']} [{reason['rule']}]")
        for fix in item["wouldRun"]:
            lines.append(f"      to run: {fix['message']}")
    return "\n".join(lines) + "\n"
