"""The seen input ids: which (source, id) pairs were applied, within a bounded window per source.

docs/contract.md §1: a repeated (source, id) pair is a duplicate and is ignored. Remembering every
id for ever made the set grow with the log and be rewritten into every snapshot, so each
source's last ``SEEN_WINDOW`` applied ids are remembered, in log order; an id older than
its source's window is applied as a new event. Eviction depends only on each source's own
log order, which snapshots keep (ids grouped by source, each list in log order), so live,
replay and a restored engine evict alike.

Worked example, window 3: ``rm`` applies 1, 2, 3, 4 → remembers 2, 3, 4; a repeated 3 is a
duplicate, a repeated 1 is applied again.
"""

from __future__ import annotations

SEEN_WINDOW = 1_000_000  # ids remembered per source (docs/events.md)


class SeenIds:
    """Per source, the last ``window`` applied ids in log order (module docstring)."""

    __slots__ = ("by_source", "window")

    def __init__(self, window: int | None = None) -> None:
        self.window = SEEN_WINDOW if window is None else window
        self.by_source: dict[str, dict[str, None]] = {}

    def add(self, source: str, event_id: str) -> bool:
        """Remember an applied id; False when it is a duplicate (within the window)."""
        ids = self.by_source.get(source)
        if ids is None:
            ids = self.by_source[source] = {}
        elif event_id in ids:
            return False
        ids[event_id] = None
        if len(ids) > self.window:
            del ids[next(iter(ids))]
        return True

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple) or len(key) != 2:
            return False
        ids = self.by_source.get(key[0])
        return ids is not None and key[1] in ids

    def __len__(self) -> int:
        return sum(len(ids) for ids in self.by_source.values())

    def grouped(self) -> dict[str, list[str]]:
        """Ids by source, each list in log order (the snapshot form)."""
        return {source: list(ids) for source, ids in self.by_source.items()}

    @classmethod
    def from_grouped(cls, grouped: dict[str, list[str]]) -> SeenIds:
        """Back from ``grouped`` (a snapshot); the window is today's."""
        seen = cls()
        for source, ids in grouped.items():
            for event_id in ids:
                seen.add(source, event_id)
        return seen
