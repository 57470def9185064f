"""Pods and nodes read as evsched sees them (scheduler.kubernetes.objects, quantity): requests, apps, queues, nodes."""

from __future__ import annotations

from typing import Any

import pytest

from events.models import Constraints as ConstraintsModel
from events.models import Taint as TaintModel
from scheduler.kubernetes.objects import (
    default_app_id,
    node_info,
    occupying,
    pod_ask,
    pod_constraints,
    pod_requests,
    required_node_of,
    unmodelled,
)
from scheduler.kubernetes.quantity import QuantityError, parse_quantity, to_units


def container(cpu: str | None = None, memory: str | None = None, **extra: Any) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return {"name": "c", "resources": {"requests": requests}, **extra}


def pod(spec: dict[str, Any], labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
        namespace: str = "team-a") -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": namespace, "uid": "u-1", "labels": labels or {},
                         "annotations": annotations or {}}, "spec": spec}


@pytest.mark.parametrize(("name", "text", "units"), [
    ("cpu", "1", 1000), ("cpu", "250m", 250), ("cpu", "1.5", 1500), ("cpu", "0.0001", 1),  # rounds up
    ("memory", "1Gi", 2**30), ("memory", "1G", 10**9), ("memory", "1.5Ki", 1536), ("memory", "2e3", 2000),
    ("memory", "129M", 129_000_000), ("pods", "110", 110), ("nvidia.com/gpu", "2", 2),
])
def test_quantities_in_evsched_units(name: str, text: str, units: int) -> None:
    assert to_units(name, text) == units


@pytest.mark.parametrize("text", ["", "1.2.3", "4Gx", "ten", "1" * 80, "-1"])
def test_a_bad_quantity_is_refused(text: str) -> None:
    with pytest.raises(QuantityError):
        to_units("memory", text)


def test_exact_values() -> None:
    assert parse_quantity("100m") * 10 == 1


def test_requests_as_kubernetes_computes_them() -> None:
    spec = {
        "containers": [container("500m", "1Gi"), container("250m", "512Mi")],
        "initContainers": [container("2", "256Mi"), container("100m", "4Gi")],
        "overhead": {"cpu": "10m", "memory": "1Mi"},
    }
    # cpu: max(750m, 2000m) + 10m; memory: max(1.5Gi, 4Gi) + 1Mi
    assert pod_requests(pod(spec)) == {"vcore": 2010, "memory": 4 * 2**30 + 2**20}


def test_sidecars_count_with_the_containers_and_before_later_init_containers() -> None:
    spec = {
        "containers": [container("1")],
        "initContainers": [container("500m", restartPolicy="Always"), container("2")],
    }
    # containers + sidecar = 1.5; the regular init container runs beside the sidecar: 2.5
    assert pod_requests(pod(spec)) == {"vcore": 2500}


def test_app_queue_and_user_follow_yunikorn_conventions() -> None:
    labelled = pod_ask(pod({"containers": [container("1")], "priority": 100, "preemptionPolicy": "Never"},
                           labels={"applicationId": "spark-1", "queue": "root.batch"},
                           annotations={"yunikorn.apache.org/user.info": '{"user": "alice", "groups": ["g"]}',
                                        "yunikorn.apache.org/allow-preemption": "false"}))
    assert (labelled.app_id, labelled.queue, labelled.user) == ("spark-1", "root.batch", "alice")
    assert (labelled.priority, labelled.preempt_other, labelled.allow_preemption) == (100, False, False)
    assert labelled.resources == {"vcore": 1000, "pods": 1}
    assert labelled.ask_id == "team-a.p"
    plain = pod_ask(pod({"containers": [container("1")]}))
    assert (plain.app_id, plain.queue, plain.user) == (default_app_id("team-a"), "", "nobody")
    assert plain.app_id == "yunikorn-team-a-autogen"
    assert (plain.priority, plain.preempt_other, plain.allow_preemption) == (0, True, True)
    by_annotation = pod_ask(pod({"containers": [container("1")]},
                                annotations={"yunikorn.apache.org/app-id": "a2", "yunikorn.apache.org/queue": "q"}))
    assert (by_annotation.app_id, by_annotation.queue) == ("a2", "q")


def test_a_daemonset_pod_is_a_required_node_ask() -> None:
    daemon = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-3"]}]}]}}},
        "containers": [container("1")]}
    assert required_node_of(pod(daemon)) == "node-3"
    assert pod_ask(pod(daemon)).required_node == "node-3"
    assert unmodelled(pod(daemon)) == ()


SPEC_WITH_EVERYTHING: dict[str, Any] = {
    "nodeSelector": {"disk": "ssd"},
    "containers": [container("1", ports=[{"containerPort": 80, "hostPort": 8080},
                                         {"containerPort": 53, "hostPort": 53, "protocol": "UDP",
                                          "hostIP": "10.0.0.1"},
                                         {"containerPort": 9000}])],
    "initContainers": [container("1", restartPolicy="Always", ports=[{"containerPort": 1, "hostPort": 9100}]),
                       container("1", ports=[{"containerPort": 1, "hostPort": 9200}])],  # not a sidecar: not bound
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
                    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                     "tolerationSeconds": 300},
                    {"operator": "Exists"}],
    "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{}]},
                 "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                     {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                     {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]}]},
                     "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {}}]}},
    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "x"}}],
}


def test_what_is_not_modelled_is_named() -> None:
    assert unmodelled(pod(SPEC_WITH_EVERYTHING)) == ("pod anti-affinity", "preferred node affinity", "volume claims")


def test_a_pods_node_constraints_become_the_asks_constraints() -> None:
    constraints = pod_constraints(pod(SPEC_WITH_EVERYTHING))
    assert constraints == {
        "node_selector": {"disk": "ssd"},
        "node_affinity": [
            {"match_expressions": [{"key": "zone", "operator": "In", "values": ["a"]}], "match_fields": []},
            {"match_expressions": [], "match_fields": [{"key": "metadata.name", "operator": "NotIn",
                                                        "values": ["n9"]}]}],
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
                        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "value": "",
                         "effect": "NoExecute"},
                        {"key": "", "operator": "Exists", "value": "", "effect": ""}],
        "host_ports": [{"port": 9100, "protocol": "TCP", "host_ip": ""},  # the sidecar's first, as Kubernetes
                       {"port": 8080, "protocol": "TCP", "host_ip": ""},
                       {"port": 53, "protocol": "UDP", "host_ip": "10.0.0.1"}],
    }
    ConstraintsModel.model_validate(constraints)  # what the ask carries is valid as it stands
    assert pod_ask(pod(SPEC_WITH_EVERYTHING)).constraints == constraints
    assert pod_constraints(pod({"containers": [container("1")]})) == {}  # none: still constraints (taints apply)


def test_a_daemonsets_node_affinity_is_its_required_node_not_a_constraint() -> None:
    spec = {"containers": [container("1")], "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}}
    ask = pod_ask(pod(spec))
    assert ask.required_node == "n1" and ask.constraints == {}


def test_node_taints_are_read_without_their_time() -> None:
    node = {"metadata": {"name": "n1", "labels": {"zone": "a"}},
            "spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule",
                                 "timeAdded": "2026-01-01T00:00:00Z"}, {"key": "spot", "effect": "PreferNoSchedule"}]},
            "status": {"allocatable": {"cpu": "1"}, "conditions": [{"type": "Ready", "status": "True"}]}}
    info = node_info(node)
    assert info.taints == [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                           {"key": "spot", "value": "", "effect": "PreferNoSchedule"}]
    assert [TaintModel.model_validate(t) for t in info.taints]


def test_nodes_schedulable_only_when_ready_and_not_cordoned() -> None:
    def node(ready: str, unschedulable: bool = False) -> dict[str, Any]:
        return {"metadata": {"name": "n1", "uid": "x", "labels": {"zone": "a"}},
                "spec": {"unschedulable": unschedulable},
                "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                           "conditions": [{"type": "Ready", "status": ready}]}}

    info = node_info(node("True"))
    assert info.capacity == {"vcore": 32000, "memory": 256 * 2**30, "pods": 110}
    assert info.schedulable and info.labels == {"zone": "a"}
    assert not node_info(node("False")).schedulable
    assert not node_info(node("True", unschedulable=True)).schedulable


def test_other_schedulers_pods_occupy_their_node_until_they_finish() -> None:
    bound = pod({"nodeName": "n1", "containers": [container("1", "1Gi")]})
    assert occupying(bound) == {"vcore": 1000, "memory": 2**30, "pods": 1}
    assert occupying(pod({"containers": [container("1")]})) == {}  # not bound yet
    finished = dict(bound, status={"phase": "Succeeded"})
    assert occupying(finished) == {}
