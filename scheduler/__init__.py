"""The scheduler: configuration, the pure core, the asyncio service, bridges and the CLI."""
