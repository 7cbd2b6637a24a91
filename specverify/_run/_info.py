"""What a run was, as its record (the JSON's ``run``) starts: the subject, budget, seed, where the
subject runs and the software it runs on.  The :class:`~specverify._run.Run` adds its plan and,
as it goes, what the subject was put through."""

from __future__ import annotations

import dataclasses
import datetime
import platform
from typing import Any

from .._budgets import Budget
from .._record.info import RunInfo, SamplerInfo
from ..checks import BATTERIES
from ._plan import subject_kind

__all__ = ["base_info", "run_info"]


def run_info(subject: Any, budget: Budget, seed: int, spec: str | None) -> RunInfo:
    """What a run was: the subject, budget, seed, where the subject ran and the software it ran on
    (what its kind records of it: :meth:`specverify._kinds.Kind.describe`, with what its battery
    covers where the battery says so itself)."""
    kind = subject_kind(subject)
    record = base_info(kind.sampler_info(subject), budget, seed, spec)
    record.reach = BATTERIES[kind.battery].reach()
    kind.describe(record, subject)
    return record


def base_info(sampler: SamplerInfo, budget: Budget, seed: int, spec: str | None) -> RunInfo:
    """The record every run starts from, whatever its subject (a sampler that could not load included)."""
    import hypothesis
    import numpy
    import scipy
    import torch

    from .._version import __version__

    versions = {
        "specverify": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "hypothesis": hypothesis.__version__,
    }
    return RunInfo(
        sampler=sampler,
        spec=spec,
        seed=seed,
        budget=dataclasses.asdict(budget),
        family_wise_alpha=budget.alpha,
        power=budget.power,
        tv=budget.tv,
        platform=platform.platform(),
        versions=versions,
        started=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    )
