"""The worked example of docs/adapters.md: the ten-line adapter meets the contract and keeps the law."""

from __future__ import annotations

import pytest

import specverify


@pytest.fixture(scope="module")
def example(load_by_path):
    return load_by_path("examples/my_adapter.py")


def test_example_adapter_passes_the_exact_and_contract_checks(example):
    # The full quick battery (docs/adapters.md quotes its verdict) takes about 40 s of CPU; these
    # families are the ones an adapter's translation errors break first, at a fraction of the cost,
    # with one test of the target's own law, without which no subset can be called conformant.
    result = specverify.check(
        example.sampler,
        budget="quick",
        select=[
            "contract.output",
            "contract.determinism",
            "contract.one-hot",
            "support.*",
            "exact.emitted*",
            "fit.step[chain]",
        ],
    )
    failures = [(c.id, c.message) for c in result.checks if c.status not in ("pass", "skip")]
    assert failures == []
    assert result.verdict == "inconclusive" and "subset" in result.verdict_reason  # a subset never passes
    passed = {c.id for c in result.checks if c.status == "pass"}
    assert passed >= {"exact.emitted[seed-chain]", "support.zero-target[zeros]"}
