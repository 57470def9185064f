"""``make demo``: generate a small realistic cluster and workload, run the service on the
embedded log with ``--once``, and print a short summary a person can read."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from events.log.file import FileLog
from events.units import fmt_resources
from projections.priority import MIN_PRIORITY
from scheduler.core.engine import DEFAULT_SOURCE
from scheduler.service.recovery import recover
from scheduler.simulation.workload import WorkloadSpec, config_yaml, events, numbered


def demo_spec(nodes: int = 120, apps: int = 60, asks: int = 4000) -> WorkloadSpec:
    """The demo's cluster and workload. Department 2 orders its leaves by fair share (priority
    sorting disabled) and half of them have a guarantee, so the fair queue order decides there:
    ``replay whatif --rules yunikorn-1.9`` on the demo's log shows what YuniKorn 1.9's order
    (YUNIKORN-2678) would change."""
    return WorkloadSpec(nodes=nodes, apps=apps, asks=asks, leaves=12, unsorted_department=True,
                        guaranteed_leaves=True)


def write_workload(path: Path, spec: WorkloadSpec) -> int:
    """The demo's input file: the queue config first, then classes, nodes, apps, asks."""

    def evs() -> Iterator[dict[str, Any]]:
        yield {"type": "config.updated", "data": {"yaml": config_yaml(spec)}}
        yield from events(spec)

    lines = [orjson.dumps(e) for e in numbered(evs(), source="demo", start_us=1_767_225_600_000_000)]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return len(lines)


def evsched(*args: str) -> None:
    """Run the CLI as a user would, failing loudly."""
    subprocess.run([sys.executable, "-m", "scheduler", *args], check=True)


def summarize(log_dir: Path) -> None:
    """Allocations per queue, queue priorities, the first decisions, and how to explain one."""
    with FileLog(log_dir, readonly=True) as log:
        outs = [orjson.loads(r.value) for r in log.iter_outputs()]
    decided = [o["data"] for o in outs if o["type"] == "allocation.decided"]
    rejected = [o["data"] for o in outs if o["type"] == "input.rejected"]
    cycles = [o["data"] for o in outs if o["type"] == "cycle.completed"]
    print()
    print(f"evsched demo: {len(cycles)} cycles, {len(decided)} allocations, {len(rejected)} rejected inputs")
    print()
    print("allocations per queue:")
    for queue, count in sorted(Counter(d["queue"] for d in decided).items()):
        print(f"  {queue:<24} {count:>6}")
    print()
    print("queue priorities and what is still pending (fence/offset applied):")
    state = asyncio.run(_final_state(log_dir))
    for path, q in sorted(state["queues"].items()):
        prio = "-" if q["priority"] == MIN_PRIORITY else str(q["priority"])
        pending = fmt_resources(q["pending"])
        print(f"  {path:<24} priority {prio:>6}  running apps {q['running_apps']:>3}  pending {pending}")
    print()
    print("allocations per ask priority:")
    for prio, count in sorted(Counter(d["priority"] for d in decided).items(), reverse=True):
        print(f"  priority {prio:>6}  {count:>6}")
    print()
    print("first decisions:")
    for d in decided[:5]:
        res = fmt_resources(d["resources"])
        where = f"({d['queue']}, P{d['priority']}, {res})"
        print(f"  {d['decision_id']:<16} {d['app_id']}/{d['ask_id']} -> {d['node_id']}  {where}")
    if decided:
        print()
        print("why did one of them land there?")
        print(f"  .venv/bin/evsched replay explain {decided[0]['decision_id']} --log {log_dir}")
        print("browse the queues, apps, nodes and decisions, and ask why an ask is pending:")
        print(f"  .venv/bin/evsched serve --log {log_dir} --http 127.0.0.1:9090   # then open http://127.0.0.1:9090/")
        print("check that every decision re-derives byte for byte:")
        print(f"  .venv/bin/evsched replay verify --log {log_dir}")
        print("what upgrading to YuniKorn 1.9's rules would change (decisions, queue orders):")
        print(f"  .venv/bin/evsched replay whatif --rules yunikorn-1.9 --log {log_dir}")


async def _final_state(log_dir: Path) -> dict[str, Any]:
    log = FileLog(log_dir, readonly=True)
    try:
        recovered = await recover(log, source=DEFAULT_SOURCE)
    finally:
        await log.close()
    state: dict[str, Any] = recovered.engine.state_form()
    return state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="demo-data", help="where to put the workload and the log")
    parser.add_argument("--nodes", type=int, default=120)
    parser.add_argument("--apps", type=int, default=60)
    parser.add_argument("--asks", type=int, default=4000)
    args = parser.parse_args()
    base = Path(args.dir)
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    spec = demo_spec(args.nodes, args.apps, args.asks)
    count = write_workload(base / "workload.jsonl", spec)
    print(f"generated {count} input events: {spec.nodes} nodes, {spec.apps} apps, {spec.asks} asks, "
          f"{spec.leaves} leaf queues under 3 departments (one fenced, offsets elsewhere, one ordering "
          "its leaves by fair share, half of them guaranteed)")
    log_dir = base / "log"
    # The file carries the queue config and priority classes: the operator's submission, to the
    # admin channel (a resource manager's plain submit of them is rejected: docs/security.md).
    evsched("submit", "--admin", "--log", str(log_dir), str(base / "workload.jsonl"))
    evsched("run", "--log", str(log_dir), "--once", "--batch", "500")
    summarize(log_dir)


if __name__ == "__main__":
    main()
