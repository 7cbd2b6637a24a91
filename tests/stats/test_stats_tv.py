"""The TV estimate of a lossy sampler: its interval covers the planted TV (0 included) at least as
often as stated, and its point estimate is less biased than the plug-in distance."""

from __future__ import annotations

import numpy as np
import pytest
from _stats_sim import rate_interval, rng

from specverify.stats import least_favourable, tv_distance, tv_estimate

UNIFORM16 = np.full(16, 1 / 16)
#: 8 common outcomes and 56 rare ones: at 500 samples most rare outcomes are never seen.
SPARSE64 = np.r_[np.full(8, 1.0), np.full(56, 0.002)]
SPARSE64 = SPARSE64 / SPARSE64.sum()


def _two_cells(law: np.ndarray, tv: float) -> np.ndarray:
    """A concentrated deviation: ``tv`` moved from one cell to another."""
    q = law.copy()
    q[0] -= tv
    q[1] += tv
    return q


COVERAGE = [
    # name, law, alternative, samples, runs (in CI; the slow variant runs 1,500 of each)
    ("TV 0", UNIFORM16, UNIFORM16, 20_000, 300),
    ("TV 0.005 spread", UNIFORM16, least_favourable(UNIFORM16, 0.005), 20_000, 0),
    ("TV 0.005 on two cells", UNIFORM16, _two_cells(UNIFORM16, 0.005), 20_000, 0),
    ("TV 0.02 spread", UNIFORM16, least_favourable(UNIFORM16, 0.02), 20_000, 150),
    ("sparse, TV 0", SPARSE64, SPARSE64, 500, 300),
    ("sparse, TV 0.05", SPARSE64, least_favourable(SPARSE64, 0.05), 500, 0),
    (
        "grouped, TV 0.01 in one group",
        np.stack([UNIFORM16] * 3),
        np.stack([_two_cells(UNIFORM16, 0.03), UNIFORM16, UNIFORM16]),
        5_000,
        100,
    ),
]


def _estimates(name: str, law: np.ndarray, alternative: np.ndarray, samples: int, runs: int):
    generator = rng("tv", name)
    if law.ndim == 1:
        observed = generator.multinomial(samples, alternative, size=runs)
    else:
        observed = np.stack([generator.multinomial(samples, row, size=runs) for row in alternative], axis=1)
    return [tv_estimate(o, law, random_state=rng("tv-resample", name, i)) for i, o in enumerate(observed)]


def _check_coverage_and_bias(name: str, law: np.ndarray, alternative: np.ndarray, samples: int, runs: int) -> None:
    truth = tv_distance(alternative * 1e12, law)  # weighted over groups of equal totals
    estimates = _estimates(name, law, alternative, samples, runs)
    covered = np.mean([e.low <= truth <= e.high for e in estimates])
    assert covered >= rate_interval(runs, 0.99)[0]
    # the point estimate's bias is small next to the interval (measured values: docs/statistics.md)
    bias = np.mean([e.estimate for e in estimates]) - truth
    half_width = np.mean([(e.high - e.low) / 2 for e in estimates])
    assert abs(bias) <= 0.5 * half_width


FAST = [c for c in COVERAGE if c[4]]


@pytest.mark.parametrize(("name", "law", "alternative", "samples", "runs"), FAST, ids=[c[0] for c in FAST])
def test_interval_covers_the_planted_tv(
    name: str, law: np.ndarray, alternative: np.ndarray, samples: int, runs: int
) -> None:
    _check_coverage_and_bias(name, law, alternative, samples, runs)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "law", "alternative", "samples", "runs"), COVERAGE, ids=[c[0] for c in COVERAGE])
def test_interval_covers_the_planted_tv_thoroughly(
    name: str, law: np.ndarray, alternative: np.ndarray, samples: int, runs: int
) -> None:
    """1,500 runs per deviation (about 80 s in all)."""
    _check_coverage_and_bias(f"{name}, thorough", law, alternative, samples, 1_500)


def test_estimate_lies_in_its_interval_and_interval_in_unit_range() -> None:
    for e in _estimates("ranges", SPARSE64, least_favourable(SPARSE64, 0.3), 200, 50):
        assert 0.0 <= e.low <= e.estimate <= e.high <= 1.0
        assert e.confidence == 0.99


def test_tv_distance_weights_groups_by_their_samples() -> None:
    law = np.array([[0.5, 0.5], [0.5, 0.5]])
    observed = np.array([[100, 0], [50, 50]])  # TV 0.5 on 100 samples, 0 on 100
    assert tv_distance(observed, law) == pytest.approx(0.25)
