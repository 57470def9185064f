"""Log storage: the EventLog port and its adapters (memory, embedded file, Kafka)."""
