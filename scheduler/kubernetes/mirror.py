"""PriorityClasses and Namespaces as YuniKorn's shim reads them: a pod's priority and preemption, an app's tags.

Pure functions over the shim's mirrors (plain JSON objects by name, kept by list + watch), read
when a pod's ask or its app is sent, as YuniKorn's shim reads its informers' caches:

* a pod's **priority** is ``spec.priority`` (the API server's Priority admission resolved its
  class); without it (admission off, a pod written before the class) the value of its
  ``priorityClassName``'s class, else of the cluster's ``globalDefault`` class, else 0;
* its **preemption policy** is ``spec.preemptionPolicy``, else its class's, else
  ``PreemptLowerPriority``;
* **may it be preempted**: the pod's ``yunikorn.apache.org/allow-preemption`` annotation, else
  its PriorityClass's (YuniKorn's opt-out: ``"false"`` on the class protects every pod of it),
  else yes;
* an **app's tags**: ``namespace`` (the ``tag`` placement rule's usual value) and, from the
  namespace's annotations, ``namespace.parentqueue`` (``yunikorn.apache.org/parentqueue``),
  ``namespace.resourcequota`` (``yunikorn.apache.org/namespace.quota``),
  ``namespace.resourceguaranteed`` (``yunikorn.apache.org/namespace.guaranteed``) and
  ``namespace.resourcemaxapps`` (``yunikorn.apache.org/namespace.maxApps``) — YuniKorn's tag
  names; quotas are JSON objects of evsched's resource names and units.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from scheduler.kubernetes.quantity import QuantityError, resources_of

Json = dict[str, Any]
ALLOW_PREEMPTION_ANNOTATION = "yunikorn.apache.org/allow-preemption"
PARENT_QUEUE_ANNOTATION = "yunikorn.apache.org/parentqueue"
QUOTA_ANNOTATION = "yunikorn.apache.org/namespace.quota"
GUARANTEED_ANNOTATION = "yunikorn.apache.org/namespace.guaranteed"
MAX_APPS_ANNOTATION = "yunikorn.apache.org/namespace.maxApps"
MAX_TAG_VALUE = 1024  # a namespace annotation longer than this is not copied into a tag (the log is bounded)


def _annotations(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return ((obj or {}).get("metadata") or {}).get("annotations") or {}


def _class_of(pod: Mapping[str, Any], classes: Mapping[str, Json]) -> Json | None:
    name = (pod.get("spec") or {}).get("priorityClassName")
    return classes.get(str(name)) if name else None


def _global_default(classes: Mapping[str, Json]) -> Json | None:
    defaults = sorted((name, c) for name, c in classes.items() if c.get("globalDefault") is True)
    return defaults[0][1] if defaults else None  # Kubernetes allows one; the first by name if not


def priority_of(pod: Mapping[str, Any], classes: Mapping[str, Json]) -> int:
    """The pod's priority: its own, else its class's, else the global default class's, else 0."""
    own = (pod.get("spec") or {}).get("priority")
    if isinstance(own, int) and not isinstance(own, bool):
        return own
    named = (pod.get("spec") or {}).get("priorityClassName")
    found = _class_of(pod, classes) if named else _global_default(classes)
    value = (found or {}).get("value")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def preempts_others(pod: Mapping[str, Any], classes: Mapping[str, Json]) -> bool:
    """Whether the pod may preempt: its preemption policy, else its class's, else yes."""
    policy = (pod.get("spec") or {}).get("preemptionPolicy") or (_class_of(pod, classes) or {}).get("preemptionPolicy")
    return policy != "Never"


def allow_preemption(pod: Mapping[str, Any], classes: Mapping[str, Json]) -> bool:
    """Whether the pod may be a victim: its annotation, else its PriorityClass's, else yes (YuniKorn's order)."""
    for source in (pod, _class_of(pod, classes)):
        value = str(_annotations(source).get(ALLOW_PREEMPTION_ANNOTATION, "")).lower()
        if value in ("true", "false"):
            return value == "true"
    return True


def _resources_tag(text: str) -> str | None:
    try:
        wanted = json.loads(text)
        if not isinstance(wanted, dict):
            return None
        return json.dumps(resources_of({str(k): str(v) for k, v in wanted.items()}), sort_keys=True)
    except (ValueError, QuantityError):
        return None


def namespace_tags(namespace: str, namespace_obj: Mapping[str, Any] | None) -> dict[str, str]:
    """An app's tags from its namespace (``namespace`` always; the rest when annotated and readable)."""
    tags = {"namespace": namespace}
    annotations = _annotations(namespace_obj)
    parent = str(annotations.get(PARENT_QUEUE_ANNOTATION, ""))
    if parent and len(parent) <= MAX_TAG_VALUE:
        tags["namespace.parentqueue"] = parent
    for annotation, tag in ((QUOTA_ANNOTATION, "namespace.resourcequota"),
                            (GUARANTEED_ANNOTATION, "namespace.resourceguaranteed")):
        text = str(annotations.get(annotation, ""))
        value = _resources_tag(text) if text and len(text) <= MAX_TAG_VALUE else None
        if value is not None:
            tags[tag] = value
    max_apps = str(annotations.get(MAX_APPS_ANNOTATION, ""))
    if max_apps.isascii() and max_apps.isdigit() and len(max_apps) <= 10:  # "²".isdigit() too
        tags["namespace.resourcemaxapps"] = max_apps
    return tags
