"""Per-request seeds at the step level: the logits reference passes the three seed checks, each
seeding bug of the zoo fails the ones declared to catch it, samplers without seeds skip them.

Exact checks: a correct sampler never fails them but for the stated 1e-12 binomial tail."""

from __future__ import annotations

import pytest

from specverify import check

SEEDS = ["contract.seeds[*]"]


def outcome(spec: str) -> dict[str, str]:
    result = check(spec, budget="quick", select=SEEDS, isolation="in-process")
    return {c.id: c.status for c in result.checks}


def test_the_logits_reference_honours_per_request_seeds():
    assert set(outcome("specverify.samplers:logits_reference").values()) == {"pass"}


@pytest.mark.parametrize(
    ("member", "caught"),
    [
        ("seeds_ignored", {"contract.seeds[same-seed]", "contract.seeds[batch-placement]"}),
        ("seed_shared_across_batch", {"contract.seeds[different-seeds]", "contract.seeds[batch-placement]"}),
        ("seed_offset_by_row", {"contract.seeds[same-seed]", "contract.seeds[batch-placement]"}),
    ],
)
def test_each_seeding_bug_fails_exactly_the_checks_that_see_it(member, caught):
    statuses = outcome(f"specverify.zoo:{member}")
    assert {i for i, s in statuses.items() if s == "fail"} == caught
    assert {i for i, s in statuses.items() if s == "pass"} == set(statuses) - caught


def test_a_sampler_without_seeds_skips_them_with_the_reason():
    result = check("specverify.samplers:reference", budget="quick", select=SEEDS, isolation="in-process")
    assert {c.status for c in result.checks} == {"skip"} and "declares no per-request seeds" in result.checks[0].message


def test_seeds_reach_the_sampler_through_its_worker():
    result = check(
        "specverify.zoo:seed_shared_across_batch", budget="quick", select=["contract.seeds[different-seeds]"]
    )
    assert result.run["isolation"]["mode"] == "process"
    [finding] = result.checks
    assert finding.status == "fail" and "64 of 64 pairs" in finding.message and finding.p_value < 1e-12
