"""The scheduling rules version: the number a cycle records so later code knows who decided it.

Defined here, in the log's language, so that the independent audit (which imports nothing
of the scheduler core) checks the same versions as ``replay verify``.

Bump ``RULES_VERSION`` whenever a change to the core can make any decision or output of a
cycle differ for the same inputs, times and cycle boundaries (a sort key, a fit rule, a
timer, a new output type). ``tests/unit/test_rules_version.py`` keeps a digest of the golden
scenarios' outputs per version and fails when they change under an unchanged number.

Every ``cycle.started`` and ``cycle.completed`` carries ``rules_version``; logs written
before the field existed are version 1 (the field's default when read).

* 1 — evsched up to commit 9056fd4 (no ``rules_version`` field in the log).
* 2 — issue 16 (YuniKorn-exact fixes, reservations; a Completed app leaves its queue and
  partition), issue 21 (placement rules, user/group limits) and issue 18 (the cycle records carry ``rules_version``).
* 3 — issue 20: preemption (an ask that may preempt takes resources back from queues above
  their guarantee; required-node asks preempt on their node). The fixed scenario set has no
  ask that may preempt, so its digest is version 2's; logs with ``PreemptLowerPriority``
  classes, ``system-`` classes or ``preempt_other`` asks decide differently.
* 4 — issue 33 (conformance on yunikorn's clock): an ask that fits nowhere reserves the
  node with the lowest ``ask.FitInScore(node.available)``; an app sent without groups is in
  a group named after its user; a removed app that held no allocation, or was Completing,
  goes on to Completed at once.
* 5 — issue 34: gang scheduling (placeholders of task groups, their replacement between the
  reserved asks and the walk, the placeholder timeout; ``ask.released``, the gang fields of
  ``allocation.decided``). The fixed scenario set sends no placeholder, so its digest is
  version 4's; logs with ``placeholder``/``task_group`` asks decide differently (under 4 the
  fields were rejected as unknown).
  Also issue 35, the rules profiles: a partition's config may name ``rules: yunikorn-1.9``
  (under 4 the key was refused) and its cycles then decide by yunikorn-core v1.9.0's rules
  (``cycle.completed`` ``profiles`` says so); under the default ``yunikorn-1.5`` nothing
  changed. Also node constraints (``ask.added`` ``constraints``, node ``labels``/``taints``;
  under 4 the fields were refused as unknown): a constrained ask goes only to a node they admit.
* 6 — fixes after version 5 shipped, each changing decisions only for the logs named:
  a gang's real ask replaces a placeholder only on a node its constraints admit (under 5 it
  took the placeholder's node whatever its constraints); queue delays (``preemption.delay``
  and yunikorn-1.9's) read exactly as Go's ``time.ParseDuration`` (under 5 ``8.05ms`` was
  8,051 µs, ``0.5ns`` 1 µs, ``3000000h`` accepted); under ``yunikorn-1.9``, quota preemption
  compares maxes with a missing type as 0 (``{memory: 40, vcore: 0}`` equals
  ``{memory: 40}``), and a preemption attempt cancels other asks' reservations of lower
  priority older than an hour (YUNIKORN-3092; ``ask.unreserved`` reason
  ``preemption-cancelled``). The fixed scenario set reaches none of these: its digest is 5's.
"""

from __future__ import annotations

RULES_VERSION = 6
LEGACY_RULES_VERSION = 1  # what a cycle record without the field was made by
KNOWN = frozenset(range(LEGACY_RULES_VERSION, RULES_VERSION + 1))  # every version up to this build's


def rules_version_problem(version: int, previous: int | None) -> str | None:
    """Why a cycle recorded under ``version`` cannot be trusted after one under ``previous``.

    A version this build does not know (above its own, or below 1) was not written by any
    evsched up to this build: a newer build's log, or a forged cycle. A version below the
    previous cycle's would be a downgrade, which is not supported (docs/upgrading.md): the
    cycle was not written by the code that wrote the log before it. ``replay verify`` reports
    either as a divergence, ``audit`` as a ``rules-version`` violation.
    """
    if version not in KNOWN:
        return (f"rules version {version} is unknown to this build (it knows {LEGACY_RULES_VERSION} to "
                f"{RULES_VERSION}): a newer evsched's cycle, or a forged one")
    if previous is not None and version < previous:
        return (f"rules version {version} after a cycle made under rules version {previous}: rules versions "
                "never go back (downgrading is not supported), so this cycle was not written by the code that "
                "wrote the cycles before it")
    return None
