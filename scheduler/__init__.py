"""The scheduler: configuration, the pure core, the asyncio service, bridges and the CLI."""

import events.native  # noqa: F401  (first: decides compiled or pure Python before any core module loads)
