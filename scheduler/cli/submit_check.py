"""What ``evsched submit`` can tell before appending: events naming apps or queues the log does not know.

The service would reject them later (``input.rejected`` ``unknown-app`` / ``unknown-queue``),
where the person submitting may never look; ``submit`` warns instead, before appending
(the events are still appended: an app may be added by another resource manager meanwhile).
What counts as known is read from the embedded log's inputs (apps added and not removed,
the last ``config.updated``'s queues) and from the submission itself, in its order. With
placement rules (or an empty queue) the queue is the rules' choice, not checked here.
Shell code: it reads the log.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from events.log.file import FileLog
from events.log.port import LogError
from scheduler.config import SchedulerConfig, default_config, find_queue, load_config
from scheduler.config.errors import ConfigError

DEFAULT_PARTITION = "default"
APP_EVENTS = ("ask.added", "ask.removed", "allocation.released")


@dataclass
class Known:
    """The apps (by partition and id) and the config the log shows so far."""

    apps: set[tuple[str, str]] = field(default_factory=set)
    config_yaml: str | None = None
    _config: SchedulerConfig | None = None

    def config(self) -> SchedulerConfig:
        """The last config seen (the built-in default before any); an unreadable one counts as none."""
        if self._config is None:
            try:
                self._config = load_config(self.config_yaml) if self.config_yaml else default_config()
            except ConfigError:
                self._config = default_config()
        return self._config

    def see(self, obj: object) -> str | None:
        """Fold one input event in; the warning it earns (None: nothing to say)."""
        if not isinstance(obj, dict) or not isinstance(obj.get("data"), dict):
            return None
        kind, data = obj.get("type"), obj["data"]
        partition = data.get("partition", DEFAULT_PARTITION)
        app = data.get("app_id")
        if kind == "config.updated" and isinstance(data.get("yaml"), str):
            self.config_yaml, self._config = data["yaml"], None
        elif kind == "app.removed":
            self.apps.discard((partition, app))
        elif kind == "app.added":
            self.apps.add((partition, app))
            return self._queue_warning(partition, data.get("queue"))
        elif kind in APP_EVENTS and (partition, app) not in self.apps:
            return (f"app {app!r} (partition {partition}) is neither in the log nor added earlier in this file: "
                    "the service will reject this unknown-app")
        return None

    def _queue_warning(self, partition: str, queue: object) -> str | None:
        if not isinstance(queue, str) or not queue:
            return None
        spec = next((p for p in self.config().partitions if p.name == partition), None)
        if spec is None:
            return f"partition {partition!r} is not in the config the log holds"
        if spec.placement_rules:
            return None  # the rules place the app (and may create the queue)
        found = find_queue(spec, queue)
        if found is None:
            return f"queue {queue!r} is not in the config the log holds: the service will reject the app unknown-queue"
        if not found.is_leaf:
            return f"queue {queue!r} is a parent queue: the service will reject the app not-a-leaf"
        return None


def known_in_log(directory: str) -> Known:
    """What the embedded log in ``directory`` shows (nothing when there is no log there yet)."""
    known = Known()
    if not Path(directory).is_dir():
        return known
    try:
        log = FileLog(directory, readonly=True)
    except LogError:
        return known
    with log:
        for record in log.iter_inputs():
            try:
                known.see(orjson.loads(record.value))
            except orjson.JSONDecodeError:
                continue
    return known


def submission_warnings(known: Known, lines: Iterable[tuple[int, bytes]]) -> list[str]:
    """``line N: …`` for each event of the submission (line number, JSON) that ``known`` says will be rejected."""
    warnings = []
    for number, value in lines:
        warning = known.see(orjson.loads(value))
        if warning is not None:
            warnings.append(f"line {number}: {warning}")
    return warnings
