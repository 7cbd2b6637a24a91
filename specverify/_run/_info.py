"""What a run was, as its record (the JSON's ``run``) starts: the subject, budget, seed, where the
subject runs and the software it runs on.  The :class:`~specverify._run.Run` adds its plan and,
as it goes, what the subject was put through."""

from __future__ import annotations

import dataclasses
import datetime
import platform
from typing import Any

from .._budgets import Budget
from .._record import Isolation, RunInfo, SamplerInfo
from .._warps.separating import warp_record
from ..checks._loop import REACH as LOOP_REACH
from ._plan import subject_kind

__all__ = ["base_info", "run_info"]


def run_info(subject: Any, budget: Budget, seed: int, spec: str | None) -> RunInfo:
    """What a run was: the subject, budget, seed, where the subject ran and the software it ran on."""
    kind = subject_kind(subject)
    if kind.generation:
        record = base_info(SamplerInfo(name=subject.name, parameters=list(subject.parameters)), budget, seed, spec)
        record.contract, record.reach = kind.contract, f"{LOOP_REACH}; {subject.warp.statement}"
        record.extra["warp"] = warp_record(subject.warp)  # the warp it was judged by (specverify._warps.declared)
        record.isolation = Isolation.from_json(subject.info())
        return record
    sampler = SamplerInfo(name=subject.name, capabilities=subject.capabilities.to_json())
    record = base_info(sampler, budget, seed, spec)
    record.device, record.dtype = str(subject.device), str(subject.dtype).removeprefix("torch.")
    record.isolation = Isolation(
        mode=subject.isolation, reason=None, timeout=subject.timeout, first_timeout=subject.limit.first
    )
    record.contract = kind.contract
    if kind.name == "logits" and getattr(subject, "warp", None) is not None:
        # the warp its cases were posed by, and how it differs from each other preset (informative)
        record.extra["warp"] = warp_record(subject.warp)
    described: dict[str, Any] = {}
    kind.describe(described)
    for field, value in described.items():  # the tree's algorithm
        setattr(sampler, field, value)
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
