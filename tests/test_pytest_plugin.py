"""The pytest plugin: readable ids, failures with evidence, expected failures, xdist, the helper."""

from __future__ import annotations

import json

import pytest

# Imported here, before pytester snapshots sys.modules: torch cannot be imported twice in a process.
import specverify._pytest  # noqa: F401
import specverify.zoo  # noqa: F401

QUICK = ("--specverify-budget=quick", "-p", "no:cacheprovider")


def test_reference_passes_with_readable_ids(pytester):
    result = pytester.runpytest(
        "--specverify-sampler=specverify.samplers:reference", "--specverify-only=contract", "-v", *QUICK
    )
    result.assert_outcomes(passed=6, failed=1)  # the subset's verdict item: a subset never passes
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*specverify: sampler specverify.samplers:reference*",
            "*specverify::contract.output PASSED*",
            "*specverify::verdict FAILED*",
            "*verdict: inconclusive*",  # a subset can fail a sampler, not pass it
            "*a subset can fail a sampler, not pass it*",
        ]
    )


def test_a_sampler_module_in_the_current_directory_is_found(pytester):
    # as `specverify check` finds it: mod.py beside where pytest runs, not installed, not on PYTHONPATH
    pytester.makepyfile(seed_sampler="from specverify.samplers import reference as sampler\n")
    result = pytester.runpytest(
        "--specverify-sampler=seed_sampler:sampler", "--specverify-only=contract.output", *QUICK
    )
    result.assert_outcomes(passed=1, failed=1)  # the check, and the subset's verdict item
    assert "no module named" not in result.stdout.str() + result.stderr.str()


def test_a_module_that_is_nowhere_says_where_it_was_looked_for(pytester):
    result = pytester.runpytest("--specverify-sampler=not_here_at_all:sampler", *QUICK)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*no module named 'not_here_at_all'*looked in*PYTHONPATH*"])


def test_the_summary_explains_items_against_results(pytester):
    result = pytester.runpytest(
        "--specverify-sampler=specverify.samplers:reference", "--specverify-only=fit.model*", *QUICK
    )
    result.stdout.fnmatch_lines(
        ["*verdict: inconclusive*", "*test items ran, one per planned check; the verdict counts their * results*"]
    )


def test_broken_sampler_fails_with_evidence(pytester):
    result = pytester.runpytest(
        "--specverify-sampler=specverify.zoo:ignores_generator", "--specverify-only=contract.determinism", *QUICK
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["*contract.determinism: FAIL (contract)*", "*seeded alike differ*", "*verdict: non-conformant*"]
    )


def test_expected_failures_file(pytester):
    xfail = pytester.makefile(".txt", xfails="contract.determinism  # uses the global RNG on purpose\n")
    result = pytester.runpytest(
        "--specverify-sampler=specverify.zoo:ignores_generator",
        "--specverify-only=contract.determinism",
        f"--specverify-xfail={xfail}",
        *QUICK,
    )
    result.assert_outcomes(xfailed=1, failed=1)


def test_environment_variable_and_json_with_the_clis_run_record(pytester, monkeypatch, tmp_path):
    from specverify._cli import main

    monkeypatch.setenv("SPECVERIFY_SAMPLER", "specverify.samplers:reference")
    out = tmp_path / "run.json"
    result = pytester.runpytest("--specverify-only=contract.one-hot", f"--specverify-json={out}", *QUICK)
    result.assert_outcomes(passed=1, failed=1)
    data = json.loads(out.read_text())
    assert [c["id"] for c in data["checks"]] == ["contract.one-hot"] and data["run"]["select"] == ["contract.one-hot"]
    # the same Run as the CLI's: the same record, field for field, for the same sampler and selection
    cli = tmp_path / "cli.json"
    assert (
        main(
            [
                "check",
                "specverify.samplers:reference",
                "--budget",
                "quick",
                "--only",
                "contract.one-hot",
                "--json",
                str(cli),
                "--no-progress",
                "-q",
            ]
        )
        == 3
    )
    expected = json.loads(cli.read_text())
    assert list(data["run"]) == list(expected["run"])
    varying = {"started", "timing", "sampler_seconds"}
    assert {k: v for k, v in data["run"].items() if k not in varying} == {
        k: v for k, v in expected["run"].items() if k not in varying
    }
    assert (
        data["checks"][0]["p_value"] == expected["checks"][0]["p_value"]
        and data["verdict"] == expected["verdict"] == "inconclusive"
    )


def test_xdist_two_workers_aggregate_on_the_controller(pytester, tmp_path):
    out = tmp_path / "run.json"
    result = pytester.runpytest_subprocess(
        "-n",
        "2",
        "--specverify-sampler=specverify.samplers:reference",
        "--specverify-only=contract",
        f"--specverify-json={out}",
        *QUICK,
    )
    result.assert_outcomes(passed=6, failed=1)
    data = json.loads(out.read_text())
    assert len(data["checks"]) == 6 and all(c["status"] == "pass" for c in data["checks"])
    assert data["finished"] and data["run"]["sampler_calls"] > 0  # the workers' counters, shipped with their results
    assert data["run"]["timing"]["harness_seconds"] is None  # the sampler's time was spent in parallel, elsewhere


def test_bad_spec_is_a_usage_error(pytester):
    result = pytester.runpytest("--specverify-sampler=nope_module:x", *QUICK)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*no module named 'nope_module'*"])
    nothing = pytester.runpytest(
        "--specverify-sampler=specverify.samplers:reference", "--specverify-only=fit.nothing", *QUICK
    )
    assert nothing.ret == pytest.ExitCode.USAGE_ERROR
    nothing.stderr.fnmatch_lines(["*specverify: no check matches*fit.nothing*"])


def test_one_line_helper_in_a_users_test_file(pytester):
    pytester.makepyfile(
        """
        import specverify
        test_mine = specverify.pytest_battery("specverify.samplers:reference", budget="quick", only=["contract.o*"])
        """
    )
    result = pytester.runpytest("-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)  # test_mine[verdict]: a subset never passes
    result.stdout.fnmatch_lines(["*test_mine[[]contract.output[]] PASSED*", "*test_mine[[]verdict[]] FAILED*"])


def test_the_helpers_verdict_judges_a_whole_battery_and_names_the_checks_it_did_not_see(pytester):
    path = pytester.makepyfile(
        """
        import specverify
        from specverify.samplers import reference
        test_mine = specverify.pytest_battery(reference, budget="quick")
        """
    )
    result = pytester.runpytest(
        "-v", "-p", "no:cacheprovider", f"{path.name}::test_mine[contract.one-hot]", f"{path.name}::test_mine[verdict]"
    )
    result.assert_outcomes(passed=1, failed=1)  # a whole battery's verdict: no pass on the one check that ran
    result.stdout.fnmatch_lines(
        [
            "*test_mine[[]contract.one-hot[]] PASSED*",
            "*test_mine[[]verdict[]] FAILED*",
            "*verdict: inconclusive*",
            "*planned checks have no result in this process*",
        ]
    )


def test_expected_failures_match_ids_with_brackets(pytester):
    xfail = pytester.makefile(".txt", xfails="fit.conditional[random]  # draws the replacement from p\n")
    result = pytester.runpytest(
        "--specverify-sampler=specverify.zoo:replacement_from_target",
        "--specverify-only=fit.conditional[random]",
        f"--specverify-xfail={xfail}",
        *QUICK,
    )
    result.assert_outcomes(xfailed=1, failed=1)


def test_a_subset_that_includes_a_target_law_test_still_never_passes(pytester):
    result = pytester.runpytest(
        "--specverify-sampler=specverify.zoo:ignores_generator", "--specverify-only=fit.first-token[random]", *QUICK
    )
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*verdict at best inconclusive*contract.determinism*", "*verdict: inconclusive*"])


def test_the_pytest_plugin_takes_a_tv(pytester, tmp_path):
    out = tmp_path / "run.json"
    args = (
        "--specverify-sampler=specverify.samplers:reference",
        "--specverify-only=contract.output",
        "-p",
        "no:cacheprovider",
    )
    result = pytester.runpytest(*args, "--specverify-tv=0.04", f"--specverify-json={out}")
    result.assert_outcomes(passed=1, failed=1)  # the check passes; a subset's verdict never does
    assert json.loads(out.read_text())["run"]["budget"]["name"] == "tv=0.04"
    bad = pytester.runpytest(*args, "--specverify-tv=3")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--tv must lie in (0, 1)*"])


def test_the_plugin_runs_at_quick_unless_told_and_says_so(pytester):
    """The README's pytest line, without a budget, is quick (a standard run of a row-by-row sampler
    is hours); the header names the budget, and --specverify-budget=standard still picks standard."""
    only = ("--specverify-sampler=specverify.samplers:reference", "--specverify-only=contract.output")
    result = pytester.runpytest(*only, "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*specverify: budget quick (detects TV >= 0.05*"])
    result = pytester.runpytest(*only, "--specverify-budget=standard", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*specverify: budget standard (detects TV >= 0.01*"])
    # quick on a sampler called one row at a time is sized for TV 0.1: the header says what the run uses, and why
    one_row = ("--specverify-sampler=specverify.zoo:one_row_per_call", "--specverify-only=contract.output")
    result = pytester.runpytest(*one_row, "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*specverify: budget quick (detects TV >= 0.1 *", "*one row at a time*"])


def test_the_helper_runs_at_quick_unless_told():
    import inspect

    from specverify._pytest import battery

    assert inspect.signature(battery).parameters["budget"].default == "quick"


def test_a_sampler_that_cannot_be_called_as_declared_is_one_usage_error(pytester):
    pytester.makepyfile(two_args="def sampler(target_probs, draft_probs):\n    return target_probs\n")
    result = pytester.runpytest("--specverify-sampler=two_args:sampler", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*two_args:sampler cannot be called as a chain sampler*takes 2 positional arguments*"])
