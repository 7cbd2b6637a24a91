"""The typed run record (``specverify._record.info``) and the words of a check's result: the JSON is the
same object before and after, key for key, for every kind of run."""

from __future__ import annotations

import copy
import json

import pytest

import specverify
from specverify import CheckResult, RunResult
from specverify._record.info import Isolation, RunInfo, SamplerInfo, Timing
from specverify._record.vocabulary import Finding, Status

BASE = {
    "spec": "m:s",
    "seed": 0,
    "budget": {"name": "quick", "alpha": 0.0001},
    "family_wise_alpha": 0.0001,
    "power": 0.99,
    "tv": 0.05,
    "device": None,
    "dtype": None,
    "platform": "Linux",
    "versions": {"specverify": "0"},
    "started": "2026-12-03T06:29:47+00:00",
}
PLAN = {"planned_checks": 41, "select": None, "left_out": [], "alpha_per_decision": 3.3e-06}
CHAIN = {
    **BASE,
    "sampler": {"name": "reference", "capabilities": {"inputs": "probs"}},
    "device": "cpu",
    "dtype": "float64",
    "isolation": {
        "mode": "process",
        "reason": None,
        "timeout": 120.0,
        "first_timeout": 120.0,
        "crashes": 0,
        "hangs": 0,
        "worker_starts": 1,
    },
    **PLAN,
    "sampler_calls": 712,
    "sampler_rows": 1060946,
    "sampler_seconds": 1.643,
    "timing": {"total_seconds": 5.0, "sampler_seconds": 1.643, "harness_seconds": None, "harness_share": None},
}
TREE = {
    **CHAIN,
    "sampler": {"name": "tree", "capabilities": {"inputs": "probs"}, "algorithm": "specinfer"},
    "contract": "tree",
}
LOOP = {
    **BASE,
    "sampler": {"name": "loop", "parameters": ["temperature", "seeds"]},
    "contract": "loop",
    "reach": "Markov chain models",
    "isolation": {"mode": "process", "reason": None, "timeout": 120.0, "crashes": 0, "hangs": 0, "worker_starts": 1},
    **PLAN,
    "interrupted": True,
    "timing": {"total_seconds": 1.566},
}
LOAD_FAILURE = {**BASE, "sampler": {"name": "m:s", "capabilities": None}}


@pytest.mark.parametrize("run", [CHAIN, TREE, LOOP, LOAD_FAILURE], ids=["chain", "tree", "loop", "load-failure"])
def test_every_kind_of_record_reads_and_writes_the_same_json(run):
    record = RunInfo.from_json(copy.deepcopy(run))
    assert record.to_json() == run and dict(record) == run  # the mapping view is the JSON
    again = RunResult.from_json(json.loads(json.dumps(RunResult(run=record, checks=[]).to_json())))
    assert again.run == record


def test_the_record_is_read_by_attribute():
    chain, loop, failure = (RunInfo.from_json(r) for r in (CHAIN, LOOP, LOAD_FAILURE))
    assert isinstance(chain.isolation, Isolation) and chain.isolation.worker_starts == 1
    assert (
        isinstance(chain.timing, Timing)
        and chain.timing.harness_share is None
        and chain.timing.sampler_seconds == 1.643
    )
    assert (
        isinstance(loop.sampler, SamplerInfo) and loop.sampler.is_loop and loop.contract == "loop" and loop.interrupted
    )
    assert chain.planned and not failure.planned and failure.isolation is None and failure.timing is None
    assert RunInfo.from_json(TREE).sampler.algorithm == "specinfer" and chain.left_out == []


def test_keys_it_does_not_know_are_kept():
    run = {
        **CHAIN,
        "future": {"x": 1},
        "isolation": {**CHAIN["isolation"], "gpu": "h200"},
        "sampler": {**CHAIN["sampler"], "note": "n"},
    }
    record = RunInfo.from_json(run)
    assert (
        record.extra == {"future": {"x": 1}}
        and record.isolation is not None
        and record.isolation.extra == {"gpu": "h200"}
    )
    assert record.to_json() == run


def test_a_real_run_holds_a_typed_record():
    result = specverify.check(
        specverify.reference, budget="quick", seed=0, select=["contract.output"], isolation="in-process"
    )
    assert isinstance(result.run, RunInfo) and result.run.select == ["contract.output"] and result.run.left_out
    assert (
        result.run.isolation is not None and result.run.isolation.mode == "in-process" and result.run.isolation.reason
    )
    assert result.run.sampler_calls and result.run.timing is not None and result.run.timing.total_seconds is not None
    data = result.to_json()
    assert RunResult.from_json(json.loads(json.dumps(data))).to_json() == data


def test_status_and_finding_are_words_given_as_strings():
    failed = CheckResult(id="x", family="x", status="fail", finding="loss")
    assert failed.status is Status.FAIL and failed.finding is Finding.LOSS and failed.proves is Finding.LOSS
    assert failed.status == "fail" and CheckResult(id="x", family="x", status=Status.PASS).finding is None
    data = failed.to_json()
    assert (data["status"], data["finding"], data["proves"]) == ("fail", "loss", "loss")
    assert type(json.loads(json.dumps(data))["status"]) is str and CheckResult.from_json(data) == failed
    failed.status = "inconclusive"  # set later as a string: still a word
    assert failed.status is Status.INCONCLUSIVE
    with pytest.raises(ValueError, match="unknown status 'passed'"):
        CheckResult(id="x", family="x", status="passed")
    with pytest.raises(ValueError, match="unknown finding 'lost'"):
        CheckResult(id="x", family="x", status="fail", finding="lost")


def test_a_part_that_is_no_object_is_named():
    with pytest.raises(TypeError, match="run.isolation is a str"):
        RunInfo.from_json({**CHAIN, "isolation": "process"})


def test_the_report_migrates_an_older_subset_where_it_reads_it(tmp_path):
    from specverify.report._index import load_run

    old = {**CHAIN, "select": ["fit.*"]}
    del old["left_out"]  # written before runs recorded what a selection left out
    path = tmp_path / "old.json"
    data = RunResult(run=old, checks=[CheckResult(id="fit.x", family="fit", status="pass", proves="loss")]).to_json()
    data["run"].pop("left_out")
    path.write_text(json.dumps(data))
    read = load_run(path)
    assert "contract.output" in read["run"]["left_out"] and not any(
        i.startswith("fit.") for i in read["run"]["left_out"]
    )
    assert read["verdict"] == "inconclusive" and "subset" in read["verdict_reason"]
