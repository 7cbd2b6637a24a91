"""The Run every face drives (``specverify._run``): plan order, finished only when every planned
check has results, never a pass before that, and results recorded from elsewhere.

No sampler runs here but where a test says so: results are recorded as an xdist worker ships them.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import specverify
from specverify._budgets import get_budget
from specverify._calling.sut import SamplerUnderTest
from specverify._pytest import verdict_failure
from specverify._record.result import CheckResult
from specverify._run import PlannedCheck, Run, result_ids

BUDGET = get_budget("quick")


def outcome(planned: PlannedCheck, status: str = "pass") -> list[CheckResult]:
    """The results a planned check reports, all with ``status`` (a skip where the plan skips it)."""
    check = planned.check
    if planned.skip_reason is not None:
        status = "skip"
    finding = check.proves if status == "fail" else None
    return [
        CheckResult(id=i, family=check.family, case=check.case, status=status, finding=finding, proves=check.proves)
        for i in result_ids(check)
    ]


@pytest.fixture(scope="module")
def sut():
    return SamplerUnderTest(specverify.reference)  # in this process; planning calls no sampler


def test_a_run_is_finished_only_when_every_planned_check_has_results_and_never_passes_before(sut):
    run = Run(sut, BUDGET, seed=0)
    assert run.info.planned_checks == len(run.planned) > 10 and run.info.left_out == [] and not run.finished
    assert run.result().verdict == "inconclusive" and run.result().checks == []
    for planned in reversed(run.planned[1:]):  # recorded out of order, the first check missing
        run.record(planned.id, outcome(planned))
    partial = run.result()
    assert not partial.finished and run.missing == [run.planned[0].id]
    assert partial.verdict == "inconclusive" and "not every planned check ran" in (partial.verdict_reason or "")
    assert [c.id for c in partial.checks] == [i for p in run.planned[1:] for i in result_ids(p.check)]  # plan order
    problem = verdict_failure(run)
    assert (
        problem is not None
        and f"1 of {len(run.planned)} planned checks have no result in this process ({run.planned[0].id})" in problem
    )
    run.record(run.planned[0].id, outcome(run.planned[0]))
    whole = run.result()
    assert whole.finished and whole.verdict == "conformant" and verdict_failure(run) is None
    assert [c.id for c in whole.checks] == [i for p in run.planned for i in result_ids(p.check)]
    with pytest.raises(KeyError, match="not a planned check"):
        run.record("fit.nothing", [])


def test_one_failing_check_of_a_whole_run_fails_its_verdict(sut):
    run = Run(sut, BUDGET, seed=0)
    failing = next(p for p in run.planned if p.skip_reason is None and p.check.proves == "contract")
    for planned in run.planned:
        run.record(planned.id, outcome(planned, "fail" if planned is failing else "pass"))
    assert run.finished and run.result().verdict == "non-conformant"
    problem = verdict_failure(run)
    assert (
        problem is not None
        and problem.startswith("verdict: non-conformant for specverify.reference")
        and "1 fail" in problem
    )
    assert "no result in this process" not in problem


def test_counters_shipped_from_other_processes_are_summed_and_their_time_not_called_the_harness(sut):
    run = Run(sut, BUDGET, seed=0, select=["contract.one-hot"])
    (planned,) = run.planned
    assert run.info.select == ["contract.one-hot"] and run.info.alpha_per_decision == 0.0
    here = run.result().run
    assert here["sampler_calls"] == 0 and here["timing"]["harness_seconds"] is not None
    run.record(
        planned.id,
        outcome(planned),
        {"calls": 3, "rows": 12, "seconds": 0.5, "crashes": 1, "hangs": 0, "worker_starts": 1},
    )
    info = run.result().run
    assert (info["sampler_calls"], info["sampler_rows"], info["sampler_seconds"]) == (3, 12, 0.5)
    assert info["isolation"]["crashes"] == 1 and info["isolation"]["worker_starts"] == 1
    assert info["timing"]["harness_seconds"] is None and info["timing"]["harness_share"] is None
    assert run.result().verdict == "inconclusive"  # a subset, whatever it found


def test_a_run_executes_a_planned_check_here_and_records_it(sut):
    run = Run(sut, BUDGET, seed=0, select=["contract.output"])
    (planned,) = run.planned
    results = run.execute(planned)
    assert run.recorded(planned.id) and run.finished and run.result().checks == results
    assert (
        results[0].status == "pass"
        and results[0].reach is not None
        and run.result().run["sampler_calls"] == sut.calls > 0
    )


def test_the_loop_runner_records_every_runs_fields():
    from specverify.samplers._loop_reference import LoopReference

    loop = SamplerUnderTest(LoopReference(), isolation="in-process", kind="loop")
    run = Run(loop, BUDGET, seed=0, select=["loop.output"])
    chain = Run(SamplerUnderTest(specverify.reference), BUDGET, seed=0, select=["contract.output"])
    common = set(chain.result().run) - {
        "sampler_calls",
        "sampler_rows",
        "sampler_seconds",
    }  # a loop's calls are not counted
    assert (
        common <= set(run.result().run)
        and run.info.contract == "loop"
        and run.info.budget is not None
        and run.info.budget["name"] == "quick"
    )
    assert run.info.left_out and run.result().verdict == "inconclusive"
    with pytest.raises(specverify.UsageError, match="no loop check"):
        Run(SimpleNamespace(contract="loop", parameters=()), BUDGET, select=["contract"])


def test_one_driver_runs_every_kind_the_loop_included():
    from specverify._run._driver import check, check_loop
    from specverify.samplers._loop_reference import LoopReference

    # a loop object declares its kind: specverify.check puts it through the loop family
    by_object = check(LoopReference(), budget=BUDGET, seed=0, select=["loop.output"], isolation="in-process")
    by_alias = check_loop(LoopReference(), budget=BUDGET, seed=0, select=["loop.output"], isolation="in-process")
    assert [c.id for c in by_object.checks] == [c.id for c in by_alias.checks] == ["loop.output"]
    assert by_object.run.contract == by_alias.run.contract == "loop" and by_object.checks[0].status == "pass"
    chain = check(specverify.reference, budget=BUDGET, seed=0, select=["contract.output"], isolation="in-process")
    assert chain.run.contract is None and [c.id for c in chain.checks] == ["contract.output"]
    with pytest.raises(ValueError, match="kind must be one of .*'loop'.* or None"):
        check(specverify.reference, budget=BUDGET, kind="chainsaw")
