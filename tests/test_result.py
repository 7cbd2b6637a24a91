"""The verdict: what each finding proves, and what a lossless verdict needs."""

from __future__ import annotations

import json
import math

import pytest

from specverify import CheckResult, RunResult
from specverify._record.result import verdict


def result(status, finding=None, proves=None, **fields):
    return CheckResult(
        id=f"x.{status}.{finding}.{proves}", family="x", status=status, finding=finding, proves=proves, **fields
    )


LAW = result("pass", proves="loss")  # a test of the target's law that passed


@pytest.mark.parametrize(
    ("checks", "expected"),
    [
        ([LAW], "conformant"),
        ([LAW, result("fail", "contract")], "non-conformant"),
        ([LAW, result("fail", "support"), result("fail", "loss")], "non-conformant"),
        ([result("fail", "loss")], "lossy"),
        ([LAW, result("fail", "non-canonical")], "lossy"),
        ([LAW, result("fail", "non-canonical"), result("fail", "suboptimal")], "lossless-suboptimal"),
        ([LAW, result("fail", "suboptimal")], "lossless-suboptimal"),
        ([LAW, result("fail", "non-canonical"), result("fail", "suboptimal"), result("fail", "loss")], "lossy"),
        ([LAW, result("error")], "error"),
        ([LAW, result("inconclusive", proves="loss")], "inconclusive"),
        ([result("pass", proves="contract")], "inconclusive"),  # nothing tested the target's law
        ([result("pass", proves="contract"), result("fail", "suboptimal")], "inconclusive"),
        ([result("skip")], "inconclusive"),
    ],
)
def test_verdict(checks, expected):
    assert verdict(checks) == expected


def test_an_interrupted_run_is_inconclusive():
    assert verdict([LAW], finished=False) == "inconclusive"


def test_a_failure_must_say_what_it_proves():
    with pytest.raises(ValueError, match="must say what its failure proves"):
        result("fail")
    assert result("fail", "loss").proves == "loss"


def test_json_has_no_nan_or_infinity():
    run = RunResult(
        run={"x": math.nan}, checks=[result("fail", "support", p_value=0.0, evidence={"statistic": math.inf})]
    )
    text = json.dumps(run.to_json(), allow_nan=False)
    assert '"statistic": null' in text and '"x": null' in text
    assert RunResult.from_json(json.loads(text)).verdict == "non-conformant"


def test_reach_records_what_the_sampler_was_given_and_survives_json():
    from specverify._record.reach import ReachRecorder, guarantee, merge

    recorder = ReachRecorder()
    assert recorder.snapshot() is None  # no call, no reach
    recorder.record(batch=16, k=2, vocab=4096, dtype="float64")
    recorder.record(batch=1, rows=300, k=4, vocab=8, dtype="bfloat16")
    reach = recorder.snapshot(kinds=["random"])
    assert reach.vocab == (8, 4096) and reach.k == (2, 4) and reach.batch == (1, 16) and reach.rows == 316
    assert reach.covers(4, 8) and reach.covers(2, 4096, "random")
    assert not reach.covers(3, 8) and not reach.covers(2, 4096, "zero-residual")
    result = CheckResult(id="fit.x", family="fit", status="pass", min_detectable_tv=0.02, reach=reach)
    assert CheckResult.from_json(result.to_json()).reach == reach
    other = CheckResult(id="fit.y", family="fit", status="pass", min_detectable_tv=0.01, reach=merge([reach]))
    line = guarantee([result, other], power=0.99, alpha=1e-4)
    assert "TV >= 0.02" in line and "V in 8..4096, K in 2..4" in line


def test_verdicts_rank_for_false_alarms_and_misses():
    from specverify._record.vocabulary import Verdict

    assert [v for v in Verdict if v.lossless] == [Verdict.CONFORMANT, Verdict.LOSSLESS_SUBOPTIMAL]
    assert (
        Verdict.CONFORMANT.severity
        < Verdict.LOSSLESS_SUBOPTIMAL.severity
        < Verdict.LOSSY.severity
        < Verdict.NON_CONFORMANT.severity
    )
    assert (
        Verdict.ERROR.severity == Verdict.NON_CONFORMANT.severity
        and Verdict.INCONCLUSIVE.severity == Verdict.LOSSLESS_SUBOPTIMAL.severity
    )


@pytest.mark.parametrize("field", ["verdict", "budget", "caught_by"])
def test_a_misspelt_zoo_declaration_fails_at_once(field):
    from specverify.zoo import ZooSampler

    declared = {"verdict": "lossy", "budget": "quick", "caught_by": ("fit",)} | {
        field: {"verdict": "lossey", "budget": "quik", "caught_by": ("fitt",)}[field]
    }
    with pytest.raises(ValueError):
        ZooSampler(
            "misspelt", lambda *a: None, declared["verdict"], declared["caught_by"], declared["budget"], "a story"
        )


def test_a_law_difference_with_no_acceptance_deficit_says_what_the_acceptance_checks_found():
    from specverify._record.result import judge

    def check(id, status, finding=None, proves=None):
        return CheckResult(id=id, family=id.split(".")[0], status=status, finding=finding, proves=proves)

    differs = [
        check("fit.conditional[zeros]", "fail", "non-canonical", "non-canonical"),
        check("exact.emitted[random]", "fail", "non-canonical", "non-canonical"),
    ]
    measured = judge([*differs, check("efficiency.acceptance[random]", "pass", proves="suboptimal")])
    assert measured.verdict == "lossy"
    assert "fit.conditional[zeros] and 1 more" in measured.reason and "(1 of 1 passed)" in measured.reason
    assert "no fewer" not in measured.reason  # the failing case itself may accept 0 of 1,024 drafts
    unmeasured = judge(differs)
    assert unmeasured.verdict == "lossy" and "no acceptance check ran" in unmeasured.reason
