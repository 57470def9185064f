"""ConfigError: the one exception a rejected configuration raises, carrying every reason."""

from __future__ import annotations

from collections.abc import Iterable


class ConfigError(ValueError):
    """The configuration was rejected; ``reasons`` lists every problem found, one per entry.

    Each reason is human-readable and names the partition, queue path and/or key concerned.
    """

    reasons: list[str]

    def __init__(self, reasons: Iterable[str]) -> None:
        self.reasons = list(reasons) or ["invalid configuration"]
        super().__init__("invalid configuration: " + "; ".join(self.reasons))
