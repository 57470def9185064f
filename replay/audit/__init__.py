"""The independent audit of a decision log: its own fold of the cluster and the invariant checks."""
