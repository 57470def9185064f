"""The conformance run: evsched against apache/yunikorn-core on random tie-free scenarios."""
