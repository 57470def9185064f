"""Go string semantics the validator must match: ``strings.TrimSpace`` and ``strings.Fields``."""

from __future__ import annotations

import re

# unicode.IsSpace; differs from Python's str.isspace (which also has \x1c-\x1f).
GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_RUNS = re.compile(f"[{re.escape(GO_SPACE)}]+")


def trim_space(text: str) -> str:
    """``strings.TrimSpace``."""
    return text.strip(GO_SPACE)


def fields(text: str) -> list[str]:
    """``strings.Fields``: split around runs of white space, no empty fields."""
    return [part for part in _RUNS.split(text) if part]
