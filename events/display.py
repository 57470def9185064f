"""Display-safe text: control characters in human-facing output, escaped.

Resource names, users, groups, tags and attributes may hold any character, and the text
renderers (``replay explain``, ``replay diff``, ``verify``/``audit`` summaries, ``config
check``) print them. A raw ESC sequence would drive the reader's terminal (set its title,
clear the screen, fake output), so every text output passes through ``printable`` on its
way out, one line at a time: C0 controls but tab (so a newline inside a value cannot fake
a line either), DEL, C1 controls and the bidirectional overrides (which reorder what is
shown) become ``\\xNN`` / ``\\uNNNN``. JSON output needs none of this: its encoder
escapes controls itself.

>>> printable("gpu\\x1b]0;pwned\\x07 ok\\n")
'gpu\\\\x1b]0;pwned\\\\x07 ok\\\\x0a'
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """One line of ``text`` with every character that could act on a terminal escaped."""
    return _UNSAFE.sub(_escape, text)


def printable_lines(lines: list[str]) -> list[str]:
    """Each line made ``printable``."""
    return [_UNSAFE.sub(_escape, line) for line in lines]
