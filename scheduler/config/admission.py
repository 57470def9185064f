"""Resolve admission settings: placement rules, child templates and user/group limits.

Mirrors YuniKorn v1.5.2: ``placement.newRule``/``newFilter`` (rule names any case, a
``deny`` filter type, everything else allows), ``template.FromConf`` (a template is
inherited by descendants until one sets its own) and the ``limits`` entries ``ugm``
reads (``users``/``groups`` with ``*`` wildcards, ``maxresources``, ``maxapplications``).
"""

from __future__ import annotations

from collections.abc import Mapping

from events.quantities import parse_resources
from scheduler.config.frozenmap import FrozenMap
from scheduler.config.model import RawChildTemplate, RawLimit, RawPlacementRule
from scheduler.config.specs import FilterSpec, LimitSpec, RuleSpec, TemplateSpec


def _resources(values: Mapping[str, str] | None) -> FrozenMap[str, int]:
    parsed = parse_resources(values or {})
    return FrozenMap({name: parsed[name] for name in sorted(parsed) if parsed[name] != 0})


def resolve_rule(raw: RawPlacementRule) -> RuleSpec:
    """One placement rule with its parent chain (names normalised to lower case)."""
    flt = raw.filter
    return RuleSpec(
        name=raw.name.lower(),
        create=raw.create,
        value=raw.value,
        filter=FilterSpec(
            allow=flt is None or flt.type.lower() != "deny",
            users=tuple(flt.users or ()) if flt is not None else (),
            groups=tuple(flt.groups or ()) if flt is not None else (),
        ),
        parent=resolve_rule(raw.parent) if raw.parent is not None else None,
    )


def resolve_rules(raw: list[RawPlacementRule] | None) -> tuple[RuleSpec, ...]:
    """The partition's rules in config order (empty: apps name their own queue)."""
    return tuple(resolve_rule(r) for r in raw or ())


def resolve_template(raw: RawChildTemplate | None, inherited: TemplateSpec | None) -> TemplateSpec | None:
    """A queue's own child template, else the one it inherits from its parent."""
    if raw is None:
        return inherited
    res = raw.resources
    return TemplateSpec(
        max_applications=raw.maxapplications,
        properties=FrozenMap({k: (raw.properties or {})[k] for k in sorted(raw.properties or {})}),
        guaranteed=_resources(res.guaranteed if res else None),
        max=_resources(res.max if res else None),
    )


def resolve_limits(raw: list[RawLimit] | None) -> tuple[LimitSpec, ...]:
    """A queue's ``limits`` entries in config order."""
    return tuple(
        LimitSpec(
            users=tuple(u for u in limit.users or () if u),
            groups=tuple(g for g in limit.groups or () if g),
            max_resources=_resources(limit.maxresources),
            max_applications=limit.maxapplications,
        )
        for limit in raw or ()
    )
