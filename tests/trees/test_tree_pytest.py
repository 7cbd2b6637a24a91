"""The pytest plugin on a tree sampler: the ``trees`` family, one item per check, a subset never a pass."""

from __future__ import annotations

# Imported here, before pytester snapshots sys.modules: torch cannot be imported twice in a process.
import specverify._pytest  # noqa: F401
import specverify.zoo  # noqa: F401


def test_the_plugin_runs_a_tree_sampler_one_item_per_check_and_a_subset_never_passes(pytester):
    select = "--specverify-only=trees.support[[]zero-coins]"
    result = pytester.runpytest(
        "--specverify-sampler=specverify.samplers:tree_reference",
        select,
        "--specverify-budget=quick",
        "-v",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*specverify::trees.support[[]zero-coins[]] PASSED*",
            "*specverify::verdict FAILED*",
            "*trees.output[[]shapes[]]*",
            "*verdict: inconclusive*",
        ]
    )
    member = pytester.runpytest(
        "--specverify-sampler=specverify.zoo:tree_coin_zero_accepts_zero_mass",
        select,
        "--specverify-budget=quick",
        "-p",
        "no:cacheprovider",
    )
    member.assert_outcomes(failed=2)
    member.stdout.fnmatch_lines(["*trees.support[[]zero-coins[]]: FAIL (support)*", "*verdict: non-conformant*"])


def test_the_one_line_helper_runs_a_tree_sampler(pytester):
    pytester.makepyfile(
        """
        import specverify
        test_tree = specverify.pytest_battery("specverify.samplers:tree_reference", budget="quick", \
only=["trees.output*"])
        """
    )
    result = pytester.runpytest("-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)  # test_tree[verdict]: a subset never passes
    result.stdout.fnmatch_lines(
        [
            "*test_tree[[]trees.output[[]shapes[]][]] PASSED*",
            "*test_tree[[]trees.output[[]generated[]][]] PASSED*",
            "*test_tree[[]verdict[]] FAILED*",
        ]
    )
