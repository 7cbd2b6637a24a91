"""Under the null, gof_test's p-values are uniform (or valid, where the test is discrete).

For every path of gof_test (G statistic, pooled cells with the rare-cell tail, near-deterministic
law, grouped forms, Monte Carlo, exact), 10,000 count vectors are drawn from the exact law and
tested.  Asserted, with tolerances that a correct implementation exceeds with probability below
1e-6 per assertion (see _stats_sim):

* validity: ``sup_u (F(u) - u)`` of the p-values is within the one-sided DKW bound (plus, for the
  chi-square approximations, a stated model error of 0.01);
* for the continuous paths, uniformity: the two-sided KS distance is within the DKW bound (+ 0.01);
* rejections at 1e-2 and 1e-3 are within binomial bounds around the nominal rate (up to 25% model
  error above it for the chi-square approximations, none for exact and Monte Carlo p-values).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest
from _stats_sim import (
    distance_from_uniform,
    dkw_one_sided,
    dkw_two_sided,
    draw,
    excess_over_uniform,
    fewest_rejections,
    most_rejections,
    pvalues,
    rng,
)

from specverify.stats import gof_test

CHECKS = 10_000


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    probs: np.ndarray
    totals: int | list[int]
    method: str
    alpha: float | None = None  # the decision level handed to gof_test (selects Monte Carlo)
    approximate: bool = True  # chi-square approximation (model error allowed) or exactly valid
    continuous: bool = True  # p-values spread over (0, 1) rather than on a coarse lattice


def _dirichlet(name: str, shape: tuple[int, ...], concentration: float = 2.0) -> np.ndarray:
    return rng("law", name).dirichlet(np.full(shape[-1], concentration), size=shape[:-1] or None)


def _with_small_cells(large: np.ndarray, small: list[float]) -> np.ndarray:
    """A law with large cells and cells of the given (tiny) probabilities."""
    small_arr = np.array(small)
    return np.concatenate([large / large.sum() * (1 - small_arr.sum()), small_arr])


SCENARIOS = [
    Scenario("single, large counts", _dirichlet("single", (12,)), 20_000, "g-test"),
    # expected counts 8, 4, 2, 1, 0.4, 0.2 beside ten large cells: one pool and a rare cell
    Scenario(
        "single, pooled and rare cells",
        _with_small_cells(np.ones(10), [4e-3, 2e-3, 1e-3, 5e-4, 2e-4, 1e-4]),
        2_000,
        "g-test",
        continuous=False,
    ),
    # one outcome of probability ~1: only the rare-cell tail can see anything
    Scenario(
        "near-deterministic, rare cells only",
        _with_small_cells(np.ones(1), [1e-6] * 15),
        100_000,
        "g-test",
        approximate=False,
        continuous=False,
    ),
    # a dominant outcome, a pool of tiny outcomes (exact binomial part) and a rare cell
    Scenario(
        "near-deterministic, pooled",
        _with_small_cells(np.ones(1), [1e-4] * 15),
        10_000,
        "g-test",
        approximate=False,
        continuous=False,
    ),
    Scenario("grouped, large counts", _dirichlet("grouped", (6, 8)), 2_000, "g-test"),
    Scenario(
        "grouped, pooled and rare cells",
        np.stack([_with_small_cells(row, [1e-2, 6e-3, 3e-3, 1e-3]) for row in _dirichlet("grouped-small", (6, 8))]),
        [500, 800, 1_000, 600, 700, 900],
        "g-test",
        continuous=False,
    ),
    Scenario(
        "Monte Carlo, single",
        _dirichlet("mc", (5,), 4.0),
        20,
        "monte-carlo",
        alpha=1e-2,
        approximate=False,
        continuous=False,
    ),
    Scenario(
        "Monte Carlo, grouped",
        _dirichlet("mc-grouped", (2, 4), 4.0),
        [12, 9],
        "monte-carlo",
        alpha=1e-2,
        approximate=False,
        continuous=False,
    ),
    Scenario("exact, three cells", np.array([0.6, 0.3, 0.1]), 40, "exact", approximate=False, continuous=False),
]


BY_NAME = {s.name: s for s in SCENARIOS}


@functools.cache
def null_pvalues(name: str) -> np.ndarray:
    """P-values of CHECKS count vectors drawn from the scenario's exact law."""
    scenario = BY_NAME[name]
    observed = draw(rng("null", scenario.name), scenario.probs, scenario.totals, CHECKS)
    first = gof_test(observed[0], scenario.probs, alpha=scenario.alpha, random_state=0)
    assert first.method == scenario.method, f"{scenario.name} takes the {first.method} path"
    return pvalues(observed, scenario.probs, scenario.name, alpha=scenario.alpha)


@pytest.mark.parametrize("name", [s.name for s in SCENARIOS])
def test_pvalues_are_valid(name: str) -> None:
    model_error = 0.01 if BY_NAME[name].approximate else 0.0
    p = null_pvalues(name)
    assert excess_over_uniform(p) <= dkw_one_sided(p.size) + model_error


@pytest.mark.parametrize("name", [s.name for s in SCENARIOS if s.continuous])
def test_pvalues_are_uniform(name: str) -> None:
    """Continuous paths only: a discrete test's p-values are valid (above), not uniform."""
    p = null_pvalues(name)
    assert distance_from_uniform(p) <= dkw_two_sided(p.size) + 0.01


@pytest.mark.parametrize("level", [1e-2, 1e-3])
@pytest.mark.parametrize("name", [s.name for s in SCENARIOS])
def test_rejection_rate_within_binomial_bounds(name: str, level: float) -> None:
    scenario, p = BY_NAME[name], null_pvalues(name)
    rejections = int((p <= level).sum())
    assert rejections <= most_rejections(p.size, level * (1.25 if scenario.approximate else 1.0))
    if scenario.continuous:
        assert rejections >= fewest_rejections(p.size, level * 0.75)
