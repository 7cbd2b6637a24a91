"""The ten-line logits adapter of examples/ runs as documented, and its engine is lossless."""

from __future__ import annotations

import specverify
from specverify._budgets import get_budget


def test_the_example_logits_engine_passes_the_contract_support_and_a_law_check(load_by_path):
    sampler = load_by_path("examples/my_logits_adapter.py").sampler
    result = specverify.check(
        sampler, budget=get_budget("quick"), seed=0, select=["contract", "support", "fit.conditional[[]random]"]
    )
    statuses = {c.id: c.status for c in result.checks}
    assert set(statuses.values()) == {"pass"} and "fit.conditional[random]" in statuses, [
        (c.id, c.message) for c in result.checks
    ]
    assert result.verdict == "inconclusive"  # a subset, never a pass
    assert list(result.run["sampler"]["capabilities"]["params"]) == ["temperature", "top_k"]
