"""The loop family finds every loop bug of the zoo and passes the reference loop."""

from __future__ import annotations

import json

import pytest
import torch

from specverify._budgets import budget_for_tv, get_budget
from specverify._record.evidence import unknown_keys
from specverify._run._driver import check_loop
from specverify.checks._loop import LoopCheck, loop_battery
from specverify.checks._loop_context import LoopContext
from specverify.samplers._loop_reference import LoopReference
from specverify.zoo._loops import LOOP_MEMBERS

COARSE = get_budget("quick").with_(tv=0.1)  # a quarter of quick's samples: this test is about the verdict


def test_the_reference_loop_is_conformant_with_every_check_run():
    result = check_loop(LoopReference(), budget=COARSE, seed=3)
    assert result.verdict == "conformant", [(c.id, c.status, c.message) for c in result.checks]
    assert {c.id for c in result.checks if c.status == "pass"} == {c.id for c in loop_battery()}
    law = [c for c in result.checks if c.id.startswith("loop.law") or c.id == "loop.positions"]
    assert all(c.min_detectable_tv <= 0.2 and c.alpha > 0 and c.samples > 0 for c in law)
    assert all(
        unknown_keys(c.to_json()["evidence"]) == [] for c in result.checks
    )  # the loop family's evidence is in the schema


@pytest.mark.parametrize("name", [n for n, m in LOOP_MEMBERS.items() if m.caught_by and m.at_tv is None])
def test_each_loop_bug_is_caught_by_its_declared_check(name):
    member = LOOP_MEMBERS[name]
    result = check_loop(member.loop, budget="quick", seed=0, select=[member.caught_by[0]])
    failed = [c for c in result.checks if c.status == "fail"]
    assert failed, [(c.id, c.status, c.message) for c in result.checks]
    assert result.verdict == member.verdict
    assert all(unknown_keys(c.to_json()["evidence"]) == [] for c in failed)


class _Broken:
    parameters = ("temperature",)

    def __init__(self, output):
        self.output = output

    def __call__(self, target, draft, prompt, num_tokens, params, generator):
        if isinstance(self.output, Exception):
            raise self.output
        return self.output(prompt, num_tokens)


@pytest.mark.parametrize(
    "output, message",
    [
        (lambda prompt, n: torch.zeros((prompt.shape[0], n), dtype=torch.int32), "int64 tokens of shape"),
        (lambda prompt, n: torch.zeros((prompt.shape[0], n + 1), dtype=torch.int64), "int64 tokens of shape"),
        (lambda prompt, n: torch.full((prompt.shape[0], n), 7, dtype=torch.int64), "outside [0, 4)"),
        (RuntimeError("kernel fault\nmore"), "raised RuntimeError: kernel fault"),
    ],
)
def test_a_broken_loop_fails_the_contract_with_a_message(output, message):
    ctx = LoopContext(_Broken(output), tv=0.05, power=0.99, max_samples=1000, seed=0, alpha=0.0)
    result = LoopCheck("determinism").run(ctx)
    assert result.status == "fail" and result.finding == "contract" and message in result.message


def test_checks_a_loop_cannot_take_are_skipped_with_the_reason():
    result = check_loop(
        _Broken(lambda p, n: torch.zeros((p.shape[0], n), dtype=torch.int64)),
        budget="quick",
        select=["loop.seeds", "loop.law[top-k]"],
    )
    assert [c.status for c in result.checks] == ["skip", "skip"]
    assert "seeds" in result.checks[0].message and "top_k" in result.checks[1].message
    with pytest.raises(ValueError, match="no loop check"):
        check_loop(LoopReference(), select=["loop.nothing"])


def test_the_loop_command_runs_a_declared_loop_and_refuses_a_step_sampler(tmp_path, capsys):
    from specverify._cli import main

    out = tmp_path / "loop.json"
    assert (
        main(
            [
                "loop",
                "specverify.samplers:loop_reference",
                "--budget",
                "quick",
                "--only",
                "loop.output",
                "--only",
                "loop.seeds",
                "--json",
                str(out),
                "-q",
            ]
        )
        == 3
    )
    text = capsys.readouterr().out
    assert "inconclusive" in text and out.exists()  # a subset never passes
    # the same time split as ``check`` JSON: the loop's generations, timed whole, and the rest
    timing = json.loads(out.read_text())["run"]["timing"]
    assert set(timing) == {"total_seconds", "sampler_seconds", "harness_seconds", "harness_share"}
    assert 0 < timing["sampler_seconds"] < timing["total_seconds"]
    assert timing["harness_seconds"] == pytest.approx(timing["total_seconds"] - timing["sampler_seconds"], abs=2e-3)
    assert 0 < timing["harness_share"] < 1
    assert main(["loop", "specverify.samplers:reference"]) == 2
    assert "not a generation loop" in capsys.readouterr().err


def test_loop_members_join_the_kill_matrix_in_a_loop_column():
    from specverify.zoo._matrix import kill_matrix, render_markdown

    assert not [r for r in kill_matrix("quick", members=["loop:*"]) if r]  # loops only when asked
    [row] = kill_matrix(get_budget("quick").with_(max_samples=4000), members=["loop:target-unwarped"], loops=True)
    assert row.meets and row.caught_by["loop"] >= 1 and row.first_failure.startswith("loop.")
    header = render_markdown([row], "quick").splitlines()[0]  # caught by exact checks; the small laws only cost less
    assert header.split(" | ")[-6] == "loop" and header.endswith("| float-edge |")


def test_the_family_name_selects_every_check_and_on_result_sees_skips_too():
    seen = []
    result = check_loop(_Broken(RuntimeError("no")), budget="quick", select=["loop"], on_result=seen.append)
    assert [c.id for c in result.checks] == [c.id for c in loop_battery()] and result.run["left_out"] == []
    assert seen == result.checks and {c.status for c in result.checks} == {"fail", "skip"}
    assert all(unknown_keys(c.to_json()["evidence"]) == [] for c in result.checks)  # a raising loop's fault


AT_TV = budget_for_tv(0.05)  # a --tv budget: its decisions are not capped, so they look for futility


def test_at_a_tv_budget_passing_checks_stop_at_futility_looks_and_still_claim_the_asked_tv():
    result = check_loop(
        LoopReference(), budget=AT_TV, seed=2, select=["loop.law[separating]", "loop.law[mixed]", "loop.positions"]
    )
    stopped = []
    for check in result.checks:
        assert check.status == "pass", (check.id, check.message)
        futility = check.evidence["futility"]
        assert (
            0.05 <= check.min_detectable_tv <= 0.05 * 1.15
        )  # the whole procedure's claim (pooled rare cells add a little)
        generations = check.samples // (23 if check.id == "loop.positions" else 1)
        per_decision = generations // (1 if check.id == "loop.positions" else len(check.evidence["groups"]))
        assert per_decision == (futility["stopped_at"] or futility["final"])  # every decision drew the same
        stopped.append(futility["stopped_at"] is not None)
    assert any(stopped)  # under the null most checks stop at a look (each may miss its last: not all)


@pytest.mark.parametrize("name", ["shared-draft-and-verifier-coins", "min-p-bonus-only", "raw-draft-reported-as-q"])
def test_at_a_tv_budget_a_lossy_loop_is_still_caught(name):
    member = LOOP_MEMBERS[name]
    result = check_loop(member.loop, budget=AT_TV, seed=0, select=list(member.caught_by[:1]))
    assert [c.status for c in result.checks] == ["fail"], [(c.id, c.message) for c in result.checks]


def test_futility_looks_give_the_same_result_for_any_worker_count():
    from specverify._calling.pool import LocalPool, SerialPool

    check, budget = LoopCheck("law", "separating"), budget_for_tv(0.01)  # several units a phase
    results = []
    for pool in (SerialPool(LoopReference()), LocalPool([LoopReference(), LoopReference()])):
        ctx = LoopContext(
            pool.primary,
            budget.tv,
            budget.power,
            budget.max_samples,
            seed=7,
            alpha=1e-4,
            pool=pool,
            cap_per_decision=True,
        )
        results.append(check.run(ctx).to_json())
    for result in results:
        result.pop("duration_s", None)
    assert results[0]["evidence"]["futility"]["stopped_at"] and results[0] == results[1]
