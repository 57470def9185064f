"""Kubernetes priority classes: the registry and how an ask's priority is resolved.

Built-ins ``system-cluster-critical`` (2,000,000,000) and ``system-node-critical``
(2,000,001,000, Kubernetes' value) always exist. User classes must not start with ``system-``
and may not exceed 1,000,000,000; at most one is the global default. As in Kubernetes, a
class's value and preemption policy cannot change once defined.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from projections.priority import in_int32

BUILTIN_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}
MAX_USER_VALUE = 1_000_000_000


class PriorityError(ValueError):
    """An ask's or class's priority cannot be admitted; ``reason`` is the stable code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class PriorityClass:
    """One class: its value, whether it is the global default, its preemption policy."""

    name: str
    value: int
    global_default: bool = False
    preemption_policy: str = "Never"


@dataclass
class PriorityClasses:
    """The cluster's priority classes (user-defined; built-ins are implicit)."""

    classes: dict[str, PriorityClass] = field(default_factory=dict)

    def upsert(self, cls: PriorityClass) -> None:
        """Add or replace a class; raises PriorityError when a rule forbids it."""
        if cls.name.startswith("system-"):
            raise PriorityError("priority-class", f"class names starting 'system-' are reserved: {cls.name!r}")
        if not in_int32(cls.value) or cls.value > MAX_USER_VALUE:
            raise PriorityError("priority-range", f"class {cls.name!r} value {cls.value} exceeds 1000000000")
        old = self.classes.get(cls.name)
        if old is not None and (old.value, old.preemption_policy) != (cls.value, cls.preemption_policy):
            raise PriorityError(
                "priority-class",
                f"class {cls.name!r}: value and preemption_policy cannot change "
                f"({old.value}, {old.preemption_policy}); delete and re-create it",
            )
        if cls.global_default:
            for other in self.classes.values():
                if other.global_default and other.name != cls.name:
                    raise PriorityError(
                        "priority-class", f"class {other.name!r} is already the global default"
                    )
        self.classes[cls.name] = cls

    def delete(self, name: str) -> None:
        """Remove a user class; raises PriorityError for built-ins and unknown names."""
        if name in BUILTIN_CLASSES:
            raise PriorityError("priority-class", f"built-in class {name!r} cannot be deleted")
        if name not in self.classes:
            raise PriorityError("priority-class", f"unknown priority class {name!r}")
        del self.classes[name]

    def preempts(self, class_name: str | None) -> bool:
        """Whether an ask of this class (None: the global default class) may preempt others.

        The built-in ``system-`` classes preempt (Kubernetes gives them PreemptLowerPriority).
        """
        if class_name is None:
            found = next((c for c in self.classes.values() if c.global_default), None)
        elif class_name in BUILTIN_CLASSES:
            return True
        else:
            found = self.classes.get(class_name)
        return found is not None and found.preemption_policy == "PreemptLowerPriority"

    def resolve(self, priority: int | None, class_name: str | None) -> int:
        """An ask's priority from its fields (docs/contract.md §2 "Ask priority")."""
        if priority is not None and not in_int32(priority):
            raise PriorityError("priority-range", f"priority {priority} is outside int32")
        if class_name is not None:
            if class_name in BUILTIN_CLASSES:
                value = BUILTIN_CLASSES[class_name]
            elif class_name in self.classes:
                value = self.classes[class_name].value
            else:
                raise PriorityError("priority-class", f"unknown priority class {class_name!r}")
            if priority is not None and priority != value:
                raise PriorityError(
                    "priority-class", f"priority {priority} disagrees with class {class_name!r} ({value})"
                )
            return value
        if priority is not None:
            return priority
        for cls in self.classes.values():
            if cls.global_default:
                return cls.value
        return 0
