"""Why an ask the log does not know is unknown: the ``input.rejected`` of the events that named it.

``explain --ask APP/ASK`` of an ask that is not in the state (its ``ask.added`` was rejected, or
its app's ``app.added`` was: a queue typo, an ACL) points at those rejections, so nobody has to
search the outputs for them. An input event names the ask when its ``data`` has that
``app_id`` (and, for ask events, that ``ask_id``); a rejection is matched by the event's ``id``.
"""

from __future__ import annotations

from collections.abc import Iterable

from events.log.port import LogRecord
from events.log.source import LogSource
from scheduler.core.recorded_cycles import parse_record

ASK_EVENTS = ("ask.added", "ask.removed", "allocation.released")
MAX_SHOWN = 5  # rejections listed, the latest last; more are counted


def rejections_of(source: LogSource, app_id: str, ask_id: str) -> list[str]:
    """``input.rejected`` lines for the events that added ``app_id`` or its ask ``ask_id``, in log order."""
    naming = _naming_ids(source.iter_inputs(), app_id, ask_id)
    if not naming:
        return []
    found = []
    cycle = 0
    for record in source.iter_outputs():
        out = parse_record(record)
        if out is None:
            continue
        data = out.get("data")
        if not isinstance(data, dict):
            continue
        if out.get("type") == "cycle.started":
            cycle = data.get("cycle", cycle)
        elif out.get("type") == "input.rejected" and data.get("input_id") in naming:
            found.append(f"cycle {cycle}: {naming[data['input_id']]} {data['input_id']} was rejected "
                         f"{data.get('reason')}: {data.get('message')}")
    if len(found) > MAX_SHOWN:
        return [f"… and {len(found) - MAX_SHOWN} earlier", *found[-MAX_SHOWN:]]
    return found


def _naming_ids(inputs: Iterable[LogRecord], app_id: str, ask_id: str) -> dict[str, str]:
    """{event id: its type} of the app.added events of ``app_id`` and the ask events of ``ask_id``."""
    ids: dict[str, str] = {}
    for record in inputs:
        event = parse_record(record)
        if event is None or not isinstance(event.get("id"), str):
            continue
        data = event.get("data")
        if not isinstance(data, dict) or data.get("app_id") != app_id:
            continue
        kind = event.get("type")
        if kind == "app.added" or (kind in ASK_EVENTS and data.get("ask_id") == ask_id):
            ids[event["id"]] = str(kind)
    return ids

