"""The pure scheduling core: objects, apply(event), one allocation step, a cycle. No I/O, no clock."""

import events.native  # noqa: F401  (first: decides compiled or pure Python before any core module loads)
