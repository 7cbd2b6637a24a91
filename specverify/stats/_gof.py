"""Goodness of fit of observed counts against an exactly known law.

One primitive, :func:`gof_test`, covers every statistical check: a single multinomial (the law of
the first token) and a product of multinomials (a law per group: per draft sequence, per prefix, per
batch row), each group with its own observed total.

Choices, each for a reason (see ../shared/research/statistics.md):

* the G statistic (likelihood ratio), Williams-corrected: same local power as Pearson's X^2 and far
  better tail calibration; Pearson's statistic is reported alongside for comparison;
* cells are merged by *expected* counts only (never observed ones, which would bias the test);
* an observation in a cell of null probability 0 is an exact failure (p-value 0), no statistics;
* where expected counts are small, a Monte Carlo p-value from multinomial draws, when the decision
  level is coarse enough for it to resolve; an exact test when the support is tiny.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import special, stats

from ._power import min_detectable_tv

__all__ = ["GoodnessOfFit", "gof_test"]

#: Merge cells until each merged cell expects at least this many observations.
MIN_EXPECTED = 5.0
#: Largest number of multinomial compositions the exact test enumerates.
EXACT_LIMIT = 1_000_000
#: Largest number of simulated cells (draws x cells) a Monte Carlo p-value may cost.
MONTE_CARLO_LIMIT = 4_000_000


@dataclasses.dataclass(frozen=True)
class GoodnessOfFit:
    """Result of :func:`gof_test`.

    Attributes:
        statistic: the test statistic (Williams-corrected G for ``"g-test"``).
        pvalue: probability under the null of a statistic at least this large.
        df: degrees of freedom after merging.
        method: ``"g-test"``, ``"pearson"``, ``"monte-carlo"``, ``"exact"`` or ``"impossible"``
            (an observation where the null puts no mass).
        samples: observations tested.
        cells: cells tested after merging.
        merged_mass: null probability of cells merged with others; a deviation inside them is
            invisible, so it adds to the smallest detectable TV.
        impossible: observations in cells of null probability 0.
        pearson_statistic, pearson_pvalue: Pearson's X^2 on the same merged cells, for comparison.
        rare_observed, rare_expected: the cells too rare to pool into a cell expecting
            MIN_EXPECTED observations, tested together by an exact Poisson tail (an excess there
            is mass moved into outcomes that should almost never occur).
    """

    statistic: float
    pvalue: float
    df: int
    method: str
    samples: int
    cells: int
    merged_mass: float
    impossible: int
    pearson_statistic: float
    pearson_pvalue: float
    rare_observed: int = 0
    rare_expected: float = 0.0

    def min_detectable_tv(self, alpha: float, power: float = 0.99) -> float:
        """Smallest TV deviation of the tested law this test detects with ``power`` at ``alpha``.

        Worst case over all alternatives: a deviation hidden inside pooled cells adds at most their
        null mass.  With no cells left to compare (one dominant outcome), it is the mass that must
        move into the rare outcomes for their Poisson tail to see it.
        """
        if self.method == "impossible":
            return 0.0
        parts = (1 if self.df else 0) + (1 if self.rare_expected > 0 else 0)
        level = alpha / max(1, parts)
        if self.df:
            return min(1.0, min_detectable_tv(self.samples, self.df, level, power) + self.merged_mass)
        if self.rare_expected > 0:
            return min(1.0, _rare_shift(self.rare_expected, self.samples, level, power) + self.merged_mass)
        if self.samples:
            # one possible outcome per group: any deviation puts mass on impossible outcomes, seen
            # unless every sample misses it, (1 - tv) ** n <= 1 - power
            return min(1.0, -math.log1p(-power) / self.samples + self.merged_mass)
        return 1.0


def gof_test(
    observed: np.ndarray,
    probs: np.ndarray,
    *,
    alpha: float | None = None,
    method: str = "auto",
    random_state: np.random.Generator | int | None = None,
) -> GoodnessOfFit:
    """Test observed counts against a known law.

    Args:
        observed: counts, shape ``[C]`` or ``[G, C]`` (one multinomial per group).
        probs: the null law, same shape; each row is normalised here.
        alpha: the level the p-value will be compared with; decides whether a Monte Carlo
            p-value can resolve it (it needs about ``50 / alpha`` draws).
        method: ``"auto"``, ``"g-test"``, ``"pearson"``, ``"monte-carlo"`` or ``"exact"``.
        random_state: seed or generator for Monte Carlo draws (deterministic when given).
    """
    observed = np.atleast_2d(np.asarray(observed, dtype=np.int64))
    probs = np.atleast_2d(np.asarray(probs, dtype=np.float64))
    if observed.shape != probs.shape:
        raise ValueError(f"observed {observed.shape} and probs {probs.shape} differ in shape")
    if (observed < 0).any() or not np.isfinite(probs).all() or (probs < 0).any():
        raise ValueError("counts must be >= 0 and probabilities finite and >= 0")
    totals = observed.sum(axis=1)
    live = totals > 0
    observed, probs, totals = observed[live], probs[live], totals[live]
    samples = int(totals.sum())
    if samples == 0:
        return GoodnessOfFit(0.0, 1.0, 0, "g-test", 0, 0, 0.0, 0, 0.0, 1.0)
    sums = probs.sum(axis=1, keepdims=True)
    if (sums <= 0).any():
        raise ValueError("a group with observations has a null law of zero mass")
    probs = probs / sums

    impossible = int(observed[probs == 0].sum())
    if impossible:
        return GoodnessOfFit(math.inf, 0.0, 0, "impossible", samples, 0, 0.0, impossible, math.inf, 0.0)

    expected = totals[:, None] * probs
    if method == "auto":
        method = _choose_method(observed, expected, alpha)
    if method == "exact":
        return _exact(observed[0], probs[0])
    if method == "monte-carlo":
        return _monte_carlo(observed, probs, totals, alpha, random_state)
    if method not in ("g-test", "pearson"):
        raise ValueError(f"unknown method {method!r}")
    return _asymptotic(observed, expected, totals, method)


def _choose_method(observed: np.ndarray, expected: np.ndarray, alpha: float | None) -> str:
    support = expected > 0
    if observed.shape[0] == 1 and support.sum() <= 3 and _compositions(int(observed.sum()), int(support.sum())) <= EXACT_LIMIT:
        return "exact"
    if expected[support].min() >= MIN_EXPECTED:
        return "g-test"
    if alpha is not None:
        draws = _monte_carlo_draws(alpha)
        if draws * support.sum() <= MONTE_CARLO_LIMIT:
            return "monte-carlo"
    return "g-test"


def _monte_carlo_draws(alpha: float | None) -> int:
    return 10_000 if alpha is None else max(2_000, math.ceil(50.0 / alpha))


def _compositions(n: int, k: int) -> int:
    return math.comb(n + k - 1, k - 1) if k > 0 else 1


def _g(observed: np.ndarray, expected: np.ndarray) -> np.ndarray:
    return 2.0 * special.xlogy(observed, observed / np.where(expected > 0, expected, 1.0)).sum(axis=-1)


def _merge_labels(expected: np.ndarray) -> tuple[np.ndarray, int | None]:
    """Label cells so that every merged cell expects >= MIN_EXPECTED.

    Small cells are pooled in increasing order of expected count.  What is left over (a pool that
    expects fewer than MIN_EXPECTED observations) becomes the *rare* cell, returned apart: it is
    never hidden inside a large cell, because mass a sampler moves into outcomes it should almost
    never produce is exactly what must be seen.
    """
    labels = np.arange(expected.size)
    small = np.flatnonzero(expected < MIN_EXPECTED)
    if small.size == 0:
        return labels, None
    small = small[np.argsort(expected[small], kind="stable")]
    group_start, running = 0, 0.0
    for position, cell in enumerate(small):  # loops over cells, never over samples
        running += expected[cell]
        if running >= MIN_EXPECTED:
            labels[small[group_start : position + 1]] = small[group_start]
            group_start, running = position + 1, 0.0
    leftover = small[group_start:]
    if leftover.size == 0:
        return labels, None
    labels[leftover] = leftover[0]
    return labels, int(leftover[0])


def _asymptotic(observed: np.ndarray, expected: np.ndarray, totals: np.ndarray, method: str) -> GoodnessOfFit:
    """G (or Pearson) on merged cells, plus an exact Poisson tail for the rare cells."""
    statistic = pearson = 0.0
    df = cells = 0
    merged_mass = 0.0
    rare_observed = rare_expected = 0.0
    samples = totals.sum()
    for row_obs, row_exp, total in zip(observed, expected, totals):  # loops over groups
        support = row_exp > 0
        row_obs, row_exp = row_obs[support], row_exp[support]
        labels, rare = _merge_labels(row_exp)
        size = labels.max() + 1
        obs = np.bincount(labels, weights=row_obs, minlength=size)
        exp = np.bincount(labels, weights=row_exp, minlength=size)
        in_merged = np.bincount(labels, minlength=size)[labels] > 1
        if rare is not None:
            rare_observed += obs[rare]
            rare_expected += exp[rare]
            in_merged |= labels == rare
            exp[rare] = 0.0  # tested apart
        merged_mass += float(row_exp[in_merged].sum()) / samples
        keep = exp > 0
        obs, exp = obs[keep], exp[keep]
        k = int(keep.sum())
        if k < 2:
            continue
        # the large cells are tested given their own total
        exp = exp * obs.sum() / exp.sum()
        williams = 1.0 + (k + 1.0) / (6.0 * max(obs.sum(), 1.0))
        statistic += float(_g(obs, exp)) / williams
        pearson += float(((obs - exp) ** 2 / exp).sum())
        df += k - 1
        cells += k
    rare_p = float(stats.poisson.sf(rare_observed - 1, rare_expected)) if rare_expected > 0 else 1.0
    g_p = float(stats.chi2.sf(statistic, df)) if df else 1.0
    x2_p = float(stats.chi2.sf(pearson, df)) if df else 1.0
    tests = (1 if df else 0) + (1 if rare_expected > 0 else 0)
    if tests == 2:  # Bonferroni over the two parts
        g_p, x2_p, rare_p = min(1.0, 2 * min(g_p, rare_p)), min(1.0, 2 * min(x2_p, rare_p)), min(1.0, 2 * rare_p)
    elif rare_expected > 0:
        g_p = x2_p = rare_p
    main = (pearson, x2_p) if method == "pearson" else (statistic, g_p)
    return GoodnessOfFit(
        statistic=main[0],
        pvalue=main[1],
        df=df,
        method=method,
        samples=int(samples),
        cells=cells,
        merged_mass=merged_mass,
        impossible=0,
        pearson_statistic=pearson,
        pearson_pvalue=x2_p,
        rare_observed=int(rare_observed),
        rare_expected=float(rare_expected),
    )


def _rare_shift(expected: float, samples: int, alpha: float, power: float) -> float:
    """Mass that must move into the rare cells for their Poisson test to see it with ``power``."""
    critical = stats.poisson.isf(alpha, expected) + 1  # reject when observed >= critical
    low, high = 0.0, max(1.0, critical) * 4
    while stats.poisson.sf(critical - 1, high) < power:
        high *= 2
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if stats.poisson.sf(critical - 1, mid) < power else (low, mid)
    return max(0.0, high - expected) / samples


def _monte_carlo(
    observed: np.ndarray,
    probs: np.ndarray,
    totals: np.ndarray,
    alpha: float | None,
    random_state: np.random.Generator | int | None,
) -> GoodnessOfFit:
    rng = np.random.default_rng(random_state)
    draws = _monte_carlo_draws(alpha)
    observed_stat = 0.0
    simulated = np.zeros(draws)
    df = 0
    for row_obs, row_p, total in zip(observed, probs, totals):  # loops over groups
        support = row_p > 0
        row_obs, row_p = row_obs[support], row_p[support]
        expected = total * row_p
        observed_stat += float(_g(row_obs, expected))
        simulated += _g(rng.multinomial(total, row_p, size=draws), expected[None, :])
        df += int(support.sum()) - 1
    tolerance = 1e-9 * max(1.0, abs(observed_stat))
    pvalue = (1.0 + np.count_nonzero(simulated >= observed_stat - tolerance)) / (draws + 1.0)
    pearson = _asymptotic(observed, totals[:, None] * probs, totals, "pearson")
    return dataclasses.replace(
        pearson,
        statistic=observed_stat,
        pvalue=float(pvalue),
        method="monte-carlo",
        df=df,
        cells=int((probs > 0).sum()),
        merged_mass=0.0,
        rare_observed=0,
        rare_expected=0.0,
    )


def _exact(observed: np.ndarray, probs: np.ndarray) -> GoodnessOfFit:
    """Exact multinomial test on <= 3 cells, ordered by the G statistic."""
    support = probs > 0
    obs, p = observed[support], probs[support]
    n, k = int(obs.sum()), int(support.sum())
    asymptotic = _asymptotic(obs[None, :], n * p[None, :], np.array([n]), "g-test")
    if k < 2:
        return dataclasses.replace(asymptotic, method="exact", pvalue=1.0, df=0, merged_mass=0.0, rare_expected=0.0)
    if k == 2:
        first = np.arange(n + 1)
        table = np.stack([first, n - first], axis=1)
    else:
        a, b = np.triu_indices(n + 1)
        first, second = a, b - a
        table = np.stack([first, second, n - first - second], axis=1)
    log_pmf = special.gammaln(n + 1) - special.gammaln(table + 1).sum(axis=1) + special.xlogy(table, p).sum(axis=1)
    statistics = _g(table, n * p[None, :])
    observed_stat = float(_g(obs, n * p))
    tolerance = 1e-9 * max(1.0, observed_stat)
    pvalue = float(np.exp(log_pmf[statistics >= observed_stat - tolerance]).sum())
    return dataclasses.replace(
        asymptotic,
        statistic=observed_stat,
        pvalue=min(1.0, pvalue),
        method="exact",
        df=k - 1,
        cells=k,
        merged_mass=0.0,
        rare_observed=0,
        rare_expected=0.0,
    )

