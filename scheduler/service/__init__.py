"""The asyncio service: the live loop, recovery, shards, GC tuning and the MQTT wiring (the shell)."""
