"""On-disk artefacts of the scheduler beside the log: snapshot files (shared by the service and replay)."""
