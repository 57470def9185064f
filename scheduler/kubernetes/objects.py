"""Pods and nodes of the Kubernetes API (plain JSON objects) read as evsched sees them: asks and nodes.

Pure functions, YuniKorn's shim conventions (docs/kubernetes.md):

* the app is the pod's ``applicationId`` label (then ``spark-app-selector``, then the
  ``yunikorn.apache.org/app-id`` annotation); without one, ``yunikorn-<namespace>-autogen``;
* the queue is the ``queue`` label (then the ``yunikorn.apache.org/queue`` annotation); without
  one the partition's placement rules choose (the app carries its namespace as tag ``namespace``);
* the user is the ``yunikorn.apache.org/user.info`` annotation's ``user`` (default ``nobody``);
* the ask is what Kubernetes schedules by: the containers' requests summed, the largest init
  container (sidecars, init containers that restart, counted with the containers), plus the pod's
  overhead, plus ``pods: 1``; its priority, preemption policy and whether it may be preempted
  are the pod's, else its PriorityClass's (``scheduler.kubernetes.mirror``);
* a DaemonSet's pod (required node affinity on ``metadata.name``) is a required-node ask;
* where a pod may run — its ``nodeSelector``, required node affinity, tolerations and host ports —
  is the ask's ``constraints`` (``pod_constraints``), checked by the core against the node's labels
  and taints (``node_info``);
* a node's capacity is ``status.allocatable``; it is schedulable unless cordoned or not Ready.

What a pod asks that evsched does not model is listed by ``unmodelled`` and reported on the pod.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.kubernetes.mirror import allow_preemption, preempts_others, priority_of
from scheduler.kubernetes.quantity import QuantityError, resources_of

APP_LABELS = ("applicationId", "spark-app-selector")
APP_ANNOTATION = "yunikorn.apache.org/app-id"
QUEUE_LABEL = "queue"
QUEUE_ANNOTATION = "yunikorn.apache.org/queue"
USER_ANNOTATION = "yunikorn.apache.org/user.info"
DEFAULT_USER = "nobody"
TERMINAL_PHASES = ("Succeeded", "Failed")

Json = dict[str, Any]


def default_app_id(namespace: str) -> str:
    """YuniKorn's app for pods without an application id: one per namespace."""
    return f"yunikorn-{namespace}-autogen"


def ask_id_of(namespace: str, name: str) -> str:
    """A pod's ask id: ``<namespace>.<name>`` (a namespace has no dots, so the first one splits them;
    identifiers may not hold '/')."""
    return f"{namespace}.{name}"


@dataclass(frozen=True, slots=True)
class PodAsk:
    """What evsched needs of one pod scheduled by it."""

    uid: str
    namespace: str
    name: str
    app_id: str
    queue: str  # "": placement rules choose
    user: str
    resources: dict[str, int]
    priority: int
    preempt_other: bool
    allow_preemption: bool
    required_node: str | None
    unmodelled: tuple[str, ...]
    constraints: Json  # ``ask.added``'s ``constraints``

    @property
    def ask_id(self) -> str:
        return ask_id_of(self.namespace, self.name)


def _meta(obj: Mapping[str, Any]) -> Json:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _spec(obj: Mapping[str, Any]) -> Json:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _status(obj: Mapping[str, Any]) -> Json:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def app_id_of(pod: Mapping[str, Any]) -> str:
    meta = _meta(pod)
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    for label in APP_LABELS:
        if labels.get(label):
            return str(labels[label])
    if annotations.get(APP_ANNOTATION):
        return str(annotations[APP_ANNOTATION])
    return default_app_id(str(meta.get("namespace", "default")))


def queue_of(pod: Mapping[str, Any]) -> str:
    meta = _meta(pod)
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    return str(labels.get(QUEUE_LABEL) or annotations.get(QUEUE_ANNOTATION) or "")


def user_of(pod: Mapping[str, Any]) -> str:
    info = (_meta(pod).get("annotations") or {}).get(USER_ANNOTATION)
    if info:
        try:
            user = json.loads(info).get("user")
        except (ValueError, AttributeError):
            user = None
        if isinstance(user, str) and user:
            return user
    return DEFAULT_USER


def _requests(container: Mapping[str, Any]) -> dict[str, int]:
    resources = container.get("resources") or {}
    return resources_of(resources.get("requests"))


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for name, value in more.items():
        into[name] = into.get(name, 0) + value


def _max(into: dict[str, int], more: Mapping[str, int]) -> None:
    for name, value in more.items():
        into[name] = max(into.get(name, 0), value)


def pod_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """The pod's requests as kube-scheduler computes them (``resourcehelper.PodRequests``): containers
    summed with the restartable init containers (sidecars), against the largest of each regular init
    container plus the sidecars started before it; then the overhead. Zero entries are left out.

    Raises ``QuantityError`` for a quantity that is not one."""
    spec = _spec(pod)
    containers: dict[str, int] = {}
    for container in spec.get("containers") or []:
        _add(containers, _requests(container))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in spec.get("initContainers") or []:
        requests = _requests(container)
        if container.get("restartPolicy") == "Always":
            _add(sidecars, requests)
            _max(init_peak, sidecars)
        else:
            with_sidecars = dict(sidecars)
            _add(with_sidecars, requests)
            _max(init_peak, with_sidecars)
    total = dict(containers)
    _add(total, sidecars)
    _max(total, init_peak)
    _add(total, resources_of(spec.get("overhead")))
    return {name: value for name, value in total.items() if value}


def required_node_of(pod: Mapping[str, Any]) -> str | None:
    """The node a DaemonSet's pod must run on: required node affinity of one term whose only
    requirement is ``metadata.name In [node]`` (the DaemonSet controller's form)."""
    affinity = (_spec(pod).get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms") or []
    if len(terms) != 1 or terms[0].get("matchExpressions"):
        return None
    fields = terms[0].get("matchFields") or []
    if len(fields) == 1 and fields[0].get("key") == "metadata.name" and fields[0].get("operator") == "In":
        values = fields[0].get("values") or []
        if len(values) == 1:
            return str(values[0])
    return None


def _requirements(items: Any) -> list[Json]:
    return [{"key": str(r.get("key", "")), "operator": str(r.get("operator", "")),
             "values": [str(v) for v in r.get("values") or []]}
            for r in items or [] if isinstance(r, dict)]


def host_ports_of(pod: Mapping[str, Any]) -> list[Json]:
    """The host ports the pod binds (kube-scheduler's ``GetHostPorts``): its sidecars' (init containers
    that restart) and its containers' ports with a ``hostPort``."""
    spec = _spec(pod)
    containers = [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    containers += spec.get("containers") or []
    ports: list[Json] = []
    for container in containers:
        for port in container.get("ports") or []:
            if isinstance(port.get("hostPort"), int) and port["hostPort"] > 0:
                ports.append({"port": port["hostPort"], "protocol": str(port.get("protocol") or "TCP"),
                              "host_ip": str(port.get("hostIP") or "")})
    return ports


def pod_constraints(pod: Mapping[str, Any]) -> Json:
    """Where the pod may run, as ``ask.added``'s ``constraints`` (docs/event-reference.md): its
    ``nodeSelector``, required node affinity (but a DaemonSet's, which is the ask's required node),
    tolerations (without ``tolerationSeconds``, which only delays an eviction) and host ports.
    Empty (``{}``) when it has none of them: still constraints, so node taints keep it off as
    Kubernetes would (an ask without ``constraints`` is placed by its resources alone)."""
    spec = _spec(pod)
    out: Json = {}
    selector = spec.get("nodeSelector")
    if isinstance(selector, dict) and selector:
        out["node_selector"] = {str(k): str(v) for k, v in selector.items()}
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms")
    if isinstance(terms, list) and terms and required_node_of(pod) is None:
        out["node_affinity"] = [{"match_expressions": _requirements(t.get("matchExpressions")),
                                 "match_fields": _requirements(t.get("matchFields"))}
                                for t in terms if isinstance(t, dict)]
    tolerations = [{"key": str(t.get("key") or ""), "operator": str(t.get("operator") or "Equal"),
                    "value": str(t.get("value") or ""), "effect": str(t.get("effect") or "")}
                   for t in spec.get("tolerations") or [] if isinstance(t, dict)]
    if tolerations:
        out["tolerations"] = tolerations
    ports = host_ports_of(pod)
    if ports:
        out["host_ports"] = ports
    return out


def unmodelled(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """What the pod asks of its node that evsched's fit check does not model (reported on the pod,
    never silently ignored): pod (anti-)affinity, topology spread, volumes that claim storage (and
    their topology), dynamic resource claims, preferred node affinity (a score, not a filter)."""
    spec = _spec(pod)
    found: list[str] = []
    affinity = spec.get("affinity") or {}
    if affinity.get("podAffinity"):
        found.append("pod affinity")
    if affinity.get("podAntiAffinity"):
        found.append("pod anti-affinity")
    if (affinity.get("nodeAffinity") or {}).get("preferredDuringSchedulingIgnoredDuringExecution"):
        found.append("preferred node affinity")
    if spec.get("topologySpreadConstraints"):
        found.append("topology spread constraints")
    if any("persistentVolumeClaim" in v or "ephemeral" in v for v in spec.get("volumes") or []):
        found.append("volume claims")
    if spec.get("resourceClaims"):
        found.append("resource claims")
    return tuple(found)


def pod_ask(pod: Mapping[str, Any], classes: Mapping[str, Json] | None = None) -> PodAsk:
    """A pod as an ask (raises ``QuantityError`` for a request that is no quantity); its priority
    and preemption read with ``classes``, the PriorityClasses by name (``scheduler.kubernetes.mirror``)."""
    meta = _meta(pod)
    classes = classes or {}
    resources = pod_requests(pod)
    resources["pods"] = 1  # every pod takes one of its node's pod slots (YuniKorn's shim does the same)
    return PodAsk(
        uid=str(meta.get("uid", "")),
        namespace=str(meta.get("namespace", "default")),
        name=str(meta.get("name", "")),
        app_id=app_id_of(pod),
        queue=queue_of(pod),
        user=user_of(pod),
        resources=resources,
        priority=priority_of(pod, classes),
        preempt_other=preempts_others(pod, classes),
        allow_preemption=allow_preemption(pod, classes),
        required_node=required_node_of(pod),
        unmodelled=unmodelled(pod),
        constraints=pod_constraints(pod),
    )


def is_terminal(pod: Mapping[str, Any]) -> bool:
    """A pod that finished (Succeeded or Failed) holds nothing any more."""
    return _status(pod).get("phase") in TERMINAL_PHASES


def node_name_of(pod: Mapping[str, Any]) -> str:
    return str(_spec(pod).get("nodeName") or "")


def scheduler_name_of(pod: Mapping[str, Any]) -> str:
    return str(_spec(pod).get("schedulerName") or "default-scheduler")


def occupying(pod: Mapping[str, Any]) -> dict[str, int]:
    """What a pod bound by another scheduler takes of its node (nothing once finished)."""
    if is_terminal(pod) or not node_name_of(pod):
        return {}
    try:
        used = pod_requests(pod)
    except QuantityError:
        return {}  # the API server validated it: never reached; a pod we cannot read takes nothing
    used["pods"] = 1
    return used


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """What evsched needs of one node."""

    name: str
    uid: str
    capacity: dict[str, int]
    schedulable: bool
    labels: dict[str, str]
    taints: list[dict[str, str]]  # ``node.added``'s form: key, value, effect


def _ready(node: Mapping[str, Any]) -> bool:
    for condition in _status(node).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def node_info(node: Mapping[str, Any]) -> NodeInfo:
    """A node's allocatable capacity, whether pods may be placed on it (not cordoned, Ready), its
    labels and taints (without ``timeAdded``)."""
    meta = _meta(node)
    labels = meta.get("labels") or {}
    taints = [{"key": str(t.get("key", "")), "value": str(t.get("value") or ""), "effect": str(t.get("effect", ""))}
              for t in _spec(node).get("taints") or [] if isinstance(t, dict)]
    return NodeInfo(
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        capacity=resources_of(_status(node).get("allocatable")),
        schedulable=not _spec(node).get("unschedulable", False) and _ready(node),
        labels={str(k): str(v) for k, v in labels.items()},
        taints=taints,
    )
