"""The run layer, above :mod:`specverify.checks`: planning a battery on a subject, running it, and
the run's record.

* :mod:`._plan`: which checks of which battery run on a subject, why some skip, each one's share
  of the false-positive budget (the checks only declare; planning decides);
* :mod:`._info`: the record a run starts from (subject, budget, seed, isolation, versions);
* :mod:`._execute`: the :class:`Run` (the plan, the results recorded for it, the result), and how
  one planned check runs on a sampler or a loop;
* :mod:`._migrate`: a result's JSON of an older form, brought to the current one where it is read;
* :mod:`._cost` and :mod:`._rehearsal`: the plan's cost, the checks rehearsed on the exact law;
* :mod:`._placement`: where the workers go (``--workers``, ``--devices``, Ray);
* :mod:`._driver`: the driver over a Run, one for every kind (:func:`specverify._run._driver.check`).

The driver imports this ``__init__``, never the reverse.  Nothing in
:mod:`specverify.checks` or :mod:`specverify._record.result` imports this package.
"""

from __future__ import annotations

from ._execute import COUNTERS, Run, run_check
from ._info import base_info, run_info
from ._migrate import migrate
from ._plan import (
    PlannedCheck,
    battery_for,
    battery_of,
    check_selection,
    left_out_among,
    left_out_of,
    no_match,
    plan,
    plan_checks,
    result_ids,
    selected,
    selects,
    skip_reason,
    subject_kind,
)

__all__ = [
    "COUNTERS",
    "PlannedCheck",
    "Run",
    "base_info",
    "battery_for",
    "battery_of",
    "check_selection",
    "left_out_among",
    "left_out_of",
    "migrate",
    "no_match",
    "plan",
    "plan_checks",
    "result_ids",
    "run_check",
    "run_info",
    "selected",
    "selects",
    "skip_reason",
    "subject_kind",
]
