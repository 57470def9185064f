"""Encoded state-form entries of one partition, re-encoded only when their object changed.

The state digest (``sha256`` of the canonical state form, docs/events.md) is taken after
every cycle. Encoding every app and node each time made it the largest cost of a cycle,
so the partition marks what each mutation touches and the digest re-encodes only those
entries. ``scheduler.core.state_form.state_digest`` assembles the canonical bytes from
these fragments; a property test proves it equal to the digest of a from-scratch state form.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any

from sortedcontainers import SortedList

from projections.digest import canonical

Encoder = Callable[[str], "dict[str, Any] | None"]


class EncodedEntries:
    """``"key":{…}`` fragments in canonical form, kept in key order."""

    def __init__(self) -> None:
        self.fragments: dict[str, bytes] = {}
        self.keys: SortedList = SortedList()
        self.version = 0  # bumped by every ``put``: equal versions, equal bytes (``DigestMemo``)

    def put(self, key: str, entry: dict[str, Any] | None) -> None:
        """Store the encoded entry for ``key``; ``None`` removes it."""
        self.version += 1
        if entry is None:
            if self.fragments.pop(key, None) is not None:
                self.keys.remove(key)
            return
        if key not in self.fragments:
            self.keys.add(key)
        # ``"key":{…}``: the one-entry object's bytes without its braces (one encoding call)
        self.fragments[key] = canonical({key: entry})[1:-1]

    def in_order(self) -> Iterable[tuple[str, bytes]]:
        """(key, fragment) pairs in canonical (sorted key) order."""
        fragments = self.fragments
        return ((k, fragments[k]) for k in self.keys)

    def joined(self) -> bytes:
        """All fragments in key order, comma-separated (one partition's object body)."""
        return b",".join(map(self.fragments.__getitem__, self.keys))


class DigestMemo:
    """The state digest's hash as far as the apps' and the nodes' bodies, with the entries and
    versions it read (a cache, never state): an idle cycle hashes only what follows them.

    A key holds the ``EncodedEntries`` themselves (compared by identity, so a partition made
    anew never matches an old key) and their versions."""

    def __init__(self) -> None:
        self.apps_key: tuple[tuple[EncodedEntries, int], ...] = ()
        self.after_apps: hashlib._Hash | None = None  # copied, never updated in place
        self.nodes_key: tuple[tuple[EncodedEntries, int], ...] = ()
        self.after_nodes: hashlib._Hash | None = None
        # The queues' canonical bytes, kept while no app entry changed under the same config:
        # a queue's entry (priority, pending, allocated, running apps) moves only with an app's
        # (its priority, pending, allocated, state) or with the config (offsets, the tree).
        self.queues_key: tuple[tuple[EncodedEntries, int], ...] = ()
        self.queues_config: object = None
        self.queues_bytes: bytes | None = None


class FormCache:
    """Which apps and nodes changed since the last digest, and their encoded entries."""

    def __init__(self) -> None:
        self.dirty_apps: set[str] = set()
        self.dirty_nodes: set[str] = set()
        self.apps = EncodedEntries()
        self.nodes = EncodedEntries()

    def app_changed(self, app_id: str) -> None:
        """An app's state-form entry may differ (or it was added or removed)."""
        self.dirty_apps.add(app_id)

    def node_changed(self, node_id: str) -> None:
        """A node's state-form entry may differ (or it was added or removed)."""
        self.dirty_nodes.add(node_id)

    def refresh(self, key: Callable[[str], str], app_entry: Encoder, node_entry: Encoder) -> None:
        """Re-encode every changed entry (``*_entry`` give None for a removed object)."""
        for app_id in self.dirty_apps:
            self.apps.put(key(app_id), app_entry(app_id))
        self.dirty_apps.clear()
        for node_id in self.dirty_nodes:
            self.nodes.put(key(node_id), node_entry(node_id))
        self.dirty_nodes.clear()
