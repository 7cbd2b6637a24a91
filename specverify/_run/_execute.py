"""One run of a battery on one subject: its plan, what it recorded, and its result.

Every face of the harness drives a :class:`Run`: :func:`specverify.check` and the CLI's ``check``
and ``loop`` (:mod:`specverify._run._driver`, one driver for every kind), the pytest plugin and
:func:`specverify.pytest_battery` (:mod:`specverify._pytest`).
So the plan (each check's share of the false-positive budget), the run's record (the JSON's
``run``) and the verdict are the same whichever face ran it, and a run that did not get results
from every planned check is never finished, so never a pass.
"""

from __future__ import annotations

import copy
import dataclasses
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._budgets import Budget, budget_for_calls
from .._calling.pool import COUNTERS as POOL_COUNTERS
from .._calling.pool import Pool, SerialPool
from .._calling.sut import SamplerUnderTest
from .._record.info import RunInfo, Timing
from .._record.reach import Reach, merge
from .._record.result import CheckResult, RunResult
from ..checks import Check, Context
from ..checks._base import fault_result
from ..errors import SamplerFault
from ._cost import NOT_CALIBRATED, plan_cost
from ._info import run_info
from ._plan import PlannedCheck, left_out_of, plan, subject_kind

__all__ = ["COUNTERS", "Run", "run_check"]

#: What a sampler under test counts as it is called; a run sums them over the processes that ran its checks.
COUNTERS = POOL_COUNTERS


class Run:
    """A battery planned on a subject, and the results recorded for it, in plan order.

    Args:
        subject: the sampler under test, of any kind (:func:`specverify._run._driver.load_sut`).
        budget: how much evidence to gather, with the run's family-wise alpha.
        seed: the run seed every random draw derives from.
        select: glob patterns of check ids or family names (default: the whole battery).
        spec: the subject's ``module:attribute`` spec, for repro snippets and the record.
        isolation_reason: why the subject runs in this process, where it does.
        since: ``time.perf_counter()`` when the run began (default: now), so its timing counts
            loading the subject.
        pool: the workers that run the experiments' units (:mod:`specverify._calling.pool`;
            default: the subject alone); ``pool.primary`` must be ``subject``.

    Raises:
        UsageError: ``select`` matches no check of the subject's battery.
    """

    def __init__(
        self,
        subject: Any,
        budget: Budget,
        seed: int = 0,
        *,
        select: Iterable[str] | None = None,
        spec: str | None = None,
        isolation_reason: str | None = None,
        since: float | None = None,
        pool: Pool | None = None,
    ) -> None:
        self.subject = subject
        self.pool: Pool = pool if pool is not None else SerialPool(subject)
        # quick on a one-row-at-a-time sampler is sized for a larger TV, and says so (docs/statistics.md)
        budget = budget_for_calls(budget, getattr(getattr(subject, "capabilities", None), "batched", True))
        self.budget = budget
        self.seed = seed
        self.spec = spec
        self.select = list(select) if select else None
        self.planned = plan(subject, budget, self.select)
        self.info = run_info(subject, budget, seed, spec)
        if isolation_reason is not None and self.info.isolation is not None:
            self.info.isolation.reason = isolation_reason
        self.info.planned_checks = len(self.planned)
        self.info.select = self.select
        self.info.left_out = left_out_of(subject, self.select)
        # what the subject's declared limits keep from being posed, said once for the run
        self.info.not_posed = [f"{p.id}: {why}" for p in self.planned for why in p.check.not_posed(subject)] or None
        self.info.alpha_per_decision = max((p.alpha for p in self.planned), default=0.0)
        self.info.extra["plan"] = plan_cost(
            self.planned, budget, NOT_CALIBRATED
        ).to_json()  # the samples; timed by --plan
        self.interrupted = False
        self._since = time.perf_counter() if since is None else since
        self._results: dict[str, list[CheckResult]] = {}
        self._elsewhere = dict.fromkeys(COUNTERS, 0.0)  # counted by other processes (xdist workers)
        self._order = {p.id: i for i, p in enumerate(self.planned)}

    def execute(
        self, planned: PlannedCheck, *, advance: Callable[[int], None] = lambda rows: None
    ) -> list[CheckResult]:
        """Run one planned check on the subject, here, and record its results (never raises, but for Ctrl-C)."""
        results = run_check(
            planned, self.subject, self.budget, self.seed, spec=self.spec, advance=advance, pool=self.pool
        )
        self._results[planned.id] = results
        return results

    def usage(self) -> dict[str, float]:
        """The subject's counters in this process (``COUNTERS``, over its workers), to ship with results run here."""
        return self.pool.usage()

    def record(self, check_id: str, results: list[CheckResult], usage: Mapping[str, float] | None = None) -> None:
        """Record results of the planned check ``check_id`` that ran elsewhere (an xdist worker),
        with what the subject's counters there grew by while it ran (``usage``)."""
        if check_id not in self._order:
            raise KeyError(f"{check_id!r} is not a planned check of this run")
        self._results[check_id] = list(results)
        for name, value in (usage or {}).items():
            if name in self._elsewhere:
                self._elsewhere[name] += value

    def recorded(self, check_id: str) -> bool:
        """Whether the planned check ``check_id`` has results, here or recorded from elsewhere."""
        return check_id in self._results

    @property
    def ran(self) -> int:
        """How many planned checks have results."""
        return len(self._results)

    @property
    def missing(self) -> list[str]:
        """The planned checks with no results yet, in plan order."""
        return [p.id for p in self.planned if p.id not in self._results]

    @property
    def finished(self) -> bool:
        """Whether every planned check has results."""
        return not self.missing

    def result(self) -> RunResult:
        """The run so far: its record, every result in plan order, and whether it finished."""
        checks = [r for p in self.planned for r in self._results.get(p.id, [])]
        record = copy.deepcopy(self.info)
        if self.interrupted:
            record.interrupted = True
        self._tally(record)
        return RunResult(run=record, checks=checks, finished=self.finished)

    def _tally(self, record: RunInfo) -> None:
        """What the subject was put through: its calls, and where the run's time went."""
        total = time.perf_counter() - self._since
        usage = self.pool.usage()
        count = {name: usage[name] + self._elsewhere[name] for name in COUNTERS}
        seconds = count["seconds"]
        here = (
            not any(self._elsewhere.values()) and self.pool.size == 1
        )  # else the sampler's time was spent in parallel
        timing = Timing(
            total_seconds=round(total, 3),
            sampler_seconds=round(seconds, 3),
            harness_seconds=round(total - seconds, 3) if here else None,
            harness_share=round((total - seconds) / total, 4) if here and total > 0 else None,
        )
        subject_kind(self.subject).tally(record, self.subject, count)  # what its kind counts of its calls
        record.timing = timing


def run_check(
    planned: PlannedCheck,
    sut: SamplerUnderTest,
    budget: Budget,
    seed: int,
    *,
    spec: str | None = None,
    advance: Callable[[int], None] = lambda rows: None,
    pool: Pool | None = None,
) -> list[CheckResult]:
    """Run one planned check; whatever happens, return results (never raise, but for Ctrl-C).
    ``pool``: where its experiments' units run (default: on ``sut``, one after another)."""
    check = planned.check
    if planned.skip_reason is not None:
        return check.skipped(planned.skip_reason)
    ctx = Context(sut=sut, budget=budget, seed=seed, alpha=planned.alpha, spec=spec, advance=advance, pool=pool)
    sut.reach.reset()
    sut.last_fault = None
    start = time.perf_counter()
    try:
        outcome = check.run(ctx)
        results = outcome if isinstance(outcome, list) else [outcome]
    except SamplerFault as raised:
        results = [fault_result(check, raised)]
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
    reach = _reach_of(sut, ctx, check)
    fault, sut.last_fault = sut.last_fault, None
    for result in results:
        if (
            fault is not None
            and fault.details
            and result.status == "fail"
            and result.evidence.get("violation") == fault.violation.rule
        ):
            result.evidence.update(fault.details)  # the sampler's traceback and last output
        result.duration_s = elapsed / len(results)
        if result.reach is None:
            result.reach = reach
        if result.proves is None and result.status != "error":
            result.proves = check.proves
        if result.status == "fail" and "minimal_example" in result.evidence:
            _add_warps(result, sut, fault)
    return results


def _reach_of(sut: SamplerUnderTest, ctx: Context, check: Check) -> Reach | None:
    """What the check gave the sampler: its own calls and its units', wherever they ran."""
    kinds = [check.case] if check.case else []
    reach = merge([sut.reach.snapshot(kinds=kinds), *ctx.reached])
    return dataclasses.replace(reach, kinds=tuple(sorted(set(kinds)))) if reach is not None else None


def _add_warps(result: CheckResult, sut: SamplerUnderTest, fault: SamplerFault | None) -> None:
    """A logits sampler's failure shows the warped and the raw laws of its failing case side by side
    (:meth:`~specverify._kinds.Kind.warps`: none for a kind given its cases as they are)."""
    row = fault.violation.row if fault is not None else None
    message = fault.violation.message if fault is not None else result.message or ""
    warps = subject_kind(sut).warps(result.evidence["minimal_example"], row, message, getattr(sut, "warp", None))
    if warps is not None:
        result.evidence["warps"] = warps
