"""The ten-line loop adapter of examples/ runs as documented, and its engine is lossless."""

from __future__ import annotations

from specverify import check_loop
from specverify._budgets import get_budget


def test_the_example_engine_passes_the_exact_checks_and_a_law_check(load_by_path):
    loop = load_by_path("examples/my_loop_adapter.py").loop
    coarse = get_budget("quick").with_(tv=0.1)
    result = check_loop(
        loop,
        budget=coarse,
        select=["loop.output", "loop.determinism", "loop.seeds", "loop.law[plain]", "loop.law[top-k]"],
    )
    statuses = {c.id: c.status for c in result.checks}
    assert statuses == {
        "loop.output": "pass",
        "loop.determinism": "pass",
        "loop.seeds": "pass",
        "loop.law[plain]": "pass",
        "loop.law[top-k]": "skip",
    }, [(c.id, c.message) for c in result.checks]
    assert result.run["sampler"]["parameters"] == ["temperature", "seeds"]
