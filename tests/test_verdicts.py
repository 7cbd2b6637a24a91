"""Verdicts never claim more than the evidence shows (issue 15).

Each test here failed on the harness before the fix it pins: a subset that passed, a
lossless-suboptimal verdict with no target-law evidence where the sampler deviated, a
``canonical=False`` sampler passed on shapes no target-law test saw, ...
"""

from __future__ import annotations

import json

import pytest

import specverify
from specverify import CheckResult, RunResult
from specverify._budgets import get_budget
from specverify._cli import main
from specverify._record.reach import Reach
from specverify._record.result import judge
from specverify._run import migrate

QUICK = get_budget("quick").with_(timeout=60.0)


def reach(*shapes: tuple[int, int], kinds: tuple[str, ...] = ("random",)) -> Reach:
    ks, vs = [k for k, _ in shapes], [v for _, v in shapes]
    return Reach(
        vocab=(min(vs), max(vs)),
        k=(min(ks), max(ks)),
        batch=(1, 1),
        rows=1,
        dtypes=("float64",),
        shapes=tuple(sorted(shapes)),
        kinds=kinds,
    )


def law(*shapes: tuple[int, int], case: str = "random", status: str = "pass") -> CheckResult:
    finding = "loss" if status == "fail" else None
    return CheckResult(
        id=f"fit.position[{case}]",
        family="fit",
        case=case,
        status=status,
        finding=finding,
        proves="loss",
        reach=reach(*shapes, kinds=(case,)),
    )


def deviation(k: int, vocab: int, kind: str = "random", finding: str = "non-canonical") -> CheckResult:
    example = {"cases": [{"kind": "step", "label": kind, "K": k, "V": vocab}]}
    return CheckResult(
        id=f"fit.conditional[{kind}]",
        family="fit",
        case=kind,
        status="fail",
        finding=finding,
        evidence={"minimal_example": example},
        reach=reach((k, vocab), kinds=(kind,)),
    )


SUBOPTIMAL = CheckResult(id="efficiency.acceptance[random]", family="efficiency", status="fail", finding="suboptimal")


# --- item 4: a subset never passes ---------------------------------------------------------------


def _read(run: dict, checks: list) -> RunResult:
    """A result of the older form (a selection, no ``left_out``), read as the report reads it."""
    return RunResult.from_json(migrate(RunResult(run=run, checks=checks).to_json()))


def test_a_subset_with_a_target_law_test_is_still_inconclusive():
    run = _read({"select": ["fit.first-token[random]"], "planned_checks": 1}, [law((1, 2))])
    assert run.verdict == "inconclusive" and run.exit_code == 3
    assert "contract.determinism" in run.verdict_reason and "subset" in run.verdict_reason
    assert run.to_json()["verdict_reason"] == run.verdict_reason
    # failures of a subset stand
    failed = _read({"select": ["fit.*"], "planned_checks": 1}, [law((1, 2), status="fail")])
    assert failed.verdict == "lossy"
    # a selection that matches the whole battery is the whole battery
    assert _read({"select": ["*"], "planned_checks": 40}, [law((1, 2))]).verdict == "conformant"


def test_an_old_subset_read_without_migration_never_passes():
    # the record plans nothing: a selection whose left-out results it does not hold is a subset
    unread = RunResult(run={"select": ["*"], "planned_checks": 40}, checks=[law((1, 2))])
    assert unread.verdict == "inconclusive" and "subset" in unread.verdict_reason
    assert RunResult(run={"select": ["*"], "left_out": []}, checks=[law((1, 2))]).verdict == "conformant"


def test_cli_subset_on_a_sampler_that_ignores_its_generator_is_inconclusive(tmp_path):
    out = tmp_path / "out.json"
    args = [
        "check",
        "specverify.zoo:ignores_generator",
        "--budget",
        "quick",
        "--only",
        "fit.first-token[random]",
        "--json",
        str(out),
        "--no-progress",
        "-q",
    ]
    assert main(args) == 3
    data = json.loads(out.read_text())
    assert data["verdict"] == "inconclusive" and "contract.determinism" in data["verdict_reason"]


# --- item 2: a lossless verdict needs target-law evidence where the deviation is -------------------


@pytest.mark.parametrize(
    ("checks", "expected"),
    [
        ([law((1, 2)), deviation(1, 2), SUBOPTIMAL], "lossless-suboptimal"),
        ([law((1, 2), (3, 4)), deviation(4, 2), SUBOPTIMAL], "inconclusive"),  # no target-law test at K = 4
        (
            [law((1, 2)), law((4, 2), case="chain"), deviation(4, 2), SUBOPTIMAL],
            "inconclusive",
        ),  # a random-kind deviation needs a random-kind test
        (
            [law((4, 2)), deviation(4, 2, "zero-residual"), SUBOPTIMAL],
            "lossless-suboptimal",
        ),  # no target-law check of that kind: by shape
        ([law((1, 2)), law((4, 2), status="fail"), deviation(4, 2), SUBOPTIMAL], "lossy"),
    ],
)
def test_lossless_verdict_needs_a_target_law_test_where_the_law_deviated(checks, expected):
    judgement = judge(checks)
    assert judgement.verdict == expected
    if expected == "inconclusive":
        assert "K=4, V=2" in judgement.reason


# --- item 1: rows far from normalised are a declared capability -----------------------------------


def test_a_kernel_that_does_not_renormalise_gets_a_finding_of_its_own_when_it_declares_it():
    from specverify.zoo import ZOO

    result = specverify.check(
        ZOO["declares-unnormalised-but-does-not-renormalise"], budget=QUICK, seed=0, select=["fit.unnormalised[*]"]
    )
    (check,) = result.checks
    assert check.status == "fail" and check.finding == "renormalisation"
    assert "does not renormalise its inputs" in check.message
    assert result.verdict == "non-conformant" and "does not renormalise" in result.verdict_reason


def test_a_sampler_that_renormalises_passes_on_rows_far_from_normalised():
    from specverify._contract import Capabilities
    from specverify.samplers import reference

    def renormalising(t, d, y, g):
        return reference(t, d, y, g)

    renormalising.capabilities = Capabilities(unnormalised=True)
    (check,) = specverify.check(renormalising, budget=QUICK, seed=0, select=["fit.unnormalised[*]"]).checks
    assert check.status == "pass", check.message
    # undeclared, it is never given such rows
    (skipped,) = specverify.check(reference, budget=QUICK, seed=0, select=["fit.unnormalised[*]"]).checks
    assert skipped.status == "skip" and "unnormalised=True" in skipped.message


# --- item 5: each decision's claim is its own ------------------------------------------------------


def test_a_decision_another_one_failed_claims_only_what_its_own_test_detects():
    from types import SimpleNamespace

    from specverify.checks._base import Decision
    from specverify.checks._search import Outcome, SearchResult, decisions_from_search

    first, step = (Decision(f"fit.{n}[random]", "fit", "random", "loss") for n in ("first-token", "step"))
    screen = Outcome({first.id: 0.5, step.id: 1e-9}, 1000, {first.id: 0.011, step.id: 0.012})
    confirmation = Outcome({first.id: 0.2, step.id: 1e-12}, 5000, {first.id: 0.03, step.id: 0.013})
    found = SearchResult(
        examples=3, screens=[screen], minimal={"K": 1}, confirmed=({"K": 1}, confirmation), confirm_alpha=1e-6
    )
    ctx = SimpleNamespace(budget=get_budget("standard"), alpha=1e-5)
    passed, failed = decisions_from_search(ctx, [first, step], found, lambda c: dict(c), lambda c, o, d: "")
    assert failed.status == "fail" and failed.min_detectable_tv == 0.013
    # the search stopped at the failing case: first-token was decided by its own confirmation test
    assert passed.status == "inconclusive" and passed.min_detectable_tv == 0.03  # 0.03 > the ceiling 0.02
    assert passed.p_value == 0.2 and passed.samples == 5000 and "fit.step[random] failed" in passed.message
    confirmation.min_detectable_tv[first.id] = 0.015
    passed, _ = decisions_from_search(ctx, [first, step], found, lambda c: dict(c), lambda c, o, d: "")
    assert passed.status == "pass" and passed.min_detectable_tv == 0.015 and "detects TV >= 0.015" in passed.message


# --- item 7: messages that teach the contract ------------------------------------------------------


def test_a_p_value_below_a_double_reads_as_a_bound():
    from specverify.checks._search import p_text

    assert p_text(0.0) == "p < 1e-300" and p_text(0.0123) == "p = 0.0123"


def test_an_out_of_range_token_message_teaches_the_contract():
    import torch

    from specverify._contract import audit_output

    target = torch.full((1, 5, 4), 0.25, dtype=torch.float64)
    drafts = torch.tensor([[0, 1, 2, 3]])
    output = (torch.tensor([[0, 1, 2, 3, -1]]), torch.tensor([4]))  # a bonus slot left as padding
    (violation,) = audit_output(output, target, drafts)
    assert violation.rule == "token-range"
    text = violation.message
    assert (
        "declares 4 accepted drafts" in text and "emits 5 tokens" in text and "position 4" in text and "padding" in text
    )


# --- item 6: efficiency checks state their power --------------------------------------------------


def test_an_efficiency_check_states_its_samples_and_the_deficit_it_detects():
    from specverify.report import render_report
    from specverify.samplers import reference

    result = specverify.check(reference, budget=QUICK, seed=0, select=["efficiency.acceptance[[]random]"])
    (check,) = result.checks
    assert check.samples and check.evidence["power"] == QUICK.power
    assert 0 < check.evidence["min_detectable_deficit"] < 1
    assert f"detected with probability >= {QUICK.power}" in check.message
    page = render_report(result)
    assert '<th class="num">power</th>' in page and '<th class="num">calls</th>' in page


def test_a_lossless_suboptimal_page_shows_the_differences_as_evidence_not_failures():
    from specverify.report import render_report

    checks = [law((1, 2)), deviation(1, 2), SUBOPTIMAL]
    checks[1].evidence["tv"] = {"estimate": 0.2, "low": 0.1, "high": 0.3, "confidence": 0.99}
    run = RunResult(run={"select": None}, checks=checks)
    assert run.verdict == "lossless-suboptimal"
    page = render_report(run)
    assert 'id="differences"' in page and 'id="failures"' not in page
    assert "observed TV" in page and "0.2 [0.1, 0.3]" in page


# --- items 2 and 3: target-law tests at every shape the conditional checks use ---------------------


@pytest.mark.parametrize("name", ["lossy-at-four-drafts", "non-canonical-lossy-at-four-drafts"])
def test_a_sampler_lossy_at_four_drafts_only_fails_a_target_law_test_there(name):
    from specverify.zoo import ZOO

    result = specverify.check(ZOO[name], budget=QUICK, seed=0, select=["fit.every-shape[[]random]"])
    (check,) = result.checks
    assert check.status == "fail" and check.finding == "loss" and check.evidence["where"].startswith("K=4")
    assert check.reach.covers(4, 8) and check.reach.covers(1, 2)
    assert result.verdict == "lossy"


def test_low_precision_rows_are_normalised_as_well_as_their_dtype_allows():
    import torch

    from specverify.strategies._internal.vectors import round_normalised, round_to

    rows = torch.rand((500, 8), generator=torch.Generator().manual_seed(0), dtype=torch.float64) + 0.01
    rows = rows / rows.sum(-1, keepdim=True)
    for precision, nearest_error in (("bfloat16", 1e-3), ("float16", 1e-4)):
        rounded = round_normalised(rows, precision)
        assert torch.equal(round_to(rounded, precision), rounded)  # exactly representable
        assert (round_to(rows, precision).sum(-1) - 1).abs().max() > nearest_error  # entrywise rounding misses 1
        assert (rounded.sum(-1) - 1).abs().max() < nearest_error / 2
        eps = torch.finfo(getattr(torch, precision)).eps
        assert ((rounded - rows).abs() <= 1.5 * eps * rows).all()  # half an ulp to the nearest, one step at most


def test_a_repro_snippet_calls_the_sampler_in_the_batches_it_declares():
    result = specverify.check(
        "isolation_samplers:unbatched_int32",
        budget="quick",
        select=["contract.output"],
        isolation="in-process",
        spec="isolation_samplers:unbatched_int32",
    )
    failing = [c for c in result.checks if c.status == "fail"]
    assert failing and failing[0].evidence["violation"] == "shape-dtype"
    with pytest.raises(
        specverify.SamplerFault
    ) as info:  # the contract's finding, not the sampler's complaint about its batch
        exec(failing[0].evidence["repro"], {})
    assert info.value.violation.rule == "shape-dtype"


# --- issue 31: a law difference on a 1e-20 event is a float-edge finding, not a verdict -----------


def _edge(status: str) -> CheckResult:
    finding = "non-canonical" if status == "fail" else None
    return CheckResult(
        id="shapes.edge-law[sub-ulp-residual]",
        family="shapes",
        case="sub-ulp-residual",
        status=status,
        finding=finding,
        proves="non-canonical",
    )


def test_a_float_edge_result_decides_nothing_and_a_failure_still_does():
    assert judge([law((2, 1025)), _edge("float-edge")]).verdict == "conformant"
    assert judge([law((2, 1025), status="fail"), _edge("float-edge")]).verdict == "lossy"  # the rest decides
    assert judge([law((2, 1025)), _edge("fail")]).verdict == "lossy"  # above the resolution: as before
    support = CheckResult(
        id="shapes.edge-law[zeros-next-to-sub-ulp]", family="shapes", status="fail", finding="support"
    )
    assert judge([law((2, 1025)), _edge("float-edge"), support]).verdict == "non-conformant"  # whatever its frequency
    summary = RunResult(run={}, checks=[law((2, 1025)), _edge("float-edge")]).to_json()["summary"]
    assert summary["float-edge"] == 1 and summary["fail"] == 0


def test_cli_prints_a_float_edge_finding_on_its_own_line_with_both_sizes(capsys):
    code = main(
        [
            "check",
            "specverify.zoo:target_fallback_below_1e_12",
            "--only",
            "shapes.edge-law[*]",
            "--budget",
            "quick",
            "--no-progress",
            "--in-process",
        ]
    )
    out = capsys.readouterr().out
    assert code == 3  # a subset: never a pass; nothing failed
    after = " ".join(out.split("target-fallback-below-1e-12 (")[-1].split())  # after the verdict, unwrapped
    assert "float-edge shapes.edge-law[small-residual]: TV 1 given" in after
    assert "probability 5e-13" in after and "moves by at most 5e-13" in after
    assert not [line for line in out.splitlines() if line.lstrip().startswith("fail ")]  # no check failed
