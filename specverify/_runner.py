"""Run the battery on a sampler: plan, budget, progress, incremental JSON.

The CLI and the pytest plugin are two faces of this module: both plan the same checks with
:func:`plan` (so a check's share of the false-positive budget does not depend on which face, or
which xdist worker, runs it) and run each one with :func:`run_check`.
"""

from __future__ import annotations

import dataclasses
import datetime
import fnmatch
import json
import os
import platform
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ._budgets import Budget, get_budget
from ._calling import SamplerFault, SamplerUnderTest
from ._contract import describe
from ._errors import UsageError
from ._result import CheckResult, RunResult
from .checks import Check, Context, battery
from .checks._base import fault_result

__all__ = ["PlannedCheck", "check", "check_selection", "plan", "result_ids", "run_check", "run_info", "selects", "write_json"]


@dataclasses.dataclass(frozen=True)
class PlannedCheck:
    """A check, whether it runs on this sampler, and its share of the false-positive budget."""

    check: Check
    skip_reason: str | None
    alpha: float

    @property
    def id(self) -> str:
        return self.check.id


def plan(sut: SamplerUnderTest, budget: Budget, select: Iterable[str] | None = None) -> list[PlannedCheck]:
    """The checks to run, each with its Bonferroni share of ``budget.alpha``.

    ``select`` holds glob patterns on check ids or family names (``fit.*``, ``contract``).
    """
    patterns = list(select or [])
    checks = [c for c in battery() if not patterns or any(selects(p, c) for p in patterns)]
    if patterns and not checks:
        raise UsageError(f"no check matches {patterns}; ids look like 'contract.output' or 'fit.conditional[random]'")
    reasons = {c.id: _skip_reason(c, sut) for c in checks}
    decisions = sum(c.decisions for c in checks if c.statistical and reasons[c.id] is None)
    share = budget.alpha / max(1, decisions)
    return [PlannedCheck(c, reasons[c.id], share if c.statistical else 0.0) for c in checks]


def _skip_reason(check: Check, sut: SamplerUnderTest) -> str | None:
    if getattr(check, "proves", None) == "non-canonical" and not sut.capabilities.canonical:
        return "the sampler declares canonical=False: its law given the drafts is not the canonical one by design"
    return check.skip_reason(sut)


def check_selection(select: Iterable[str] | None) -> str | None:
    """Why a selection of checks is unusable (it matches none), or ``None``."""
    if not select:
        return None
    checks = battery()
    missing = [p for p in select if not any(selects(p, c) for c in checks)]
    return f"--only {missing[0]!r} matches no check (ids look like 'contract.output', 'fit.conditional[random]')" if missing else None


def result_ids(check: Check) -> list[str]:
    """The ids of the results a check reports (one per decision)."""
    return [d.id for d in check.decision_list()] if hasattr(check, "decision_list") else [check.id]


def selects(pattern: str, check: Check) -> bool:
    """A family name, or a glob on the check's ids; ``[`` and ``]`` may be taken literally (ids
    contain them: ``fit.conditional[*]`` matches every conditional check) or as glob classes
    (``fit.conditional[[]random]``, as :func:`glob.escape` writes it)."""
    literal = pattern.replace("[", "\x00").replace("]", "[]]").replace("\x00", "[[]")
    ids = [check.id, *result_ids(check)]
    return pattern == check.family or any(fnmatch.fnmatchcase(i, p) for i in ids for p in (pattern, literal))


def run_check(
    planned: PlannedCheck,
    sut: SamplerUnderTest,
    budget: Budget,
    seed: int,
    *,
    spec: str | None = None,
    advance: Callable[[int], None] = lambda rows: None,
) -> list[CheckResult]:
    """Run one planned check; whatever happens, return results (never raise, but for Ctrl-C)."""
    check = planned.check
    if planned.skip_reason is not None:
        return _skips(check, planned.skip_reason)
    ctx = Context(sut=sut, budget=budget, seed=seed, alpha=planned.alpha, spec=spec, advance=advance)
    sut.reach.reset()
    start = time.perf_counter()
    try:
        outcome = check.run(ctx)
        results = outcome if isinstance(outcome, list) else [outcome]
    except SamplerFault as fault:
        results = [fault_result(check, fault)]
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # a harness bug: reported as an error, never hidden, run goes on
        results = [
            CheckResult(
                id=check.id,
                family=check.family,
                case=check.case,
                status="error",
                message=f"the harness failed: {type(exc).__name__}: {exc}",
                evidence={"traceback": traceback.format_exc(limit=8)},
            )
        ]
    elapsed = time.perf_counter() - start
    reach = sut.reach.snapshot(kinds=[check.case] if check.case else [])
    for result in results:
        result.duration_s = elapsed / len(results)
        if result.reach is None:
            result.reach = reach
        if result.proves is None and result.status != "error":
            result.proves = getattr(check, "proves", None)
    return results


def _skips(check: Check, reason: str) -> list[CheckResult]:
    """One skip per result the check would have reported, counted apart from passes."""
    return [CheckResult(id=i, family=check.family, case=check.case, status="skip", message=reason) for i in result_ids(check)]


def run_info(sut: SamplerUnderTest, budget: Budget, seed: int, spec: str | None) -> dict[str, Any]:
    """What a run was: sampler, budget, seed and the software it ran on."""
    import hypothesis
    import numpy
    import scipy
    import torch

    from ._version import __version__

    versions = {
        "specverify": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "hypothesis": hypothesis.__version__,
    }
    return {
        "sampler": describe(sut.sampler),
        "spec": spec,
        "seed": seed,
        "budget": dataclasses.asdict(budget),
        "family_wise_alpha": budget.alpha,
        "power": budget.power,
        "tv": budget.tv,
        "device": str(sut.device),
        "dtype": str(sut.dtype).removeprefix("torch."),
        "platform": platform.platform(),
        "versions": versions,
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def write_json(result: RunResult, path: str | os.PathLike[str]) -> None:
    """Write atomically: a crash mid-write never leaves a truncated file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as handle:
        json.dump(result.to_json(), handle, indent=2)
    os.chmod(tmp, 0o644)  # mkstemp makes it private; a result is for reading
    os.replace(tmp, path)


def check(
    sampler: Callable[..., Any],
    *,
    budget: str | Budget = "standard",
    seed: int = 0,
    alpha: float | None = None,
    device: str | None = None,
    select: Iterable[str] | None = None,
    spec: str | None = None,
    json_path: str | os.PathLike[str] | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
    progress: Callable[[PlannedCheck, int], None] | None = None,
) -> RunResult:
    """Put a sampler through the battery and return the :class:`~specverify.RunResult`.

    Args:
        sampler: the sampler (see :class:`~specverify.Sampler`).
        budget: ``"quick"``, ``"standard"``, ``"thorough"`` or a :class:`~specverify.Budget`.
        seed: the run seed; every random draw derives from it.
        alpha: family-wise false-positive probability (default: the budget's, 1e-4).
        device: where to run a sampler that declares no device.
        select: glob patterns of check ids or family names to run (default: all).
        spec: the sampler's spec, used in repro snippets.
        json_path: written after every check, so a crash or Ctrl-C keeps what finished.
        on_result: called with each result as it finishes.
        progress: called with ``(check, rows)`` as the sampler is run.
    """
    budget = get_budget(budget) if isinstance(budget, str) else budget
    if alpha is not None:
        budget = budget.with_(alpha=alpha)
    sut = SamplerUnderTest(sampler, device=device, timeout=budget.timeout)
    planned = plan(sut, budget, select)
    result = RunResult(run=run_info(sut, budget, seed, spec), checks=[], finished=False)
    result.run["planned_checks"] = len(planned)
    result.run["select"] = list(select) if select else None
    result.run["alpha_per_decision"] = max((p.alpha for p in planned), default=0.0)
    try:
        for item in planned:
            advance = (lambda rows, item=item: progress(item, rows)) if progress else (lambda rows: None)
            for check_result in run_check(item, sut, budget, seed, spec=spec, advance=advance):
                result.checks.append(check_result)
                if on_result:
                    on_result(check_result)
            if json_path is not None:
                write_json(result, json_path)
        result.finished = True
    finally:
        result.run["sampler_calls"] = sut.calls
        result.run["sampler_rows"] = sut.rows
        result.run["sampler_seconds"] = round(sut.seconds, 3)
        if json_path is not None:
            write_json(result, json_path)
    return result
