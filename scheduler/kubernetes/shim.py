"""The Kubernetes resource manager: an API server's nodes and pods in as input events, decisions out as Bindings.

``KubeShim`` lists and watches nodes and pods, keeps a mirror of what it told the scheduler, and
appends the difference to the input log (app, ask, node and release events, YuniKorn's shim
conventions: ``scheduler.kubernetes.objects``). It follows the output log: an
``allocation.decided`` becomes a Binding, a preemption (``allocation.revoked`` ``preempted``)
deletes the victim pod after marking it ``DisruptionTarget`` with the reason, a rejected input is
reported on its pod. Pending pods get ``PodScheduled=False`` and a ``FailedScheduling`` Event
whose message is ``replay explain``'s summary, at most once per ``REPORT_EVERY_S`` per pod.

On start it reconciles against the engine the service recovered (``reconcile``): a decision
the log holds but the API server does not (a crash between the two) is bound now, never twice
(Bindings name the pod's uid, and the API server refuses a bound pod); pods and nodes that went
away while it was down are released and removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from events.log.port import EventLog, LogRecord
from events.producer import EventBuilder, ProducedEvent
from scheduler.core.engine import Engine
from scheduler.kubernetes.api import ApiError, Json, KubeApi
from scheduler.kubernetes.mirror import namespace_tags
from scheduler.kubernetes.objects import (
    NodeInfo,
    PodAsk,
    ask_id_of,
    is_terminal,
    node_info,
    node_name_of,
    occupying,
    pod_ask,
    scheduler_name_of,
)
from scheduler.kubernetes.quantity import QuantityError

LOG = logging.getLogger("evsched.k8s")
SOURCE = "evsched-k8s"
REPORT_EVERY_S = 30.0  # a pending pod's FailedScheduling event at most this often (kube-scheduler backs off alike)
REPORT_AFTER_S = 1.0  # pending this long (and through a cycle) before the first report
REPORTS_PER_ROUND = 100  # explanations per reporting round (a second): each costs a walk of the queue
BIND_CONCURRENCY = 64
TICK_S = 1.0  # while pods wait, a cycle at least this often (``_tick``)
TERMINAL_APP_STATES = ("Completed", "Rejected", "Failed")
MIRRORED = {"priorityclasses": "/apis/scheduling.k8s.io/v1/priorityclasses", "namespaces": "/api/v1/namespaces"}


def _now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class PodState:
    """One pod of ours as the scheduler knows it."""

    ask: PodAsk
    state: str = "new"  # new (not sent) → pending (ask sent) → decided → bound; rejected: the core refused it
    node: str = ""
    since: float = 0.0  # loop time the ask was sent
    reported: float = 0.0  # loop time of the last FailedScheduling report
    report_message: str = ""
    unmodelled_reported: bool = False


@dataclass
class KubeShim:
    """The resource manager between one API server and one evsched log (one process with the service)."""

    api: KubeApi
    log: EventLog
    engine: Callable[[], Engine]  # the service's engine: read only between cycles (``between_cycles``)
    between_cycles: Callable[[], Awaitable[None]]  # returns when no cycle is changing the engine
    scheduler_name: str = "evsched"
    partition: str = "default"
    pods: dict[str, PodState] = field(default_factory=dict)  # by ask id
    apps: dict[str, int] = field(default_factory=dict)  # app id → generation of its app.added
    rejected_apps: dict[str, str] = field(default_factory=dict)  # app id → why the core rejected it
    app_pods: dict[str, set[str]] = field(default_factory=dict)
    nodes: dict[str, NodeInfo] = field(default_factory=dict)
    priority_classes: dict[str, Json] = field(default_factory=dict)  # mirrors, by name (scheduler.kubernetes.mirror)
    namespaces: dict[str, Json] = field(default_factory=dict)
    occupied_sent: dict[str, dict[str, int]] = field(default_factory=dict)
    foreign: dict[str, tuple[str, dict[str, int]]] = field(default_factory=dict)  # pod uid → (node, requests)
    sent: dict[str, str] = field(default_factory=dict)  # input event id → ask id (rejections name the id)
    sent_apps: dict[str, str] = field(default_factory=dict)  # app.added event id → app id
    output_position: int = 0
    # How the outputs are read: the log's own reader (one process with the service, which wakes the shim
    # after each cycle), or a ``LogFollower``'s, which folds them into the engine it hands out (apart).
    read_outputs: Callable[[int, int], Awaitable[list[LogRecord]]] | None = None
    idle_wait_s: float = 0.5  # with no outputs, read again after this long (or when a cycle wakes the shim)

    def __post_init__(self) -> None:
        self.builder = EventBuilder(SOURCE)
        self._pending: list[ProducedEvent] = []
        self._appending = asyncio.Lock()  # batches reach the log in the order they were gathered
        self._generation = 0
        self._wake = asyncio.Event()
        self._binds = asyncio.Semaphore(BIND_CONCURRENCY)
        self._tasks: list[asyncio.Task[Any]] = []
        self._background: set[asyncio.Task[Any]] = set()
        self._changes: asyncio.Queue[tuple[str, str, Json]] = asyncio.Queue()
        self.synced = asyncio.Event()

    @property
    def tasks(self) -> list[asyncio.Task[Any]]:
        """The shim's long-running tasks (watches, outputs, reports, ticks): each ends only by failing."""
        return list(self._tasks)

    # -- the service's listener: a cycle was written, its outputs are in the log

    def cycle_done(self, engine: Engine, outputs: list[Any]) -> None:
        self._wake.set()

    # -- input events

    def _emit(self, event_type: str, data: dict[str, Any], event_id: str | None = None,
              ask_id: str | None = None) -> None:
        data.setdefault("partition", self.partition)
        produced = self.builder.event(event_type, data, id=event_id or uuid.uuid4().hex)
        if ask_id is not None:
            self.sent[produced.id] = ask_id
        self._pending.append(produced)

    async def flush(self) -> None:
        """Append the events gathered so far, in order, in one batch."""
        async with self._appending:
            if not self._pending:
                return
            batch, self._pending = self._pending, []
            await self.log.append_inputs([event.record for event in batch])

    # -- nodes

    def node_seen(self, node: Json) -> None:
        info = node_info(node)
        known = self.nodes.get(info.name)
        if known is None:
            data: dict[str, Any] = {"node_id": info.name, "capacity": info.capacity,
                                    "occupied": self._occupied(info.name), "schedulable": info.schedulable}
            if info.labels:
                data["labels"] = info.labels
            if info.taints:
                data["taints"] = info.taints
            self._emit("node.added", data)
            self.occupied_sent[info.name] = self._occupied(info.name)
        else:
            changed: dict[str, Any] = {}
            if (known.capacity, known.schedulable) != (info.capacity, info.schedulable):
                changed.update(capacity=info.capacity, schedulable=info.schedulable)
            if known.labels != info.labels:
                changed["labels"] = info.labels
            if known.taints != info.taints:
                changed["taints"] = info.taints
            if changed:
                self._emit("node.updated", {"node_id": info.name, **changed})
        self.nodes[info.name] = info

    def node_gone(self, name: str) -> None:
        if self.nodes.pop(name, None) is not None:
            self.occupied_sent.pop(name, None)
            self._emit("node.removed", {"node_id": name})

    def _occupied(self, node: str) -> dict[str, int]:
        total: dict[str, int] = {}
        for where, used in self.foreign.values():
            if where == node:
                for name, value in used.items():
                    total[name] = total.get(name, 0) + value
        return total

    def _occupied_changed(self, node: str) -> None:
        if node not in self.nodes:
            return
        now = self._occupied(node)
        if now != self.occupied_sent.get(node, {}):
            self.occupied_sent[node] = now
            self._emit("node.updated", {"node_id": node, "occupied": now})

    # -- pods

    def pod_seen(self, pod: Json) -> None:
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        if scheduler_name_of(pod) != self.scheduler_name:
            self._foreign_seen(uid, pod)
            return
        ask_id = ask_id_of(str(meta.get("namespace", "")), str(meta.get("name", "")))
        known = self.pods.get(ask_id)
        if known is not None and known.ask.uid != uid:  # re-created under the same name: the old one is gone
            self.pod_gone(known.ask.uid, ask_id)
            known = None
        if is_terminal(pod) or meta.get("deletionTimestamp"):
            if known is not None:
                self.pod_gone(uid, ask_id)
            return
        bound_to = node_name_of(pod)
        if known is not None:
            if bound_to and known.state == "decided" and bound_to == known.node:
                known.state = "bound"
            return
        if bound_to:  # bound before evsched knew it (another run, by hand): it occupies its node
            self._foreign_seen(uid, pod)
            return
        try:
            ask = self.ask_of(pod)
        except QuantityError as exc:
            LOG.warning("pod %s/%s: %s; not scheduled", meta.get("namespace"), meta.get("name"), exc)
            return
        state = PodState(ask)
        self.pods[ask_id] = state
        self.app_pods.setdefault(ask.app_id, set()).add(ask_id)
        self._send_ask(state)

    def ask_of(self, pod: Json) -> PodAsk:
        """The pod's ask, its priority and preemption read with the mirrored PriorityClasses."""
        return pod_ask(pod, self.priority_classes)

    def _send_ask(self, state: PodState) -> None:
        ask = state.ask
        if ask.app_id in self.rejected_apps:
            state.state = "rejected"
            return
        if ask.app_id not in self.apps:
            self._generation += 1
            self.apps[ask.app_id] = self._generation
            event_id = f"app/{ask.app_id}/{ask.uid}/{self._generation}"
            self.sent_apps[event_id] = ask.app_id
            self._emit("app.added", {"app_id": ask.app_id, "queue": ask.queue, "user": ask.user,
                                     "tags": namespace_tags(ask.namespace, self.namespaces.get(ask.namespace))},
                       event_id=event_id)
        data: dict[str, Any] = {"app_id": ask.app_id, "ask_id": ask.ask_id, "resources": ask.resources,
                                "priority": ask.priority, "preempt_other": ask.preempt_other,
                                "allow_preemption": ask.allow_preemption}
        if ask.required_node:
            data["required_node"] = ask.required_node
        data["constraints"] = ask.constraints  # even {}: node taints apply to every pod
        self._emit("ask.added", data, event_id=f"pod/{ask.uid}/{self.apps[ask.app_id]}", ask_id=ask.ask_id)
        state.state = "pending"
        state.since = asyncio.get_running_loop().time()

    def pod_gone(self, uid: str, ask_id: str) -> None:
        """A pod of ours was deleted or finished: release what the scheduler holds for it."""
        if uid in self.foreign:
            node = self.foreign.pop(uid)[0]
            self._occupied_changed(node)
            return
        state = self.pods.get(ask_id)
        if state is None or state.ask.uid != uid:
            return
        del self.pods[ask_id]
        app = state.ask.app_id
        self.app_pods.get(app, set()).discard(ask_id)
        if state.state == "pending":
            self._emit("ask.removed", {"app_id": app, "ask_id": ask_id})
        elif state.state in ("decided", "bound"):
            self._emit("allocation.released", {"app_id": app, "ask_id": ask_id})

    def _foreign_seen(self, uid: str, pod: Json) -> None:
        used = occupying(pod)
        before = self.foreign.get(uid)
        if used:
            self.foreign[uid] = (node_name_of(pod), used)
        else:
            self.foreign.pop(uid, None)
        for node in {before[0] if before else "", node_name_of(pod)} - {""}:
            self._occupied_changed(node)

    # -- start: list, reconcile with what the service recovered, then watch

    async def start(self, outputs_from: int | None = None) -> None:
        """List, reconcile, bind what the log decided but the API server lacks, then watch and follow.

        ``outputs_from``: the first output to follow (a ``LogFollower``'s position); by default the
        log's end before the reconciling inputs go out, so no decision on them can be missed."""
        self.output_position = await self.log.output_end() if outputs_from is None else outputs_from
        mirrored = {kind: await self.api.list(path) for kind, path in MIRRORED.items()}
        for kind, listed in mirrored.items():
            self._mirror(kind).update((self._name(obj), obj) for obj in listed["items"])
        nodes = await self.api.list("/api/v1/nodes")
        pods = await self.api.list("/api/v1/pods")
        self.reconcile(nodes["items"], pods["items"])
        await self.flush()
        await self._bind_recovered()
        self._tasks = [
            asyncio.create_task(self._watch("nodes", "/api/v1/nodes", nodes["resourceVersion"])),
            asyncio.create_task(self._watch("pods", "/api/v1/pods", pods["resourceVersion"])),
            *(asyncio.create_task(self._watch(kind, path, mirrored[kind]["resourceVersion"]))
              for kind, path in MIRRORED.items()),
            asyncio.create_task(self._apply_changes()),
            asyncio.create_task(self._follow_outputs()),
            asyncio.create_task(self._report_pending()),
            asyncio.create_task(self._tick()),
        ]
        self.synced.set()

    def reconcile(self, nodes: list[Json], pods: list[Json]) -> None:
        """Start from what the engine holds (a restart) and the API server's lists: events for the difference."""
        part = self.engine().state.partitions.get(self.partition)
        engine_nodes = dict(part.nodes) if part is not None else {}
        engine_apps = dict(part.apps) if part is not None else {}
        for app_id, app in engine_apps.items():
            if app.state not in TERMINAL_APP_STATES:
                self.apps[app_id] = 0
        for name, engine_node in engine_nodes.items():
            self.nodes[name] = NodeInfo(name, "", dict(engine_node.capacity), engine_node.schedulable,
                                        dict(engine_node.labels),
                                        [{"key": t.key, "value": t.value, "effect": t.effect}
                                         for t in engine_node.taints])
            self.occupied_sent[name] = dict(engine_node.occupied)
        # Allocations and pending asks the engine holds become the mirror's pods once their pod is listed.
        held: dict[str, tuple[str, str]] = {}  # ask id → (state, node)
        for app in engine_apps.values():
            for ask_id, alloc in app.allocations.items():
                held[ask_id] = ("decided", alloc.node_id)
            for ask_id in app.asks:
                held[ask_id] = ("pending", "")
        listed_nodes = {node_info(n).name for n in nodes}
        for pod in pods:  # other schedulers' pods first: node occupancy is known when nodes are sent
            if scheduler_name_of(pod) != self.scheduler_name:
                meta = pod.get("metadata") or {}
                used = occupying(pod)
                if used:
                    self.foreign[str(meta.get("uid", ""))] = (node_name_of(pod), used)
        for node in nodes:
            info = node_info(node)
            known = self.nodes.get(info.name)
            self.node_seen(node)
            if known is not None:
                self._occupied_changed(info.name)
        for name in list(self.nodes):
            if name not in listed_nodes:
                self.node_gone(name)
        seen: set[str] = set()
        for pod in pods:
            if scheduler_name_of(pod) != self.scheduler_name:
                continue
            meta = pod.get("metadata") or {}
            ask_id = ask_id_of(str(meta.get("namespace", "")), str(meta.get("name", "")))
            if ask_id in held and not is_terminal(pod) and not meta.get("deletionTimestamp"):
                try:
                    ask = self.ask_of(pod)
                except QuantityError:
                    continue
                state, decided_node = held[ask_id]
                bound = node_name_of(pod)
                pod_state = PodState(ask, state=state, node=decided_node)
                if state == "decided" and bound:
                    pod_state.state = "bound"
                self.pods[ask_id] = pod_state
                self.app_pods.setdefault(ask.app_id, set()).add(ask_id)
                seen.add(ask_id)
            else:
                self.pod_seen(pod)
                if ask_id in self.pods:
                    seen.add(ask_id)
        for ask_id, (state, _) in held.items():  # held by the engine, gone from the API server
            if ask_id in seen:
                continue
            app_id = next(a for a, app in engine_apps.items() if ask_id in app.asks or ask_id in app.allocations)
            self._emit("ask.removed" if state == "pending" else "allocation.released",
                       {"app_id": app_id, "ask_id": ask_id})

    def _mirror(self, kind: str) -> dict[str, Json]:
        return self.priority_classes if kind == "priorityclasses" else self.namespaces

    @staticmethod
    def _name(obj: Json) -> str:
        return str((obj.get("metadata") or {}).get("name", ""))

    async def _bind_recovered(self) -> None:
        """Decisions the log holds whose pods are not bound yet (the shim stopped between the two): bind them."""
        for state in list(self.pods.values()):
            if state.state == "decided":
                self._spawn(self._bind(state, state.node))

    # -- watches

    async def _watch(self, kind: str, path: str, resource_version: str) -> None:
        while True:
            try:
                async for event in self.api.watch(path, resource_version):
                    obj = event.get("object") or {}
                    version = (obj.get("metadata") or {}).get("resourceVersion")
                    if version:
                        resource_version = str(version)
                    if event.get("type") != "BOOKMARK":
                        self._changes.put_nowait((kind, str(event.get("type")), obj))
            except ApiError as exc:
                if exc.status != 410:
                    LOG.warning("watch of %s: %s; watching again", kind, exc)
                    await asyncio.sleep(1.0)
                    continue
                listed = await self.api.list(path)  # too old: list again, the watch resumes after it
                resource_version = listed["resourceVersion"]
                for obj in listed["items"]:
                    self._changes.put_nowait((kind, "MODIFIED", obj))
                if kind == "nodes" or kind in MIRRORED:  # what went while the watch was away
                    names = {self._name(n) for n in listed["items"]}
                    for name in list(self.nodes if kind == "nodes" else self._mirror(kind)):
                        if name not in names:
                            self._changes.put_nowait((kind, "DELETED", {"metadata": {"name": name}}))
            except (TimeoutError, OSError, ValueError) as exc:
                LOG.warning("watch of %s broke (%s); watching again", kind, exc)
                await asyncio.sleep(1.0)

    async def _apply_changes(self) -> None:
        while True:
            change = await self._changes.get()
            while True:
                kind, kind_of_event, obj = change
                if kind in MIRRORED:  # read when the next app or ask is sent, as YuniKorn's informer caches
                    if kind_of_event == "DELETED":
                        self._mirror(kind).pop(self._name(obj), None)
                    else:
                        self._mirror(kind)[self._name(obj)] = obj
                elif kind == "nodes":
                    if kind_of_event == "DELETED":
                        self.node_gone(str((obj.get("metadata") or {}).get("name", "")))
                    else:
                        self.node_seen(obj)
                elif kind_of_event == "DELETED":
                    meta = obj.get("metadata") or {}
                    self.pod_gone(str(meta.get("uid", "")), ask_id_of(str(meta.get("namespace", "")),
                                                                       str(meta.get("name", ""))))
                else:
                    self.pod_seen(obj)
                if self._changes.empty():
                    break
                change = self._changes.get_nowait()
            await self.flush()

    # -- outputs: decisions → Bindings, preemptions → deletions

    async def _follow_outputs(self) -> None:
        read = self.read_outputs or self.log.read_outputs
        while True:
            records = await read(self.output_position, 10_000)
            if not records:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.idle_wait_s)
                self._wake.clear()
                continue
            self.output_position = records[-1].offset + 1
            for record in records:
                self.output(orjson.loads(record.value))
            await self.flush()

    def output(self, record: Json) -> None:
        kind, data = record.get("type"), record.get("data") or {}
        if data.get("partition", self.partition) != self.partition:
            return
        if kind == "allocation.decided":
            state = self.pods.get(str(data.get("ask_id")))
            if state is not None and state.state == "pending":
                state.state, state.node = "decided", str(data["node_id"])
                self._spawn(self._bind(state, state.node))
        elif kind == "allocation.revoked":
            state = self.pods.get(str(data.get("ask_id")))
            if state is not None:
                self._spawn(self._evict(state, data))
        elif kind == "input.rejected":
            app_id = self.sent_apps.pop(str(data.get("input_id")), None)
            if app_id is not None and data.get("reason") != "app-exists":
                self.rejected_apps[app_id] = f"{data.get('reason')}: {data.get('message')}"
            ask_id = self.sent.pop(str(data.get("input_id")), None)
            state = self.pods.get(ask_id) if ask_id else None
            if state is not None:
                self._rejected(state, str(data.get("reason")), str(data.get("message")))
        elif kind == "app.state_changed":
            app_id, to = str(data.get("app_id")), str(data.get("to"))
            if to in TERMINAL_APP_STATES:
                self.apps.pop(app_id, None)
            if to == "Rejected":
                self.rejected_apps.setdefault(app_id, "rejected")

    def _rejected(self, state: PodState, reason: str, message: str) -> None:
        app_rejected = self.rejected_apps.get(state.ask.app_id)
        if reason == "unknown-app" and app_rejected is None:
            # its app completed before the ask was read: add both again
            self.apps.pop(state.ask.app_id, None)
            self._send_ask(state)
            return
        if app_rejected is not None:
            reason, message = "app rejected", app_rejected
        state.state = "rejected"
        self._spawn(self._report(state, f"evsched rejected the pod: {reason}: {message}"))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _bind(self, state: PodState, node: str) -> None:
        ask = state.ask
        async with self._binds:
            try:
                await self.api.bind(ask.namespace, ask.name, ask.uid, node)
            except ApiError as exc:
                if exc.status == 409 and "already assigned" in str(exc):
                    LOG.info("pod %s/%s was already bound (%s)", ask.namespace, ask.name, exc)
                    state.state = "bound"
                    return
                LOG.warning("binding pod %s/%s to %s failed: %s; releasing it", ask.namespace, ask.name, node, exc)
                if self.pods.get(ask.ask_id) is state:
                    del self.pods[ask.ask_id]
                    self._emit("allocation.released", {"app_id": ask.app_id, "ask_id": ask.ask_id})
                    await self.flush()
                return
            except (TimeoutError, OSError) as exc:
                LOG.warning("binding pod %s/%s to %s: %s; trying again", ask.namespace, ask.name, node, exc)
                await asyncio.sleep(1.0)
                self._spawn(self._bind(state, node))
                return
        if state.state == "decided":
            state.state = "bound"

    async def _evict(self, state: PodState, revoked: Json) -> None:
        ask = state.ask
        preemptor = revoked.get("preemptor") or {}
        if revoked.get("reason") == "preempted":
            by = self.pods.get(str(preemptor.get("ask_id")))
            by_name = f"{by.ask.namespace}/{by.ask.name}" if by else str(preemptor.get("ask_id"))
            message = f"{self.scheduler_name}: preempted to accommodate pod {by_name} (queue {preemptor.get('queue')})"
            reason = "PreemptionByScheduler"
        else:
            message = f"{self.scheduler_name}: allocation revoked: {revoked.get('reason')}"
            reason = "DeletionByScheduler"
        with contextlib.suppress(ApiError, OSError, asyncio.TimeoutError):
            await self.api.patch_pod_status(ask.namespace, ask.name, {"status": {"conditions": [
                {"type": "DisruptionTarget", "status": "True", "reason": reason, "message": message,
                 "lastTransitionTime": _now_text()}]}})
            await self.api.create_event(ask.namespace, self._event(ask, "Preempted", message, "Normal"))
        try:
            await self.api.delete_pod(ask.namespace, ask.name, ask.uid)
        except ApiError as exc:
            if exc.status not in (404, 409):
                LOG.warning("deleting preempted pod %s/%s: %s", ask.namespace, ask.name, exc)
        # the watch's DELETED releases the allocation

    # -- why pending: PodScheduled=False and FailedScheduling

    def _event(self, ask: PodAsk, reason: str, message: str, kind: str = "Warning") -> Json:
        now = _now_text()
        return {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{ask.name}.{uuid.uuid4().hex[:16]}", "namespace": ask.namespace},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": ask.namespace, "name": ask.name,
                               "uid": ask.uid},
            "reason": reason, "message": message[:1024], "type": kind, "count": 1,
            "firstTimestamp": now, "lastTimestamp": now,
            "source": {"component": self.scheduler_name}, "reportingComponent": self.scheduler_name,
        }

    async def _report(self, state: PodState, message: str) -> None:
        ask = state.ask
        state.reported, state.report_message = asyncio.get_running_loop().time(), message
        try:
            await self.api.patch_pod_status(ask.namespace, ask.name, {"status": {"conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message[:1024],
                 "lastTransitionTime": _now_text()}]}})
            await self.api.create_event(ask.namespace, self._event(ask, "FailedScheduling", message))
        except (TimeoutError, ApiError, OSError) as exc:
            LOG.debug("reporting on pod %s/%s: %s", ask.namespace, ask.name, exc)

    async def _report_unmodelled(self, state: PodState) -> None:
        state.unmodelled_reported = True
        ask = state.ask
        message = (f"{self.scheduler_name} does not model {', '.join(ask.unmodelled)}: the pod may be placed on a "
                   "node that does not satisfy them (docs/kubernetes.md)")
        with contextlib.suppress(ApiError, OSError, asyncio.TimeoutError):
            await self.api.create_event(ask.namespace, self._event(ask, "UnmodelledConstraints", message))

    async def _report_pending(self) -> None:
        from replay.explain.pending import explain_pending

        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(REPORT_AFTER_S)
            await self.between_cycles()  # from here to the end of the round nothing awaits: no cycle starts
            now, done = loop.time(), 0
            engine = self.engine()
            for state in list(self.pods.values()):
                if state.ask.unmodelled and not state.unmodelled_reported:
                    self._spawn(self._report_unmodelled(state))
                if state.state != "pending" or now - state.since < REPORT_AFTER_S:
                    continue
                if state.reported and now - state.reported < REPORT_EVERY_S:
                    continue
                if done >= REPORTS_PER_ROUND:
                    break
                why = explain_pending(engine, state.ask.app_id, state.ask.ask_id, self.partition)
                done += 1
                if why.status != "pending" or not why.reasons:
                    continue  # not read yet, decided (outputs on their way), or nothing holds it back: not stuck
                self._spawn(self._report(state, f"{self.scheduler_name}: {why.summary}"))

    async def _tick(self) -> None:
        """While pods wait, append an empty ``node.updated`` once a second: cycles run on inputs, and
        what waiting pods wait for is time (the 2 s no-fit reservation, the preemption delay). The
        tick is in the log, so replay re-derives the same cycles."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(TICK_S)
            now = loop.time()
            waiting = any(s.state == "pending" and now - s.since >= TICK_S for s in self.pods.values())
            if waiting and self.nodes and not self._pending:
                self._emit("node.updated", {"node_id": min(self.nodes)})
                await self.flush()

    async def close(self) -> None:
        for task in [*self._tasks, *self._background]:
            task.cancel()
        for task in [*self._tasks, *self._background]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
