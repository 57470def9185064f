"""Prometheus metrics of a scheduler, collected at scrape time from its observer and state.

Nothing is updated on the cycle's hot path except the observer's counters: a scrape walks
the queue tree (tens to thousands of entries) and reads the counters, between cycles. Names
follow Prometheus conventions (``evsched_`` prefix, base units, ``_total`` for counters).
One registry per server — no global registry, so two services in one process never mix.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from scheduler.core.engine import Engine
from scheduler.http.observer import CYCLE_BUCKETS, ServiceObserver

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class ScrapeInputs:
    """What one scrape reads: the state, and the live service's figures when there is one.

    ``engines`` pairs each engine with the one partition it answers for (a shard's), or
    None for all of its partitions.
    """

    engines: list[tuple[Engine, str | None]]
    observer: ServiceObserver | None = None
    lag: Mapping[str, int] = field(default_factory=dict)
    recovery_s: float | None = None
    snapshot_writes: int = 0
    snapshots_failed_integrity: int = 0  # snapshot files discarded: their bytes failed their content hash


class SchedulerCollector(Collector):
    """Yields every evsched metric from the ``ScrapeInputs`` set just before the scrape."""

    def __init__(self) -> None:
        self.inputs: ScrapeInputs | None = None

    def collect(self) -> Iterator[Metric]:
        inputs = self.inputs
        if inputs is None:
            return
        yield from _queue_metrics(inputs.engines)
        yield from _service_metrics(inputs)


def _queue_metrics(engines: list[tuple[Engine, str | None]]) -> Iterator[Metric]:
    pending = GaugeMetricFamily("evsched_queue_pending_resource", "Resources asked for and not yet allocated "
                                "(memory in bytes, vcore in millicores)", labels=["partition", "queue", "resource"])
    allocated = GaugeMetricFamily("evsched_queue_allocated_resource", "Resources allocated in the queue",
                                  labels=["partition", "queue", "resource"])
    running = GaugeMetricFamily("evsched_queue_running_apps", "Running applications", labels=["partition", "queue"])
    priority = GaugeMetricFamily("evsched_queue_priority", "The queue's current priority (after offset and fence)",
                                 labels=["partition", "queue"])
    nodes = GaugeMetricFamily("evsched_nodes", "Registered nodes", labels=["partition"])
    apps = GaugeMetricFamily("evsched_applications", "Applications by state", labels=["partition", "state"])
    cycle = GaugeMetricFamily("evsched_cycle", "Number of the last completed cycle", labels=["partition"])
    owned = sorted((pname, engine) for engine, only in engines for pname in engine.state.partitions
                   if only is None or pname == only)
    for pname, engine in owned:
        part = engine.state.partitions[pname]
        cycle.add_metric([pname], engine.cycle_number)
        for q in part.root.walk():
            for res, value in sorted(q.pending.items()):
                pending.add_metric([pname, q.path, res], value)
            for res, value in sorted(q.allocated.items()):
                allocated.add_metric([pname, q.path, res], value)
            running.add_metric([pname, q.path], q.running_apps)
            priority.add_metric([pname, q.path], q.priority)
        nodes.add_metric([pname], len(part.nodes))
        states: dict[str, int] = {}
        for app in part.apps.values():
            states[app.state] = states.get(app.state, 0) + 1
        for state in sorted(states):
            apps.add_metric([pname, state], states[state])
    yield from (pending, allocated, running, priority, nodes, apps, cycle)


def _service_metrics(inputs: ScrapeInputs) -> Iterator[Metric]:
    obs = inputs.observer
    if obs is None:
        return
    cycles = CounterMetricFamily("evsched_cycles", "Cycles run by this process")
    cycles.add_metric([], obs.cycles)
    outputs = CounterMetricFamily("evsched_outputs", "Outputs written, by type (allocation.decided, ...)",
                                  labels=["type"])
    for kind in sorted(obs.outputs_by_type):
        outputs.add_metric([kind], obs.outputs_by_type[kind])
    rejected = CounterMetricFamily("evsched_inputs_rejected", "Inputs rejected, by reason", labels=["reason"])
    for reason in sorted(obs.rejections_by_reason):
        rejected.add_metric([reason], obs.rejections_by_reason[reason])
    buckets, cumulative = [], 0
    for bound, count in zip((*map(str, CYCLE_BUCKETS), "+Inf"), obs.bucket_counts, strict=True):
        cumulative += count
        buckets.append((bound, cumulative))
    duration = HistogramMetricFamily("evsched_cycle_duration_seconds", "Time to decide a cycle and write its outputs",
                                     buckets=buckets, sum_value=obs.seconds_sum)
    lag = GaugeMetricFamily("evsched_consumer_lag", "Inputs in the log not yet consumed, per input partition",
                            labels=["channel"])
    for channel in sorted(inputs.lag):
        lag.add_metric([channel], inputs.lag[channel])
    last = GaugeMetricFamily("evsched_last_cycle_timestamp_seconds", "Unix time of the last cycle's end")
    last.add_metric([], obs.last_cycle_unix or 0.0)
    snapshots = CounterMetricFamily("evsched_snapshot_writes", "Snapshots written by this process")
    snapshots.add_metric([], inputs.snapshot_writes)
    discarded = CounterMetricFamily("evsched_snapshots_discarded", "Snapshot files discarded at recovery, by reason",
                                    labels=["reason"])
    discarded.add_metric(["integrity"], inputs.snapshots_failed_integrity)
    yield from (cycles, outputs, rejected, duration, lag, last, snapshots, discarded)
    if inputs.recovery_s is not None:
        recovery = GaugeMetricFamily("evsched_recovery_duration_seconds", "Time the last start took to recover")
        recovery.add_metric([], inputs.recovery_s)
        yield recovery


class Metrics:
    """A registry holding the scheduler collector; ``render`` is one scrape."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = SchedulerCollector()
        self.registry.register(self.collector)

    def render(self, inputs: ScrapeInputs) -> bytes:
        """The metrics in Prometheus text format, for these inputs."""
        self.collector.inputs = inputs
        try:
            return generate_latest(self.registry)
        finally:
            self.collector.inputs = None
