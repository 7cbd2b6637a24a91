"""Runs shared by the report tests: a few fast checks of broken samplers and of the reference."""

from __future__ import annotations

import pytest

import specverify
from specverify import RunResult

from ._broken_samplers import abs_residual, raises_on_long_drafts, replacement_from_target
from ._runs import hostile_run, real_run

_SPEC = "tests.report._broken_samplers:"


@pytest.fixture(scope="session")
def lossy_run() -> RunResult:
    """Replacement drawn from p: fails exactly (uniforms), on the emitted law and on fit, with plots."""
    return real_run(
        replacement_from_target,
        _SPEC + "replacement_from_target",
        [
            "contract.output",
            "exact.uniform-driven[random]",
            "exact.emitted[random]",
            "fit.conditional[zeros]",
            "efficiency.acceptance[random]",
            "shapes.edge-law[one-ulp]",
            "shapes.conditional[262144x1]",
        ],  # one it passes; one a quick budget skips
    )


@pytest.fixture(scope="session")
def support_run() -> RunResult:
    """|p - q| residual: emits a token of target probability 0, shrunk to a smallest case."""
    return real_run(abs_residual, _SPEC + "abs_residual", ["support.zero-target[zeros]"])


@pytest.fixture(scope="session")
def raising_run() -> RunResult:
    """A sampler that raises, with markup in its name and its exception text."""
    return real_run(
        raises_on_long_drafts, _SPEC + "raises_on_long_drafts", ["contract.output", "contract.seed-sensitivity"]
    )


@pytest.fixture(scope="session")
def reference_run() -> RunResult:
    return real_run(
        specverify.reference,
        "specverify.samplers:reference",
        # a subset holding a test of the target's law (fit.first-token), so it can pass the sampler;
        # one at V = 1,025 (a second reach class of the guarantee), one a quick budget skips
        [
            "contract.output",
            "exact.uniform-driven[zeros]",
            "exact.emitted[random]",
            "fit.first-token[chain]",
            "efficiency.acceptance[random]",
            "shapes.edge-law[one-ulp]",
            "shapes.conditional[262144x1]",
        ],
    )


@pytest.fixture(scope="session")
def hostile() -> RunResult:
    return hostile_run()


@pytest.fixture(scope="session")
def float_edge_run() -> RunResult:
    """A zoo member whose fallback reads the next row where the residual vanishes: float-edge results
    on the two sub-ulp edge cases (the edge-law check runs all its kinds), nothing failing."""
    from specverify.zoo import ZOO

    return real_run(
        ZOO["zero-residual-next-row"],
        "specverify.zoo:zero_residual_next_row",
        ["shapes.edge-law[sub-ulp-residual]", "contract.output"],
    )
