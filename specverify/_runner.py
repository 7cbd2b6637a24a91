"""Run the battery on a sampler: progress, incremental JSON, the run's record.

The CLI and the pytest plugin are two faces of this module: both plan the same checks with
:func:`specverify.checks._plan.plan` (so a check's share of the false-positive budget does not
depend on which face, or which xdist worker, runs it) and run each one with :func:`run_check`.
"""

from __future__ import annotations

import dataclasses
import datetime
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
from ._calling import SamplerFault, SamplerUnderTest, importable_source
from ._result import CheckResult, RunResult
from ._tree_calling import TreeSamplerUnderTest
from .checks import Check, Context
from .checks._base import fault_result
from .checks._plan import PlannedCheck, left_out_of, plan, result_ids

__all__ = ["Interrupted", "check", "load_failure", "load_sut", "run_check", "run_info", "write_json"]


def load_sut(sampler: Any, **options: Any) -> SamplerUnderTest | TreeSamplerUnderTest:
    """The sampler, loaded and called safely (``options``: :class:`SamplerUnderTest`'s): a tree
    sampler (``contract = "tree"``) as a :class:`TreeSamplerUnderTest`, in the same mode."""
    sut = SamplerUnderTest(sampler, **options)
    if sut.contract != "tree":
        return sut
    # loaded once: the tree sampler under test takes over the process (or the object) that loaded it
    return TreeSamplerUnderTest(sut.sampler or sampler, process=sut.hand_over(), **options)


def run_check(
    planned: PlannedCheck,
    sut: SamplerUnderTest | TreeSamplerUnderTest,
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
    sut.last_fault = None
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
    fault, sut.last_fault = sut.last_fault, None
    for result in results:
        if fault is not None and fault.details and result.status == "fail" and result.evidence.get("violation") == fault.violation.rule:
            result.evidence.update(fault.details)  # the sampler's traceback and last output
        result.duration_s = elapsed / len(results)
        if result.reach is None:
            result.reach = reach
        if result.proves is None and result.status != "error":
            result.proves = check.proves
        if result.status == "fail" and sut.capabilities.inputs == "logits" and "minimal_example" in result.evidence:
            _add_warps(result, sut, fault)
    return results


def _add_warps(result: CheckResult, sut: SamplerUnderTest, fault: SamplerFault | None) -> None:
    """A logits sampler's failure shows the warped and the raw laws of its failing case side by side."""
    from ._logits_layout import warps_evidence

    row = fault.violation.row if fault is not None else None
    warps = warps_evidence(result.evidence["minimal_example"], sut.capabilities.params, row, fault.violation.message if fault else result.message)
    if warps is not None:
        result.evidence["warps"] = warps


def _skips(check: Check, reason: str) -> list[CheckResult]:
    """One skip per result the check would have reported, counted apart from passes."""
    return [CheckResult(id=i, family=check.family, case=check.case, status="skip", message=reason) for i in result_ids(check)]


def run_info(sut: SamplerUnderTest | TreeSamplerUnderTest, budget: Budget, seed: int, spec: str | None) -> dict[str, Any]:
    """What a run was: sampler, budget, seed, where the sampler ran and the software it ran on."""
    info = _run_info({"name": sut.name, "capabilities": sut.capabilities.to_json()}, budget, seed, spec)
    info.update(device=str(sut.device), dtype=str(sut.dtype).removeprefix("torch."))
    info["isolation"] = {"mode": sut.isolation, "reason": None, "timeout": sut.timeout, "first_timeout": sut.limit.first}
    if isinstance(sut, TreeSamplerUnderTest):
        info["contract"] = "tree"
        info["sampler"]["algorithm"] = sut.algorithm
    return info


def _run_info(sampler: dict[str, Any], budget: Budget, seed: int, spec: str | None) -> dict[str, Any]:
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
        "sampler": sampler,
        "spec": spec,
        "seed": seed,
        "budget": dataclasses.asdict(budget),
        "family_wise_alpha": budget.alpha,
        "power": budget.power,
        "tv": budget.tv,
        "device": None,
        "dtype": None,
        "platform": platform.platform(),
        "versions": versions,
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def load_failure(spec: str, message: str, budget: str | Budget = "standard", seed: int = 0) -> RunResult:
    """The result of a run whose sampler could not be imported or built: verdict ``error``."""
    budget = get_budget(budget) if isinstance(budget, str) else budget
    failure = CheckResult(id="harness.load", family="harness", status="error", message=f"the sampler could not be loaded: {message}")
    return RunResult(run=_run_info({"name": spec, "capabilities": None}, budget, seed, spec), checks=[failure], finished=False)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`check`: the sampler's process is ended; ``result`` holds what finished."""

    def __init__(self, result: RunResult) -> None:
        super().__init__()
        self.result = result


def write_json(result: RunResult, path: str | os.PathLike[str]) -> None:
    """Write atomically: a crash mid-write never leaves a truncated file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(result.to_json(), handle, indent=2)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a result is for reading
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)  # never a stray temp file beside the target
        raise


def check(
    sampler: Callable[..., Any] | str,
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
    isolation: str = "auto",
    timeout: float | None = None,
    on_plan: Callable[[list[PlannedCheck]], None] | None = None,
    on_wait: Callable[[float, float], None] | None = None,
) -> RunResult:
    """Put a sampler through the battery and return the :class:`~specverify.RunResult`.

    A tree sampler (``contract = "tree"``, ``specverify._tree``) is put through the ``trees`` family
    instead (``specverify.checks._trees``), in this process: ``run["isolation"]`` says why.

    Args:
        sampler: the sampler (see :class:`~specverify.Sampler`), or its ``"module:attribute"`` spec.
        budget: ``"quick"``, ``"standard"``, ``"thorough"`` or a :class:`~specverify.Budget`.
        seed: the run seed; every random draw derives from it.
        alpha: family-wise false-positive probability (default: the budget's, 1e-4).
        device: where to run a sampler that declares none.
        select: glob patterns of check ids or family names to run (default: all).
        spec: the sampler's spec, used in repro snippets (and to load a callable by name).
        json_path: written after every check, so a crash or Ctrl-C keeps what finished.
        on_result: called with each result as it finishes.
        progress: called with ``(check, rows)`` as the sampler is run.
        isolation: ``"process"``: the sampler runs in a supervised process of its own, so a crash,
            a hang or an exit is a finding and not the end of the run; ``"in-process"``: in this
            thread (for pdb; no crash or hang protection); ``"auto"`` (default): a process when the
            sampler is a spec or a callable importable by name, else in-process with its calls in a
            helper thread under the time limit (a hung call is abandoned, not killed), with the
            reason in ``run["isolation"]``.
        timeout: seconds one call may take (default: derived from the budget's ``timeout`` and the
            sampler's measured speed).
        on_plan: called with the planned checks before the first runs.
        on_wait: called with ``(seconds, limit)`` while a call is slow (isolated runs only).

    Raises:
        SamplerSpecError: the sampler could not be imported or built, or the device is absent.
        Interrupted: Ctrl-C; the JSON holds what finished and the sampler's process is ended.
    """
    budget = get_budget(budget) if isinstance(budget, str) else budget
    if alpha is not None:
        budget = budget.with_(alpha=alpha)
    mode, reason = isolation, None
    if isolation == "auto":
        source = importable_source(sampler, spec)
        mode, reason = ("process", None) if isinstance(source, tuple) else ("in-process", source)
    elif isolation == "in-process":
        reason = "asked for (isolation='in-process', the CLI's --in-process)"
    if isinstance(sampler, str) and spec is None:
        spec = sampler
    start = time.perf_counter()
    sut = load_sut(sampler, device=device, timeout=timeout, first_timeout=budget.timeout, isolation=mode, spec=spec, timed=isolation == "auto")
    result = RunResult(run={}, checks=[], finished=False)
    try:
        sut.on_wait = on_wait
        planned = plan(sut, budget, select)
        result.run = run_info(sut, budget, seed, spec)
        result.run["isolation"]["reason"] = reason
        result.run["planned_checks"] = len(planned)
        result.run["select"] = list(select) if select else None
        result.run["left_out"] = left_out_of(sut, select)
        result.run["alpha_per_decision"] = max((p.alpha for p in planned), default=0.0)
        if on_plan:
            on_plan(planned)
        for item in planned:
            advance = (lambda rows, item=item: progress(item, rows)) if progress else (lambda rows: None)
            for check_result in run_check(item, sut, budget, seed, spec=spec, advance=advance):
                result.checks.append(check_result)
                if on_result:
                    on_result(check_result)
            if json_path is not None:
                write_json(result, json_path)
        result.finished = True
    except KeyboardInterrupt:
        sut.kill()
        result.run["interrupted"] = True
        raise Interrupted(result) from None
    finally:
        total = time.perf_counter() - start
        if result.run:
            result.run["sampler_calls"] = sut.calls
            result.run["sampler_rows"] = sut.rows
            result.run["sampler_seconds"] = round(sut.seconds, 3)
            result.run["timing"] = {
                "total_seconds": round(total, 3),
                "sampler_seconds": round(sut.seconds, 3),
                "harness_seconds": round(total - sut.seconds, 3),
                "harness_share": round((total - sut.seconds) / total, 4) if total > 0 else None,
            }
            result.run["isolation"].update(crashes=sut.crashes, hangs=sut.hangs, worker_starts=sut.worker_starts)
        sut.close()
        if json_path is not None and result.run:
            write_json(result, json_path)
    return result
