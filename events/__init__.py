"""The log's language: envelopes, input and output event models, the codec, and the log port."""

from events import native  # noqa: F401  (first: decides compiled or pure Python before any core module loads)
