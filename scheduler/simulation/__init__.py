"""Offline runs of the core: ``evsched simulate`` and the synthetic workloads of the demo, tests and benchmarks."""
