"""The scheduling rules version: the number a cycle records so later code knows who decided it.

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
"""

from __future__ import annotations

RULES_VERSION = 3
LEGACY_RULES_VERSION = 1  # what a cycle record without the field was made by
IMPLEMENTED = frozenset({RULES_VERSION})  # versions whose cycles this build can re-derive
