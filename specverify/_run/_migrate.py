"""A result's JSON of an older form, brought to the current form where it is read.

The record (:mod:`specverify._record.result`) reads only what a run wrote; what older runs did not write
is worked out here, above the checks, so the record never imports the battery:

* ``run["left_out"]`` (the battery's results a ``select`` left out) is recorded since the run
  layer plans once; an older run with a selection has it planned again from the chain battery
  (the only battery a selection could run then).
"""

from __future__ import annotations

import copy
from typing import Any

from ..checks import battery
from ._plan import left_out_among

__all__ = ["migrate"]


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (a run result's JSON) in the current form; a current one is returned as it is."""
    run = data.get("run")
    if not isinstance(run, dict) or run.get("left_out") is not None or not run.get("select"):
        return data
    data = copy.copy(data)
    data["run"] = {**run, "left_out": left_out_among(battery(), run["select"])}
    return data
