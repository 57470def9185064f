"""Which member of the shard group runs which shard: balanced, sticky and deterministic (pure).

Each member says which shards (scheduler partitions) it may run and which it runs now,
with the group generation in which it got each (its *claims*). ``assign_shards`` gives
every shard to exactly one member that may run it:

1. Fair shares: with ``n`` shards and ``m`` members that may run at least one, every member
   may keep ``n // m`` shards and ``n % m`` of them one more.
2. Sticky: in shard-name order, a claimed shard stays with its newest claim (highest
   generation, then greatest member id — a member that was expelled and replaced comes
   back with an older claim and loses), unless that member already keeps its fair share.
3. The rest, in shard-name order, go to the eligible member with the fewest shards so far,
   ties broken by member id. Every step is a total order, so every member computing it
   gets the same answer.

Worked example: m1 and m2 may both run {a, b}; m1 runs both (claims from generation 3),
m2 has just joined. Fair share 1 each; a stays with m1; b would exceed m1's share, so it
goes to m2: ``{m1: [a], m2: [b]}``. If m1 then dies, m2 is alone: b stays, a joins it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import orjson


@dataclass(frozen=True, slots=True)
class MemberShards:
    """One member's subscription: shards it may run, with their input topics, and its claims."""

    topics: Mapping[str, tuple[str, ...]]  # shard → its input topics, as this member names them
    held: Mapping[str, int] = field(default_factory=dict)  # shard → generation it was got in

    def encode(self) -> bytes:
        """The member's ``user_data`` in the group protocol (JSON)."""
        return orjson.dumps({"v": 1, "topics": {s: list(t) for s, t in self.topics.items()}, "held": self.held})

    @staticmethod
    def decode(raw: bytes) -> MemberShards:
        """Parse ``user_data``; anything unreadable is a member that runs nothing."""
        try:
            obj = orjson.loads(raw)
            topics = {str(s): tuple(str(t) for t in ts) for s, ts in obj["topics"].items()}
            held = {str(s): int(g) for s, g in obj.get("held", {}).items()}
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            return MemberShards({})
        return MemberShards(topics, held)


def assign_shards(members: Mapping[str, MemberShards]) -> dict[str, list[str]]:
    """member id → the shards it runs (sorted); see the module docstring for the rules."""
    shards = sorted({s for m in members.values() for s in m.topics})
    able = [m for m, spec in members.items() if spec.topics]
    out: dict[str, list[str]] = {m: [] for m in members}
    if not shards or not able:
        return out
    share, extra = divmod(len(shards), len(able))
    free = []
    for shard in shards:
        claims = [(spec.held[shard], m) for m, spec in members.items() if shard in spec.topics and shard in spec.held]
        if claims:
            _, holder = max(claims)
            kept = len(out[holder])
            if kept < share or (kept == share and extra > 0):
                extra -= kept == share
                out[holder].append(shard)
                continue
        free.append(shard)
    for shard in free:
        eligible = [m for m, spec in members.items() if shard in spec.topics]
        winner = min(eligible, key=lambda m: (len(out[m]), m))
        out[winner].append(shard)
    return {m: sorted(s) for m, s in out.items()}
