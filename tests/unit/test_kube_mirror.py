"""PriorityClasses and namespaces read as YuniKorn's shim reads them (scheduler.kubernetes.mirror)."""

from __future__ import annotations

import json
from typing import Any

from scheduler.kubernetes.mirror import allow_preemption, namespace_tags, preempts_others, priority_of


def pod(spec: dict[str, Any] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "annotations": annotations or {}}, "spec": spec or {}}


def klass(name: str, value: int, *, default: bool = False, policy: str | None = None,
          annotations: dict[str, str] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"name": name, "annotations": annotations or {}}, "value": value,
                            "globalDefault": default}
    if policy:
        body["preemptionPolicy"] = policy
    return body


CLASSES = {
    "batch": klass("batch", 10, policy="Never", annotations={"yunikorn.apache.org/allow-preemption": "false"}),
    "normal": klass("normal", 100, default=True),
}


def test_priority_is_the_pods_own_then_its_class_then_the_global_default_then_zero() -> None:
    assert priority_of(pod({"priority": 7, "priorityClassName": "batch"}), CLASSES) == 7
    assert priority_of(pod({"priorityClassName": "batch"}), CLASSES) == 10
    assert priority_of(pod(), CLASSES) == 100
    assert priority_of(pod({"priorityClassName": "unknown"}), CLASSES) == 0
    assert priority_of(pod(), {}) == 0


def test_preemption_policy_is_the_pods_then_its_classes() -> None:
    assert preempts_others(pod({"priorityClassName": "batch"}), CLASSES) is False
    assert preempts_others(pod({"priorityClassName": "batch", "preemptionPolicy": "PreemptLowerPriority"}),
                           CLASSES) is True
    assert preempts_others(pod({"priorityClassName": "normal"}), CLASSES) is True


def test_allow_preemption_is_the_pods_annotation_then_its_priority_classes() -> None:
    assert allow_preemption(pod({"priorityClassName": "batch"}), CLASSES) is False
    assert allow_preemption(pod({"priorityClassName": "batch"}, {"yunikorn.apache.org/allow-preemption": "true"}),
                            CLASSES) is True
    assert allow_preemption(pod({"priorityClassName": "normal"}), CLASSES) is True
    assert allow_preemption(pod(annotations={"yunikorn.apache.org/allow-preemption": "False"}), {}) is False


def test_namespace_annotations_become_yunikorns_app_tags() -> None:
    namespace = {"metadata": {"name": "ns", "annotations": {
        "yunikorn.apache.org/parentqueue": "root.teams",
        "yunikorn.apache.org/namespace.quota": '{"cpu": "2", "memory": "1Gi"}',
        "yunikorn.apache.org/namespace.guaranteed": "not json",
        "yunikorn.apache.org/namespace.maxApps": "5"}}}
    tags = namespace_tags("ns", namespace)
    assert tags["namespace"] == "ns" and tags["namespace.parentqueue"] == "root.teams"
    assert json.loads(tags["namespace.resourcequota"]) == {"vcore": 2000, "memory": 1024**3}
    assert "namespace.resourceguaranteed" not in tags  # unreadable: left out, as YuniKorn's shim does
    assert tags["namespace.resourcemaxapps"] == "5"
    assert namespace_tags("other", None) == {"namespace": "other"}


def test_a_max_apps_annotation_that_is_no_ascii_number_is_not_a_tag() -> None:
    for text in ("²", "٣", "-1", "5.0", "1" * 11):
        namespace = {"metadata": {"name": "ns", "annotations": {"yunikorn.apache.org/namespace.maxApps": text}}}
        assert "namespace.resourcemaxapps" not in namespace_tags("ns", namespace), text
