"""Goodness of fit of observed counts against an exactly known law.

One primitive, :func:`gof_test`, covers every statistical check: a single multinomial (the law of
the first token) and a product of multinomials (a law per group: per draft sequence, per prefix, per
batch row), each group with its own observed total.  :func:`gof_pvalues` runs the same test on a
batch of count vectors that share a law and totals (calibration and power simulations).

Choices, each for a reason (see docs/statistics.md):

* an observation in a cell of null probability 0 is an exact failure (p-value 0), no statistics;
* an exact multinomial test where the support is tiny (<= 3 cells): no approximation at all;
* where every cell expects at least ``MIN_EXPECTED`` observations, the G statistic (likelihood
  ratio) divided by its Bartlett factor (Williams' correction with the exact ``sum 1/p`` term);
  Pearson's X^2 on the same cells is reported alongside, for comparison only;
* where cells expect fewer, a Monte Carlo p-value from multinomial draws when the decision level is
  coarse enough for draws to resolve it (exactly valid at any count; stopped early, without
  changing any decision at that level, once the p-value is known to be large);
* otherwise small cells are pooled by *expected* counts only (never observed ones, which would bias
  the test) into cells expecting ``MIN_EXPECTED``; the rarest cells, too rare to fill a pool, are
  tested apart by an exact one-sided tail (mass moved into outcomes that should almost never occur),
  and the two parts are combined by a weighted Bonferroni bound.  Where the pooled cells of a single
  group number 2 or 3, their p-value is exact too.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import special, stats

from ._gof_resampling import exact_pvalues, g_statistic, monte_carlo_pvalues
from ._power import min_detectable_tv

__all__ = ["GoodnessOfFit", "gof_pvalues", "gof_test"]

#: Cells are pooled until each expects at least this many observations.  G's chi-square tail is
#: then within ~20% of nominal down to 1e-5 (at 5, up to 40% liberal when many cells are small).
MIN_EXPECTED = 10.0
#: Largest number of multinomial compositions the exact test enumerates on three cells.
EXACT_LIMIT = 1_000_000
#: Largest number of simulated cells (draws x cells) a Monte Carlo p-value may cost.
MONTE_CARLO_LIMIT = 10_000_000  # a failing case (p below alpha) pays the full cost: bounded
#: Share of the level given to the rare-cell tail when it is tested beside the G statistic.
RARE_WEIGHT = 0.1
_METHODS = ("auto", "g-test", "pearson", "monte-carlo", "exact")


@dataclasses.dataclass(frozen=True)
class GoodnessOfFit:
    """Result of :func:`gof_test`.

    Attributes:
        statistic: the test statistic (Bartlett-corrected G for ``"g-test"``, G for ``"exact"``
            and ``"monte-carlo"``, X^2 for ``"pearson"``).
        pvalue: probability under the null of a result at least this extreme.
        df: degrees of freedom of the compared cells (after pooling).
        method: ``"g-test"``, ``"pearson"``, ``"monte-carlo"``, ``"exact"`` or ``"impossible"``
            (an observation where the null puts no mass).
        samples: observations tested.
        cells: cells compared after pooling.
        merged_mass: null probability (averaged over the samples) of cells pooled with others or
            into the rare cell; a deviation inside a pool is invisible, so it adds to the smallest
            detectable TV.
        impossible: observations in cells of null probability 0.
        pearson_statistic, pearson_pvalue: Pearson's X^2 on the compared cells, for comparison.
        rare_observed, rare_expected: the cells too rare to fill a pool, tested together by an exact
            one-sided tail (an excess there is mass moved into outcomes that should almost never
            occur).
        rare_pvalue: that tail's p-value (1 where there is no rare cell).
        draws: Monte Carlo draws made (0 for other methods).
        forbidden_cells: cells of null probability 0 (in groups with samples): one observation
            there is an exact failure.
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
    rare_pvalue: float = 1.0
    draws: int = 0
    forbidden_cells: int = 0

    def min_detectable_tv(self, alpha: float, power: float = 0.99) -> float:
        """Smallest TV deviation this test detects with probability ``power`` at level ``alpha``.

        A worst case over all alternatives (TV averaged over the samples when there are groups):
        the compared cells detect a TV of ``d`` between the pooled laws; a deviation hidden inside
        pools adds at most their null mass; mass moved into the rare cell is seen by its tail once
        it exceeds a shift ``s``, and mass moved out of it is at most its null mass.  So any
        deviation of at least ``d + merged_mass + rare_expected / samples + s`` is detected by one
        part or the other with at least ``power``.

        Where the law forbids some outcomes, mass moved onto them is an exact failure as soon as
        one sample lands there, which happens with probability at least ``power`` once that mass
        reaches ``log(1 / (1 - power)) / samples``; that term is added too.  So a law with one
        possible outcome per group (``df = 0``, nothing pooled) detects a deviation of
        ~4.6 / samples.  ``1.0`` when nothing at all could be compared.
        """
        if self.method == "impossible":
            return 0.0
        if self.samples == 0:
            return 1.0
        forbidden = math.log(1.0 / (1.0 - power)) / self.samples if self.forbidden_cells else 0.0
        has_rare = self.rare_expected > 0
        main_alpha = alpha * (1.0 - RARE_WEIGHT) if has_rare else alpha
        shift = _rare_shift(self.rare_expected, self.samples, alpha * RARE_WEIGHT, power) if has_rare else 0.0
        rare_share = self.rare_expected / self.samples
        if not self.df:
            if not (has_rare or self.forbidden_cells):
                return 1.0
            # Only mass moved into the rare or forbidden cells (or all of the rare mass) is visible.
            return min(1.0, forbidden + shift + self.merged_mass + rare_share)
        compared = self.samples
        if has_rare:  # samples left to the compared cells when less than ``shift`` moved away
            rare_mean = self.rare_expected + shift * self.samples
            compared -= math.ceil(rare_mean + 5.0 * math.sqrt(rare_mean) + 5.0)
        detectable = min_detectable_tv(max(compared, 0), self.df, main_alpha, power)
        return min(1.0, detectable + self.merged_mass + rare_share + shift + forbidden)


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
            p-value can resolve it (it needs ``50 / alpha`` draws at most).
        method: ``"auto"``, ``"g-test"``, ``"pearson"``, ``"monte-carlo"`` or ``"exact"``.
        random_state: seed or generator for Monte Carlo draws (deterministic when given).
    """
    observed, probs = _validated(observed, probs, method, batch=False)
    totals = observed[0].sum(axis=1)
    samples = int(totals.sum())
    if samples == 0:
        return GoodnessOfFit(0.0, 1.0, 0, "g-test" if method == "auto" else method, 0, 0, 0.0, 0, 0.0, 1.0)
    impossible = int(observed[0][probs == 0].sum())
    if impossible:
        return GoodnessOfFit(math.inf, 0.0, 0, "impossible", samples, 0, 0.0, impossible, math.inf, 0.0)
    batch = _run(observed, probs, totals, alpha, method, np.random.default_rng(random_state))
    forbidden = int((probs == 0).sum())
    return GoodnessOfFit(
        statistic=float(batch.statistic[0]),
        pvalue=float(batch.pvalue[0]),
        df=batch.df,
        method=batch.method,
        samples=samples,
        cells=batch.cells,
        merged_mass=batch.merged_mass,
        impossible=0,
        pearson_statistic=float(batch.pearson[0]),
        pearson_pvalue=float(batch.pearson_pvalue[0]),
        rare_observed=0 if batch.rare_observed is None else int(batch.rare_observed[0]),
        rare_expected=batch.rare_expected,
        rare_pvalue=1.0 if batch.rare_pvalue is None else float(batch.rare_pvalue[0]),
        draws=0 if batch.draws is None else int(batch.draws[0]),
        forbidden_cells=forbidden,
    )


def gof_pvalues(
    observed: np.ndarray,
    probs: np.ndarray,
    *,
    alpha: float | None = None,
    method: str = "auto",
    random_state: np.random.Generator | int | None = None,
) -> np.ndarray:
    """:func:`gof_test`'s p-values for a batch ``[N, C]`` or ``[N, G, C]`` of independent checks.

    Every check must have the same total per group (as draws from a fixed design do); the law is
    shared.  Each check gets its own Monte Carlo draws, so the p-values are independent.
    """
    observed, probs = _validated(observed, probs, method, batch=True)
    totals = observed[0].sum(axis=1)
    if (observed.sum(axis=2) != totals).any():
        raise ValueError("every check of a batch must have the same total per group")
    pvalues = np.ones(observed.shape[0])
    if totals.sum() == 0:
        return pvalues
    possible = ~(observed[:, probs == 0] > 0).any(axis=1)
    pvalues[~possible] = 0.0
    if possible.any():
        rng = np.random.default_rng(random_state)
        pvalues[possible] = _run(observed[possible], probs, totals, alpha, method, rng).pvalue
    return pvalues


def _validated(observed: np.ndarray, probs: np.ndarray, method: str, *, batch: bool) -> tuple[np.ndarray, np.ndarray]:
    """Counts as ``[N, G, C]`` int64 and the law as ``[G, C]`` normalised, groups without counts dropped."""
    observed = np.asarray(observed)
    probs = np.asarray(probs, dtype=np.float64)
    if method not in _METHODS:
        raise ValueError(f"unknown method {method!r}")
    if observed.dtype.kind not in "iu" and not (
        np.isfinite(observed).all() and np.array_equal(observed, np.round(observed))
    ):
        raise ValueError("observed counts must be whole numbers")
    observed = observed.astype(np.int64)
    if batch:
        if observed.ndim not in (2, 3) or observed.shape[1:] != probs.shape:
            raise ValueError(f"a batch of counts must be [N, *{probs.shape}], got {observed.shape}")
        observed = observed if observed.ndim == 3 else observed[:, None, :]
    else:
        if observed.shape != probs.shape or observed.ndim not in (1, 2):
            raise ValueError(f"observed {observed.shape} and probs {probs.shape} differ in shape")
        observed = observed.reshape((1, -1, observed.shape[-1]))
    probs = np.atleast_2d(probs)
    if (observed < 0).any() or not np.isfinite(probs).all() or (probs < 0).any():
        raise ValueError("counts must be >= 0 and probabilities finite and >= 0")
    live = observed.sum(axis=(0, 2)) > 0
    observed, probs = observed[:, live], probs[live]
    sums = probs.sum(axis=1, keepdims=True)
    if (sums <= 0).any():
        raise ValueError("a group with observations has a null law of zero mass")
    return observed, probs / sums


@dataclasses.dataclass(frozen=True)
class _Batch:
    """One test run on ``N`` checks: per-check arrays (``None`` where the method has no rare cells
    or no draws) and what the checks share."""

    method: str
    statistic: np.ndarray
    pvalue: np.ndarray
    pearson: np.ndarray
    pearson_pvalue: np.ndarray
    df: int
    cells: int
    merged_mass: float = 0.0
    rare_observed: np.ndarray | None = None
    rare_expected: float = 0.0
    rare_pvalue: np.ndarray | None = None
    draws: np.ndarray | None = None


def _run(
    observed: np.ndarray,
    probs: np.ndarray,
    totals: np.ndarray,
    alpha: float | None,
    method: str,
    rng: np.random.Generator,
) -> _Batch:
    expected = totals[:, None] * probs
    if method == "auto":
        method = _choose_method(expected, alpha)
    if method == "exact":
        if probs.shape[0] != 1:
            raise ValueError("the exact test takes a single group")
        return _exact(observed[:, 0], probs[0])
    if method == "monte-carlo":
        return _monte_carlo(observed, probs, totals, alpha, rng)
    return _asymptotic(observed, expected, method)


def _choose_method(expected: np.ndarray, alpha: float | None) -> str:
    support = expected > 0
    cells = int(support.sum())
    if expected.shape[0] == 1 and _exact_affordable(round(float(expected.sum())), cells):
        return "exact"
    if expected[support].min() >= MIN_EXPECTED:
        return "g-test"
    if alpha is not None and _monte_carlo_draws(alpha) * cells <= MONTE_CARLO_LIMIT:
        return "monte-carlo"
    return "g-test"


def _monte_carlo_draws(alpha: float | None) -> int:
    """Draws that resolve ``alpha``: a p-value at the level still allows 49 exceedances."""
    return 10_000 if alpha is None else max(2_000, math.ceil(50.0 / alpha))


def _exact_affordable(n: int, k: int) -> bool:
    """Two cells always (the enumeration is trimmed to 40 standard deviations); three up to a size."""
    return k == 2 or (k == 3 and math.comb(n + 2, 2) <= EXACT_LIMIT)


@dataclasses.dataclass(frozen=True)
class _Pooling:
    """How one group's cells are pooled: ``labels[cell]`` is its pool, ``rare`` the rare pool."""

    labels: np.ndarray
    rare: int | None
    pooled: np.ndarray  # cells that share their pool with another cell (the rare pool included)


def _pool_cells(expected: np.ndarray) -> _Pooling:
    """Pool cells expecting fewer than MIN_EXPECTED observations, largest first.

    Small cells are pooled in decreasing order of expected count until each pool expects at least
    MIN_EXPECTED; the rarest cells, too rare together to fill a pool, become the *rare* pool.  It
    is never hidden inside a large cell, because mass a sampler moves into outcomes it should
    almost never produce is exactly what must be seen.  Only expected counts decide.
    """
    labels = np.arange(expected.size)
    small = np.flatnonzero(expected < MIN_EXPECTED)
    if small.size == 0:
        return _Pooling(labels, None, np.zeros(expected.size, dtype=bool))
    small = small[np.argsort(-expected[small], kind="stable")]
    start, running, rare = 0, 0.0, None
    for position, cell in enumerate(small):  # loops over cells, never over samples
        running += expected[cell]
        if running >= MIN_EXPECTED:
            labels[small[start : position + 1]] = small[start]
            start, running = position + 1, 0.0
    if start < small.size:
        rare = int(small[start])
        labels[small[start:]] = rare
    sizes = np.bincount(labels, minlength=expected.size)
    return _Pooling(labels, rare, sizes[labels] > 1)


def _bartlett(probs: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Bartlett factor of G for a multinomial: ``E[G] = (k - 1) * q + O(n**-2)``.

    Williams' correction with the exact ``sum(1 / p)`` term; the common ``1 + (k + 1) / (6 n)`` is
    its value for a uniform law only and under-corrects every other law.
    """
    k = probs.size
    return 1.0 + (float((1.0 / probs).sum()) - 1.0) / (6.0 * np.maximum(n, 1.0) * (k - 1))


def _asymptotic(observed: np.ndarray, expected: np.ndarray, method: str) -> _Batch:
    """G (or Pearson) on pooled cells, beside an exact one-sided tail for the rare cells."""
    checks = observed.shape[0]
    statistic = np.zeros(checks)
    pearson = np.zeros(checks)
    rare_observed = np.zeros(checks)
    df = cells = 0
    merged = 0.0
    rare_means: list[float] = []
    rare_totals: list[int] = []
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    for g, row_exp in enumerate(expected):  # loops over groups, never over samples
        support = row_exp > 0
        row_obs, row_exp = observed[:, g, support], row_exp[support]
        total = float(row_exp.sum())
        pooling = _pool_cells(row_exp)
        size = int(pooling.labels.max()) + 1
        onehot = np.zeros((row_exp.size, size))
        onehot[np.arange(row_exp.size), pooling.labels] = 1.0
        obs = row_obs @ onehot
        exp = row_exp @ onehot
        merged += float(row_exp[pooling.pooled].sum())
        main = exp > 0
        if pooling.rare is not None:
            main[pooling.rare] = False  # tested apart
            if exp[pooling.rare] < total * (1 - 1e-12):  # a group that is all rare says nothing
                rare_observed += obs[:, pooling.rare]
                rare_means.append(float(exp[pooling.rare]))
                rare_totals.append(round(total))
        obs, law = obs[:, main], exp[main] / exp[main].sum()
        k = law.size
        if k < 2:
            continue
        # The pooled cells are tested given their own total (independent of the rare count).
        n_main = obs.sum(axis=1)
        exp_main = n_main[:, None] * law[None, :]
        statistic += g_statistic(obs, exp_main) / _bartlett(law, n_main)
        pearson += (((obs - exp_main) ** 2) / np.where(exp_main > 0, exp_main, 1.0)).sum(axis=1)
        df += k - 1
        cells += k
        parts.append((obs, law))
    rare_expected = float(sum(rare_means))
    rare_p = _rare_tail(rare_observed, np.array(rare_means), np.array(rare_totals, dtype=np.int64))
    g_p = special.chdtrc(df, statistic) if df else np.ones(checks)
    x2_p = special.chdtrc(df, pearson) if df else np.ones(checks)
    if len(parts) == 1 and parts[0][1].size <= 3:
        # A few pooled cells of one group: exact p-values, not a coarse lattice read as chi-square.
        g_p = _exact_by_total(*parts[0], fallback=g_p)
    if rare_means and df:  # weighted Bonferroni over the two parts
        g_p, x2_p = _combine(g_p, rare_p), _combine(x2_p, rare_p)
    elif rare_means:
        g_p = x2_p = rare_p
    main = (pearson, x2_p) if method == "pearson" else (statistic, g_p)
    return _Batch(
        method=method,
        statistic=main[0],
        pvalue=main[1],
        pearson=pearson,
        pearson_pvalue=x2_p,
        df=df,
        cells=cells,
        merged_mass=merged / float(expected.sum()),
        rare_observed=rare_observed,
        rare_expected=rare_expected,
        rare_pvalue=rare_p,
    )


def _exact_by_total(observed: np.ndarray, law: np.ndarray, *, fallback: np.ndarray) -> np.ndarray:
    """Exact p-values of pooled counts whose total varies from check to check (by the rare count)."""
    counts = np.rint(observed).astype(np.int64)
    totals = counts.sum(axis=1)
    pvalues = fallback.copy()
    for total in np.unique(totals):  # loops over distinct totals, a handful
        if total > 0 and _exact_affordable(int(total), law.size):
            same = totals == total
            pvalues[same] = exact_pvalues(counts[same], law)
    return pvalues


def _combine(main_p: np.ndarray, rare_p: np.ndarray) -> np.ndarray:
    """P-value of "reject if either part rejects" under a weighted Bonferroni split of the level."""
    return np.minimum(1.0, np.minimum(main_p / (1.0 - RARE_WEIGHT), rare_p / RARE_WEIGHT))


def _rare_tail(observed: np.ndarray, means: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """One-sided p-values of an excess in the rare cells: ``P(S >= observed)``.

    One group: S is binomial, exact.  Several: S is a sum of binomials, whose upper tail beyond
    its mean + 1 is bounded by the Poisson tail of the same mean (Hoeffding 1956; Anderson and
    Samuels 1967); at or below that, there is no excess and no evidence (p-value 1).
    """
    if means.size == 0:
        return np.ones(observed.size)
    if means.size == 1:
        tail = special.bdtrc(observed - 1, int(totals[0]), means[0] / totals[0])
    else:
        mean = float(means.sum())
        tail = np.where(observed >= mean + 1, special.pdtrc(observed - 1, mean), 1.0)
    return np.where(observed > 0, tail, 1.0)


def _rare_shift(expected: float, samples: int, alpha: float, power: float) -> float:
    """Mass that must move into the rare cells for their tail test to see it with ``power``.

    Reject when ``S >= c`` (Poisson bound; the binomial test of one group rejects whenever the
    Poisson bound does).  Under the alternative ``S`` is a sum of binomials, less dispersed than a
    Poisson law of its mean, so above ``c`` its power is at least the Poisson power found here.
    """
    critical = max(stats.poisson.isf(alpha, expected) + 1.0, expected + 1.0)
    low, high = expected, max(2.0 * critical, critical + 10.0)
    while special.pdtrc(critical - 1, high) < power:
        high *= 2.0
    for _ in range(100):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if special.pdtrc(critical - 1, mid) < power else (low, mid)
    return max(0.0, high - expected) / samples


def _monte_carlo(
    observed: np.ndarray, probs: np.ndarray, totals: np.ndarray, alpha: float | None, rng: np.random.Generator
) -> _Batch:
    support = probs > 0
    pvalues, statistic, draws = monte_carlo_pvalues(
        observed, probs, totals, max_draws=_monte_carlo_draws(alpha), rng=rng
    )
    pearson, pearson_p = _raw_pearson(observed, totals[:, None] * probs)
    return _Batch(
        method="monte-carlo",
        statistic=statistic,
        pvalue=pvalues,
        pearson=pearson,
        pearson_pvalue=pearson_p,
        df=int((support.sum(axis=1) - 1).sum()),
        cells=int(support.sum()),
        draws=draws,
    )


def _exact(observed: np.ndarray, probs: np.ndarray) -> _Batch:
    """Exact multinomial test on <= 3 cells of one group."""
    support = probs > 0
    obs, p = observed[:, support], probs[support]
    n, k = int(obs[0].sum()), int(support.sum())
    expected = n * p
    pearson, pearson_p = _raw_pearson(obs[:, None, :], expected[None, :])
    statistic = g_statistic(obs, expected[None, :])
    pvalues = exact_pvalues(obs, p) if k >= 2 else np.ones(obs.shape[0])
    return _Batch("exact", statistic, pvalues, pearson, pearson_p, df=k - 1, cells=k)


def _raw_pearson(observed: np.ndarray, expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pearson's X^2 on the unpooled cells (for comparison beside exact and Monte Carlo tests)."""
    support = expected > 0
    safe = np.where(support, expected, 1.0)
    statistic = np.where(support, (observed - expected) ** 2 / safe, 0.0).sum(axis=(1, 2))
    df = int((support.sum(axis=1) - 1).sum())
    return statistic, special.chdtrc(df, statistic) if df else np.ones(statistic.size)
