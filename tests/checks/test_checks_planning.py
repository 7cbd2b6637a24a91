"""Planning (``specverify._run._plan``): which checks run, and each one's Bonferroni share.

Planning reads only the sampler's declared capabilities, so no sampler runs here.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import specverify
from specverify._budgets import get_budget
from specverify._calling.sut import SamplerUnderTest
from specverify._record.result import UNKNOWN_LEFT_OUT, left_out
from specverify._run import left_out_among, left_out_of, migrate, plan, plan_checks, result_ids, selected
from specverify.checks import Check, battery, tree_battery
from specverify.checks._loop import loop_battery

BUDGET = get_budget("quick")
#: The reference takes every check but fit.unnormalised (it declares no unnormalised=True), so every
#: other statistical decision of the battery shares the budget.
DECISIONS = sum(c.decisions for c in battery() if c.statistical and c.id != "fit.unnormalised[random]")


def declared(**capabilities):
    @specverify.sampler(name="declared", **capabilities)
    def fn(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
        raise AssertionError("planning never calls the sampler")

    return SamplerUnderTest(fn)


def spent(planned) -> float:
    """The false-positive budget the planned checks spend: share times decisions, over those that run."""
    return sum(p.alpha * p.check.decisions for p in planned if p.skip_reason is None)


def test_the_reference_battery_splits_alpha_evenly_over_its_decisions():
    planned = plan(SamplerUnderTest(specverify.reference), BUDGET)
    statistical = [p for p in planned if p.check.statistical]
    assert DECISIONS > 20 and {p.alpha for p in statistical} == {BUDGET.alpha / DECISIONS}
    assert {p.alpha for p in planned if not p.check.statistical} == {0.0}  # exact checks spend nothing
    assert [p.id for p in planned if p.skip_reason] == ["fit.unnormalised[random]"]  # it declares no unnormalised=True
    assert spent(planned) == pytest.approx(BUDGET.alpha, rel=1e-12)


def test_skipped_checks_take_no_share_and_say_why():
    planned = plan(declared(canonical=False, dtypes=(torch.float64,)), BUDGET)
    skipped = {p.id: p.skip_reason for p in planned if p.skip_reason and p.id != "fit.unnormalised[random]"}
    assert skipped and all("canonical=False" in reason for reason in skipped.values())
    assert {p.check.proves for p in planned if p.id in skipped} == {"non-canonical"}
    assert spent(planned) == pytest.approx(BUDGET.alpha, rel=1e-12)  # the running checks share it all
    running = sum(p.check.decisions for p in planned if p.check.statistical and p.skip_reason is None)
    assert running < DECISIONS and {p.alpha for p in planned if p.check.statistical} == {BUDGET.alpha / running}


def test_a_sampler_without_injected_uniforms_skips_the_uniform_driven_checks_only():
    planned = plan(declared(uniforms=False), BUDGET)
    skipped = [p.id for p in planned if p.skip_reason and p.id != "fit.unnormalised[random]"]
    assert skipped == [
        "exact.uniform-driven[random]",
        "exact.uniform-driven[zeros]",
        "exact.uniform-driven[low-precision]",
        "shapes.uniform-driven",
    ]
    # exact checks hold no share, so skipping them leaves every statistical share as it was
    assert {p.alpha for p in planned if p.check.statistical} == {BUDGET.alpha / DECISIONS}


def test_a_selection_plans_only_what_it_names_and_gives_it_the_whole_budget():
    sut = SamplerUnderTest(specverify.reference)
    family = plan(sut, BUDGET, ["efficiency"])
    assert [p.id for p in family] == ["efficiency.acceptance[seed-chain]", "efficiency.acceptance[random]"]
    assert {p.alpha for p in family} == {BUDGET.alpha / 2}
    (one,) = plan(sut, BUDGET, ["fit.conditional[random]"])  # brackets taken literally
    assert one.id == "fit.conditional[random]" and one.alpha == BUDGET.alpha
    by_decision = plan(sut, BUDGET, ["fit.step[chain]"])  # a decision's id selects its check
    assert [result_ids(p.check) for p in by_decision] == [
        ["fit.first-token[chain]", "fit.step[chain]", "fit.position[chain]"]
    ]
    assert by_decision[0].alpha == BUDGET.alpha / 3


def test_a_selection_that_matches_nothing_is_a_usage_error():
    with pytest.raises(ValueError, match="no check matches"):
        plan(SamplerUnderTest(specverify.reference), BUDGET, ["no-such-check"])


def test_a_glob_selects_by_id_with_brackets_literal_or_escaped():
    sut = SamplerUnderTest(specverify.reference)
    shapes = [c.id for c in battery() if c.family == "shapes"]
    assert [p.id for p in plan(sut, BUDGET, ["shapes.*"])] == [p.id for p in plan(sut, BUDGET, ["shapes"])] == shapes
    conditional = [p.id for p in plan(sut, BUDGET, ["fit.conditional[*]"])]
    assert len(conditional) == 8 and all(i.startswith("fit.conditional[") for i in conditional)
    assert [p.id for p in plan(sut, BUDGET, ["fit.conditional[[]zeros]"])] == [
        "fit.conditional[zeros]"
    ]  # glob.escape's form


def test_a_check_that_does_not_apply_is_left_out_unless_nothing_else_is_selected():
    sut = SamplerUnderTest(specverify.reference)  # declares no per-request seeds
    assert not any(p.id.startswith("contract.seeds") for p in plan(sut, BUDGET))
    assert not any(p.id.startswith("contract.seeds") for p in plan(sut, BUDGET, ["contract"]))
    (*seeds,) = plan(sut, BUDGET, ["contract.seeds[*]"])
    assert [p.id for p in seeds] == [
        "contract.seeds[same-seed]",
        "contract.seeds[different-seeds]",
        "contract.seeds[batch-placement]",
    ]
    assert all("declares no per-request seeds" in (p.skip_reason or "") for p in seeds)


class Fake(Check):
    """A declared check with the planning attributes set by hand."""

    def __init__(
        self, name: str, *, statistical: bool, decisions: int = 1, proves: str | None = None, reason: str | None = None
    ) -> None:
        self.family, self.case, self.name, self._statistical = "fit", None, name, statistical
        self._decisions, self._proves, self._reason = decisions, proves, reason

    id = property(lambda self: f"fit.{self.name}")
    statistical = property(lambda self: self._statistical)
    decisions = property(lambda self: self._decisions)
    proves = property(lambda self: self._proves)

    def skip_reason(self, sut: object) -> str | None:
        return self._reason

    def run(self, ctx: object) -> list:
        raise AssertionError("planned, never run")


def test_the_share_counts_only_the_statistical_decisions_that_run():
    checks = [
        Fake("three", statistical=True, decisions=3),
        Fake("skips", statistical=True, decisions=5, reason="needs V=9"),
        Fake("law", statistical=True, decisions=2, proves="non-canonical"),  # skips: the sampler is not canonical
        Fake("exact", statistical=False, decisions=7),
    ]
    sut = SimpleNamespace(capabilities=SimpleNamespace(canonical=False))
    three, skips, law, exact = plan_checks(checks, sut, alpha=0.06)
    assert (three.alpha, three.skip_reason) == (0.02, None)  # 0.06 over the 3 decisions that run
    assert skips.skip_reason == "needs V=9" and "canonical=False" in (law.skip_reason or "")
    assert (exact.alpha, exact.skip_reason) == (0.0, None)
    (alone,) = plan_checks([Fake("skips", statistical=True, reason="no")], sut, alpha=0.06)
    assert alone.alpha == 0.06  # nothing runs: no division by zero, nothing spent


def test_a_subset_names_what_it_left_out_of_the_battery():
    sut = SamplerUnderTest(specverify.reference)
    every = [i for c in battery() for i in result_ids(c)]
    efficiency = ["efficiency.acceptance[seed-chain]", "efficiency.acceptance[random]"]
    assert left_out_of(sut, None) == left_out_of(sut, []) == []
    assert left_out_of(sut, ["efficiency"]) == [i for i in every if i not in efficiency]
    # an older result (a selection, no left_out) is planned again where it is read, never by the record
    old = {"run": {"select": ["efficiency"]}, "checks": []}
    assert left_out(migrate(old)["run"]) == left_out_of(sut, ["efficiency"]) and "left_out" not in old["run"]
    assert left_out(old["run"]) == [UNKNOWN_LEFT_OUT]
    assert "fit.position[chain]" not in left_out_of(sut, ["fit.step[chain]"])  # a decision's check is wholly in
    trees = left_out_among(tree_battery(), ["trees.output*"])
    every_tree = [
        i for c in tree_battery() for i in result_ids(c)
    ]  # a check may report several (target-law and acceptance)
    assert (
        sorted(trees) == sorted(i for i in every_tree if not i.startswith("trees.output"))
        and len(every_tree) - len(trees) == 2
    )


def test_the_loop_family_is_planned_by_the_same_rules():
    loop = SimpleNamespace(parameters=("temperature",))  # what a loop under test declares
    planned = {p.id: p for p in plan_checks(selected(loop_battery(), None), loop, alpha=0.03)}
    running = [i for i, p in planned.items() if p.check.statistical and p.skip_reason is None]
    assert running == ["loop.law[plain]", "loop.law[temperature]", "loop.positions"]
    assert {planned[i].alpha for i in running} == {0.01} and planned["loop.output"].alpha == 0.0
    assert "no per-request seeds" in (planned["loop.seeds"].skip_reason or "")
    assert [c.id for c in selected(loop_battery(), ["loop.law[top-k]"])] == ["loop.law[top-k]"]
