"""Reach on demand: a budget sized for any TV (``--tv``), the plan's cost before a run (``--plan``),
and a run stopped before it starts when its estimate is over ``--max-time``."""

from __future__ import annotations

import json
import re

import pytest

import specverify
from specverify._budgets import BUDGETS, MAX_SAMPLES_CAP, budget_for_tv, resolve_budget
from specverify._calling.pool import UNIT_ROWS
from specverify._cli import main
from specverify.errors import UsageError
from specverify.report import reproducible

REFERENCE = "specverify.samplers:reference"
ONE_FIT = "fit.conditional[random]"


def test_a_tv_budget_scales_the_nearest_preset_by_the_power_analysis():
    thorough = BUDGETS["thorough"]
    budget = budget_for_tv(0.001)
    assert budget.name == "tv=0.001" and budget.tv == 0.001
    assert budget.examples == thorough.examples and budget.shape_full_domain  # thorough's other settings
    assert budget.max_samples == int(thorough.max_samples * 9)  # (0.003 / 0.001) ** 2
    assert budget.shape_tv == pytest.approx(thorough.shape_tv / 3)
    assert "thorough" in budget.derivation and "capped" not in budget.derivation
    assert budget_for_tv(0.04).examples == BUDGETS["quick"].examples
    assert budget_for_tv(0.01).max_samples == BUDGETS["standard"].max_samples


def test_a_tv_beyond_what_the_caps_allow_says_it_is_capped():
    budget = budget_for_tv(1e-5)
    assert budget.max_samples == MAX_SAMPLES_CAP
    assert "max_samples" in budget.derivation and "capped" in budget.derivation


def test_a_tv_budget_caps_each_decision_and_a_preset_shares_its_cap():
    assert budget_for_tv(0.001).decision_cap(28) == budget_for_tv(0.001).max_samples
    assert BUDGETS["standard"].decision_cap(4) == BUDGETS["standard"].max_samples // 4
    assert "each decision" in budget_for_tv(0.001).derivation


def test_checks_of_many_decisions_reach_the_tv_asked():
    """The shape-by-shape fit and the row-independence check, both of many decisions or of a claim
    twice its test's TV, reach the budget's TV (they stopped at 1.4-1.8x it under a shared cap)."""
    tv = 0.04
    result = specverify.check(
        REFERENCE, tv=tv, select=["fit.every-shape*", "contract.row-independence"], isolation="in-process"
    )
    reached = {c.id: c.min_detectable_tv for c in result.checks}
    assert set(reached) == {"fit.every-shape[random]", "contract.row-independence"}
    assert all(t is not None and t <= tv * (1 + 1e-9) for t in reached.values()), reached
    assert all(c.status == "pass" for c in result.checks), [(c.id, c.status, c.message) for c in result.checks]


def test_an_explicit_preset_is_the_base_and_alpha_still_overrides():
    budget = resolve_budget("quick", tv=0.01, alpha=1e-3)
    assert budget.examples == BUDGETS["quick"].examples and budget.alpha == 1e-3
    assert budget.max_samples == BUDGETS["quick"].max_samples * 25
    assert resolve_budget("standard") is BUDGETS["standard"]


@pytest.mark.parametrize("tv", [0.0, 1.0, -0.1, 2.0, float("nan")])
def test_a_tv_outside_the_unit_interval_is_a_usage_error(tv):
    with pytest.raises(UsageError, match="--tv must lie in"):
        budget_for_tv(tv)
    with pytest.raises(UsageError):
        specverify.check(REFERENCE, tv=tv, select=["contract.output"])


@pytest.mark.parametrize("command", ["check", "loop"])
@pytest.mark.parametrize(
    "flags",
    [["--tv", "1.5"], ["--tv", "0"], ["--max-time", "0"], ["--max-time", "-3"], ["--power", "1"], ["--power", "0"]],
)
def test_bad_reach_options_are_one_line_and_exit_2(command, flags, capsys, tmp_path):
    json_path = tmp_path / "run.json"
    assert main([command, REFERENCE, *flags, "--json", str(json_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert "specverify: error:" in captured.err and flags[0] in captured.err
    assert not json_path.exists()  # nothing ran


@pytest.mark.parametrize("power", [0.0, 1.0, 1.5, float("nan"), True])
def test_a_power_outside_the_unit_interval_is_a_usage_error(power):
    with pytest.raises(UsageError, match="--power must lie in"):
        resolve_budget("quick", power=power)


def test_power_sizes_every_decision_and_the_plan_and_the_claims_state_it(capsys):
    """A lower power draws fewer samples for the same TV, and says so: in the plan and in the run's
    record (whose guarantee line prints the power it was made at)."""
    assert resolve_budget(tv=0.002, power=0.9).power == 0.9 and resolve_budget(tv=0.002).power == 0.99

    def planned_rows(*power: str) -> tuple[int, str]:
        assert main(["check", REFERENCE, "--plan", "--tv", "0.002", "--only", ONE_FIT, *power]) == 0
        out = capsys.readouterr().out
        return int(next(row for row in out.splitlines() if row.startswith(ONE_FIT)).split()[2].replace(",", "")), out

    strong, out = planned_rows()
    weak, weak_out = planned_rows("--power", "0.9")
    assert 0 < weak < strong
    assert "with probability 0.99" in out and "with probability 0.9," in weak_out and "detect TV 0.002" in weak_out
    runs = {
        power: specverify.check(REFERENCE, budget="quick", power=power, select=[ONE_FIT], isolation="in-process")
        for power in (None, 0.9)
    }
    assert runs[0.9].run["power"] == 0.9 and runs[None].run["power"] == 0.99
    drew = {power: r.checks[0].samples for power, r in runs.items()}
    assert 0 < drew[0.9] < drew[None]
    assert all(
        r.checks[0].status == "pass" and r.checks[0].min_detectable_tv < BUDGETS["quick"].ceiling_tv
        for r in runs.values()
    )


def test_the_reports_rerun_command_repeats_a_tv_budget_its_base_and_its_power():
    """The report's "Repeat this run" line is a command the CLI takes, and it gives the budget the
    run recorded (a custom budget is no --budget name: it was once printed as one, and refused)."""
    import dataclasses
    import shlex

    from specverify._cli.parser import parser
    from specverify.report._rerun import rerun as _rerun

    for budget, tv, power in (
        ("standard", 0.001, None),
        ("quick", 0.004, 0.9),
        ("thorough", None, 0.95),
        ("quick", None, None),
    ):
        recorded = resolve_budget(budget, tv=tv, power=power)
        command = _rerun(
            {"spec": REFERENCE, "budget": dataclasses.asdict(recorded), "seed": 3, "family_wise_alpha": recorded.alpha}
        )
        words = shlex.split(command)
        assert words[:3] == ["specverify", "check", REFERENCE] and ("--power" in words) == (power is not None), command
        args = parser().parse_args(words[1:])
        assert resolve_budget(args.budget, tv=args.tv, alpha=args.alpha, power=args.power) == recorded, command
        assert args.seed == 3
    assert (
        _rerun({"spec": REFERENCE, "budget": {"name": "mine", "tv": 0.01}, "seed": 0}) is None
    )  # a budget no option gives


def test_plan_rehearses_each_check_and_prints_its_rows_and_an_estimate_and_runs_nothing(capsys, tmp_path):
    json_path = tmp_path / "run.json"
    assert main(["check", REFERENCE, "--plan", "--tv", "0.002", "--only", ONE_FIT, "--json", str(json_path)]) == 0
    out = capsys.readouterr().out
    line = next(row for row in out.splitlines() if row.startswith(ONE_FIT))
    rows = int(line.split()[2].replace(",", ""))
    cap = budget_for_tv(0.002).max_samples
    assert 0 < rows and rows != cap and "(at the cap" not in line  # counted by its own code, not at the cap
    assert f"total: {rows:,} samples" in out and "rehearsed on the exact law" in out
    assert "an estimate" in out and "about " in out and "shapes timed on the sampler" in out
    assert "pass" not in out and "conformant" not in out  # no check ran, no verdict
    assert not json_path.exists()


def test_a_check_that_cannot_be_rehearsed_is_counted_at_the_cap_and_says_why():
    from types import SimpleNamespace

    from specverify._run._cost import AT_CAP, REHEARSED, rehearsed_cost
    from specverify._run._driver import load_sut
    from specverify._run._plan import PlannedCheck, plan

    class Unrehearsable:  # a unit the stand-in has no exact law for
        pass

    def run(ctx):
        return list(ctx.units(lambda sut, unit: None, [Unrehearsable()]))

    sut = load_sut(REFERENCE, isolation="in-process")
    budget = resolve_budget("quick")
    odd_check = SimpleNamespace(
        id="odd.units", statistical=True, decisions=2, run=run, planned_samples=lambda budget, alpha: None
    )
    odd = PlannedCheck(odd_check, None, 0.01)
    cost = rehearsed_cost([odd, *plan(sut, budget, ["contract.output"])], sut, budget, 0)
    at_cap, exact = cost.checks
    assert (
        at_cap.samples == 2 * budget.max_samples
        and at_cap.counted.startswith(AT_CAP)
        and "Unrehearsable" in at_cap.counted
    )
    assert exact.counted == REHEARSED and exact.samples > 0 and cost.estimated_seconds is not None


def test_max_time_under_the_estimate_stops_before_starting(capsys, tmp_path):
    json_path = tmp_path / "run.json"
    assert main(["check", REFERENCE, "--max-time", "0.000001", "--only", ONE_FIT, "--json", str(json_path)]) == 2
    captured = capsys.readouterr()
    assert (
        "--max-time" in captured.err and "nothing run" in captured.err and len(captured.err.strip().splitlines()) == 1
    )
    assert captured.out == "" and not json_path.exists()


def test_a_loop_is_rehearsed_and_timed_so_max_time_judges_it_and_its_plan_counts_what_it_draws(capsys, tmp_path):
    loop = "specverify.samplers:loop_reference"
    assert main(["loop", loop, "--max-time", "0.000001", "--only", "loop.positions"]) == 2
    assert "the plan's estimated time is" in capsys.readouterr().err
    json_path = tmp_path / "run.json"
    assert main(
        [
            "loop",
            loop,
            "--tv",
            "0.05",
            "--max-time",
            "600",
            "--only",
            "loop.law[[]plain[]]",
            "--json",
            str(json_path),
            "-q",
        ]
    ) in (0, 3)
    record = json.loads(json_path.read_text())
    (planned,) = [c for c in record["run"]["plan"]["checks"] if c["id"] == "loop.law[plain]"]
    (drew,) = [c["samples"] for c in record["checks"] if c["id"] == "loop.law[plain]"]  # one outcome a generation
    assert planned["counted"].startswith("rehearsed") and planned["samples"] == drew > 0
    assert record["run"]["plan"]["estimated_seconds"] > 0


def test_a_loop_plan_at_a_small_tv_tallies_counts_and_never_holds_every_generation(capsys):
    """At --tv 0.0005 loop.positions makes 8e7 generations of 24 tokens (15 GiB as tokens): counted
    where the loop runs, its rehearsal draws counts from their law and takes seconds."""
    assert (
        main(["loop", "specverify.samplers:loop_reference", "--plan", "--tv", "0.0005", "--only", "loop.positions"])
        == 0
    )
    line = next(row for row in capsys.readouterr().out.splitlines() if row.startswith("loop.positions"))
    assert int(line.split()[2].replace(",", "")) > 50_000_000 and "(at the cap" not in line


def test_a_real_run_records_its_budget_and_plan(tmp_path):
    json_path = tmp_path / "run.json"
    code = main(
        [
            "check",
            REFERENCE,
            "--tv",
            "0.03",
            "--max-time",
            "600",
            "--only",
            "contract.output",
            "--only",
            ONE_FIT,
            "--json",
            str(json_path),
            "-q",
            "--seed",
            "1",
        ]
    )
    assert code in (0, 3)  # a subset never passes a sampler; it may be inconclusive, never lossy
    run = json.loads(json_path.read_text())["run"]
    assert run["tv"] == 0.03 and run["budget"]["name"] == "tv=0.03" and "scaled" in run["budget"]["derivation"]
    plan = run["plan"]
    assert plan["estimated_seconds"] is not None and "an estimate" in plan["samples_are"]
    drew = {c["id"]: c["samples"] for c in json.loads(json_path.read_text())["checks"]}
    planned = {c["id"]: c for c in plan["checks"]}
    # rehearsed on the exact law, the plan counts what the run then drew on a conforming sampler
    assert planned[ONE_FIT]["counted"].startswith("rehearsed") and planned[ONE_FIT]["samples"] == drew[ONE_FIT] > 0
    assert planned["contract.output"]["samples"] == drew["contract.output"]


def test_the_api_takes_tv_and_records_the_plan_uncalibrated():
    result = specverify.check(REFERENCE, tv=0.04, select=["contract.output"], isolation="in-process")
    assert result.run["budget"]["name"] == "tv=0.04"
    assert result.run["plan"]["estimated_seconds"] is None
    assert result.run["plan"]["calibration"]["how"].startswith("not calibrated")


def test_the_member_below_the_presets_reach_moves_the_law_by_the_tv_its_story_states():
    import torch

    from specverify.zoo import ZOO
    from specverify.zoo._rounded import bf16_truncated, first_token_tv

    x = torch.tensor([0.3, 1.0, 1.0 + 2**-7, 0.1], dtype=torch.float64)
    assert bool((bf16_truncated(x) <= x).all()) and bool(((x - bf16_truncated(x)) / x <= 2**-7).all())
    for vocab, mean, low, high in ((64, "6.1e-4", "4.4e-4", "8.7e-4"), (16, "7.8e-4", None, "2.0e-3")):

        def short(x: float) -> str:
            return f"{x:.1e}".replace("e-0", "e-")

        tvs = []
        for seed in range(20):
            g = torch.Generator().manual_seed(seed)
            p = torch.softmax(torch.randn(vocab, generator=g, dtype=torch.float64), 0)
            q = torch.softmax(torch.randn(vocab, generator=g, dtype=torch.float64), 0)
            tvs.append(first_token_tv(p, q))
        story = ZOO["bf16-truncated-ratio"].story
        assert mean in story and short(sum(tvs) / len(tvs)) == mean
        assert short(max(tvs)) == high and high in story
        if low is not None:
            assert short(min(tvs)) == low and low in story
    assert budget_for_tv(0.001).tv < 0.003 <= min(b.tv for b in BUDGETS.values())  # below every preset


def test_a_tree_plan_is_counted_at_the_cap_and_says_so(capsys):
    assert (
        main(
            [
                "check",
                "specverify.samplers:tree_specinfer",
                "--plan",
                "--budget",
                "quick",
                "--only",
                "trees.conditional*",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "each statistical decision at max_samples" in out and "conformant" not in out


def test_a_rehearsed_plan_makes_the_progress_bar_count_rows_of_its_total():
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from specverify._cli.progress import ProgressDisplay

    display = ProgressDisplay(enabled=True, console=Console(file=io.StringIO(), force_terminal=True))
    display.expect(SimpleNamespace(rehearsed=True, total_samples=1_000))
    check = SimpleNamespace(id="fit.conditional[random]", check=SimpleNamespace(decision_list=lambda: [1, 2]))
    with display:
        display.plan([check])
        display.advance(check, 400)
        display.finished(SimpleNamespace())
        task = display._progress.tasks[0]
        assert (task.total, task.completed) == (1_000, 400)  # rows of the plan's rows, not results of 2
    unrehearsed = ProgressDisplay(enabled=True, console=Console(file=io.StringIO(), force_terminal=True))
    unrehearsed.expect(SimpleNamespace(rehearsed=False, total_samples=5_000))
    with unrehearsed:
        unrehearsed.plan([check])
        unrehearsed.advance(check, 400)
        unrehearsed.finished(SimpleNamespace())
        task = unrehearsed._progress.tasks[0]
        assert (task.total, task.completed) == (2, 1)


def test_the_loop_member_below_the_presets_reach_moves_the_law_by_the_tv_its_story_states():
    import torch

    from specverify._loop import generation_law
    from specverify.checks._loop import KINDS
    from specverify.checks._loop_context import _chain, _params, loop_parameters
    from specverify.zoo._loops import LOOP_MEMBERS
    from specverify.zoo._rounded import bf16_prefix_sum_law, drafted_generation_law

    q = torch.tensor([[0.0, 0.3, 1e-6, 0.0, 0.6999989]], dtype=torch.float64)
    drawn = bf16_prefix_sum_law(q)
    assert bool((drawn >= 0).all()) and bool((drawn[q == 0] == 0).all()) and abs(float(drawn.sum()) - 1) <= 2**-8
    member = LOOP_MEMBERS["bf16-prefix-sum-draft"]
    assert (member.verdict, member.truth, member.declared_at(0.001)[0], member.declared_at(None)[0]) == (
        "conformant",
        "lossy",
        "lossy",
        "conformant",
    )
    one, prompt = torch.zeros(1, dtype=torch.int64), torch.tensor([1, 2])
    for kind, mean in (("plain", "2.0e-3"), ("temperature", "2.8e-3")):
        tvs = []
        for seed in range(10):
            target, draft = _chain(seed, 4, 2), _chain(100 + seed, 4, 2)
            worst = 0.0
            for group in KINDS[kind]:
                params = _params([group], one, loop_parameters(member.loop))

                def warp(logits, params=params):
                    return member.loop._law(logits, params)

                law = generation_law(target, prompt, 3, params, law=member.loop._law)
                # the walk is exact: with the drafter drawing from q it is the target's own law
                assert (
                    float((drafted_generation_law(target, draft, prompt, 3, member.loop.k, warp) - law).abs().max())
                    < 1e-12
                )
                moved = drafted_generation_law(target, draft, prompt, 3, member.loop.k, warp, bf16_prefix_sum_law)
                worst = max(worst, 0.5 * float((moved - law).abs().sum()))
            tvs.append(worst)
        assert f"{sum(tvs) / len(tvs):.1e}".replace("e-0", "e-") == mean and f"[{kind}] {mean}" in member.story.replace(
            "loop.law[plain]", "[plain]"
        )
    assert budget_for_tv(0.001).tv < 0.002 < min(b.tv for b in BUDGETS.values())  # below every preset


def test_a_bug_found_beyond_its_declared_reach_meets_and_is_no_false_alarm():
    from specverify.zoo._matrix import MatrixRow, render_markdown

    def row(verdict, declared="conformant", truth="lossy"):
        return MatrixRow("loop:x", 0, declared, "quick", ["loop"], verdict, {}, None, None, 10, 1.0, truth=truth)

    beyond, within, reached = row("lossy"), row("conformant"), row("lossy", declared="lossy")
    assert beyond.meets and beyond.beyond_reach and not beyond.false_alarm and not beyond.miss
    assert within.meets and not within.beyond_reach and not within.miss
    assert reached.meets and not reached.beyond_reach
    assert (
        row("non-conformant").false_alarm and row("lossy", truth=None).false_alarm
    )  # worse than it is; a correct one found lossy
    assert row("conformant", declared="lossy").miss
    text = render_markdown([beyond, within, row("lossy", truth=None)], "standard")
    assert "lossy (found beyond its declared reach)" in text and "**FALSE ALARM**" in text
    assert "false alarms: 1 in 1 runs of correct samplers" in text  # the two lossy members are not correct samplers


def test_a_bug_conformant_below_the_budget_it_is_declared_catchable_at_is_not_marked_missed():
    from specverify.zoo._matrix import MatrixRow, render_markdown

    def row(budget):
        return MatrixRow("bf16-x", 0, "lossy", budget, ["fit"], "conformant", {}, None, None, 10, 1.0)

    text = render_markdown([row("standard")], "quick")
    assert "conformant (not due: caught from standard)" in text and "**missed**" not in text
    assert "0 of 0 runs of bugs declared catchable at this budget are caught" in text
    assert "conformant **missed**" in render_markdown([row("quick")], "quick")


def test_at_a_tv_budget_the_shape_fit_stops_passing_shapes_at_futility_looks_and_still_claims_the_tv():
    """A shape's experiment spans several units at TV 0.006 (a look waits for the unit that passes
    it): a conforming sampler's shapes stop early, the claim is still the asked TV's, and the same
    result comes from two workers."""
    tv, results = 0.006, []
    for workers in (1, 2):
        isolation = "in-process" if workers == 1 else "process"  # several workers run isolated
        result = specverify.check(
            REFERENCE, tv=tv, select=["fit.every-shape*"], isolation=isolation, workers=workers, seed=3
        )
        (check,) = result.checks
        shapes = check.evidence["futility_by_shape"]
        assert check.status == "pass" and check.min_detectable_tv <= tv * 1.15, check.message
        assert len(shapes) == len(check.evidence["shapes"]) and all(s is not None for s in shapes)
        for (
            s
        ) in shapes:  # a look waits for the unit that passes it: a stop is at a unit's end, at or past the first look
            assert s["stopped_at"] is None or (s["stopped_at"] % UNIT_ROWS == 0 and s["stopped_at"] >= s["looks"][0]), s
        assert (
            sum(s["stopped_at"] is not None for s in shapes) >= len(shapes) // 2
        )  # under the null most stop at a look
        assert (
            check.samples == sum(s["stopped_at"] or s["final"] for s in shapes) < 0.8 * sum(s["final"] for s in shapes)
        )
        assert "futility looks stopped" in check.message
        results.append({k: v for k, v in check.to_json().items() if k != "duration_s"})
    assert results[0] == results[1]


def test_at_a_tv_budget_a_shape_fit_failure_is_not_stopped_by_a_look():
    from specverify.zoo import ZOO

    result = specverify.check(
        ZOO["lossy-at-four-drafts"], tv=0.006, select=["fit.every-shape*"], isolation="in-process", seed=3
    )
    (check,) = result.checks
    assert check.status == "fail" and check.finding == "loss" and check.evidence["where"].startswith("K=4"), (
        check.message
    )
    vocab = int(re.match(r"K=4, V=(\d+),", check.evidence["where"]).group(1))
    (failing,) = [
        s for s, shape in zip(check.evidence["futility_by_shape"], check.evidence["shapes"]) if shape == [4, vocab]
    ]
    assert failing["stopped_at"] is None  # the failing shape ran to its final sample, which its repro draws
    assert f"samples={failing['final']}," in check.evidence["repro"]


def test_at_a_tv_budget_the_depth_tiers_passing_tests_stop_at_futility_looks_and_still_claim_the_tv():
    tv, results = 0.006, []
    for workers in (1, 2):
        isolation = "in-process" if workers == 1 else "process"
        result = specverify.check(
            REFERENCE, tv=tv, select=["fit.conditional[[]random]"], isolation=isolation, workers=workers, seed=1
        )
        (check,) = result.checks
        depth = check.evidence["depth"]
        assert check.status == "pass" and check.min_detectable_tv <= tv * 1.15, check.message
        assert depth["deep_examples"] >= 2 and depth["deep_stopped"] >= 1, depth  # under the null most stop at a look
        assert f"({depth['deep_stopped']} ended early by a futility look)" in check.message
        results.append(reproducible(check.to_json()))
    assert results[0] == results[1]
