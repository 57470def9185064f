"""Contract suites: the behaviour every adapter of a port shares (the event log, the publisher)."""
