"""User-supplied regular expressions (placement filters) with Go's ``regexp`` syntax and semantics, in linear time.

YuniKorn compiles a filter's single user or group entry with Go's ``regexp``: RE2 syntax,
an unanchored search, ``$`` only at the end of the text, ``.`` not matching a newline,
``\\w``/``\\d``/``\\b`` ASCII-only, and no backreferences or look-arounds. Python's ``re`` is
a backtracking engine with other rules (``$`` also before a final newline): a pattern such
as ``^(\\w+\\.?)+@corp$`` against 40 × ``a`` takes exponential time there. Google's RE2 is
the engine Go's ``regexp`` was written after: same syntax, same leftmost-first semantics,
time linear in the pattern times the text. Every user-supplied pattern goes through here.

Bounds (docs/reliability.md): a pattern is at most ``MAX_PATTERN_CHARS`` characters and
its compiled program at most ``MAX_PROGRAM_BYTES`` (RE2 refuses bigger, as Go refuses
repeat counts over 1,000); the text it is matched against is an input field, at most 253
characters (``events/models.py``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Final

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

MAX_PATTERN_CHARS: Final = 4096
MAX_PROGRAM_BYTES: Final = 8 << 20


class PatternError(ValueError):
    """A pattern Go's ``regexp`` would not compile (or past this module's bounds)."""


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 would write each refused pattern to stderr
    options.max_mem = MAX_PROGRAM_BYTES
    return options


_OPTIONS: Final = _options()


@lru_cache(maxsize=1024)  # patterns come from configs only; a config change may bring new ones
def _compiled(pattern: str) -> Any:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(f"a regular expression of {len(pattern)} characters (at most {MAX_PATTERN_CHARS})")
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise PatternError(str(detail)) from None
    except UnicodeEncodeError:
        raise PatternError("not valid UTF-8 text") from None


def check(pattern: str) -> None:
    """Raise ``PatternError`` when Go's ``regexp.Compile`` would refuse the pattern."""
    _compiled(pattern)


def search(pattern: str, text: str) -> bool:
    """Go's ``regexp.MatchString``: does the pattern match anywhere in ``text``?

    A pattern that does not compile matches nothing (config validation refuses it first).
    """
    try:
        return _compiled(pattern).search(text) is not None
    except (PatternError, UnicodeEncodeError):
        return False
