"""Test helpers: run the core through ``simulate`` on in-memory lines and read the results."""

from __future__ import annotations

import textwrap
from typing import Any

import orjson

from events.codec import output_to_dict
from scheduler.config import load_config
from scheduler.simulation.simulate import Simulation


def root_queues(children: str = "", *, rules: str = "", root: str = "", partition: str = "") -> str:
    """Config text of one partition, ``default``, whose root (``submitacl: '*'``) holds ``children``:
    the YAML list of its child queues. ``rules`` is the partition's placement rules (a YAML list),
    ``partition`` more of the partition's own settings (``rules: yunikorn-1.9``), ``root`` more of
    root's own settings (``childtemplate: ...``). Each is written at any indentation
    (it is dedented and placed); with ``children`` alone the text is byte for byte what the tests
    wrote out by hand, so checksums do not change::

        root_queues('''
            - name: a
              properties: {priority.offset: "5"}
            - name: b
        ''', rules="- name: tag\n  value: namespace")
    """
    text = "\npartitions:\n  - name: default\n"
    text += _block("placementrules:", rules, 4)
    text += _block("", partition, 4)
    text += "    queues:\n      - name: root\n        submitacl: '*'\n"
    text += _block("", root, 8)
    return text + _block("queues:", children, 8)


def _block(key: str, yaml: str, indent: int) -> str:
    body = textwrap.indent(textwrap.dedent(yaml).strip("\n"), " " * (indent + 2 if key else indent))
    if not body:
        return ""
    return (" " * indent + key + "\n" if key else "") + body + "\n"


def run(lines: list[dict[str, Any]], config: str | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Simulate the lines; return every output as a plain dict, and the final state form."""
    sim = Simulation(load_config(config) if config else None)
    outputs = []
    for line in lines:
        outputs.extend(sim.feed(orjson.dumps(line)))
    outputs.extend(sim.finish())
    return [output_to_dict(o) for o in outputs], sim.engine.state_form()


def of_type(outputs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The data of every output of one type, in order."""
    return [o["data"] for o in outputs if o["type"] == kind]


def placements(outputs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(ask_id, node_id) of every decision, in order."""
    return [(d["ask_id"], d["node_id"]) for d in of_type(outputs, "allocation.decided")]


def node(node_id: str, vcore: int = 4000, memory: int = 4000, **extra: Any) -> dict[str, Any]:
    """A node.added line."""
    return {"type": "node.added", "data": {"node_id": node_id, "capacity": {"vcore": vcore, "memory": memory}, **extra}}


def app(app_id: str, queue: str = "root.default", user: str = "alice", **extra: Any) -> dict[str, Any]:
    """An app.added line."""
    return {"type": "app.added", "data": {"app_id": app_id, "queue": queue, "user": user, **extra}}


def ask(app_id: str, ask_id: str, vcore: int = 1000, memory: int = 1000, **extra: Any) -> dict[str, Any]:
    """An ask.added line."""
    return {
        "type": "ask.added",
        "data": {"app_id": app_id, "ask_id": ask_id, "resources": {"vcore": vcore, "memory": memory}, **extra},
    }


SCHEDULE: dict[str, Any] = {"type": "schedule"}
