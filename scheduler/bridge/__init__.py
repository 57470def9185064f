"""The MQTT bridge: publishes each cycle's outputs and queue status, and ingests node heartbeats.

Pure parts (``topics``, ``ingest``, ``address``) import no I/O; ``port`` is the publisher
contract, ``memory`` its in-memory adapter, and ``mqtt`` the only module importing aiomqtt.
"""
