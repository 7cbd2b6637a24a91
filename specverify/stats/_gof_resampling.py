"""P-values with no asymptotics: exact enumeration and Monte Carlo draws from the null law.

Both order outcomes by the G statistic and count a tie as "at least as extreme" (with a relative
tolerance, so that rounding never turns a tie into a rejection).  Both are vectorised over a batch
of checks that share a law and group totals (one check is a batch of one).

The Monte Carlo p-value is Besag and Clifford's (1991) sequential one: draws stop once ``h``
simulated statistics have reached the observed one, with p-value ``h / L`` after ``L`` draws, and
otherwise run to ``B`` draws with p-value ``(1 + hits) / (B + 1)``.  Both are exactly valid
(``P(p <= u) <= u``) whatever the counts.  With ``B = 50 / alpha`` and ``h = 50``, stopping early
happens only when the p-value is above ``alpha``, so every decision at ``alpha`` is the one the full
``B`` draws would give, while a correct sampler (p-value spread over (0, 1)) costs a few hundred
draws instead of ``B``.

The failing side stops too, before drawing: where the observed statistic is so large that the null
reaches it with probability below ``DECISIVE / B`` (the method-of-types bound ``P(G >= g) <=
types * exp(-g / 2)``, ``types`` the count of possible tables), the ``B`` draws would all fall short
of it but with probability below ``DECISIVE``, and the p-value is the one they would give,
``1 / (B + 1)``, with no draw made (``draws`` 0).  Only a statistic the null all but never reaches
stops there, so a correct sampler's p-values are never touched.
"""

from __future__ import annotations

import numpy as np
from scipy import special

__all__ = ["exact_pvalues", "g_statistic", "monte_carlo_pvalues"]

#: Exceedances after which a Monte Carlo p-value stops drawing.
STOP_AFTER = 50
#: A Monte Carlo p-value is set without drawing where all ``B`` draws fall short of the observed
#: statistic but with at most this probability (see the module's docstring).
DECISIVE = 1e-9
#: Largest number of simulated cells held in memory at once.
_CHUNK_CELLS = 4_000_000
_TIES = 1e-9


def g_statistic(observed: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """``2 * sum(x * log(x / e))`` over the last axis (cells with ``e = 0`` must hold ``x = 0``)."""
    safe = np.where(expected > 0, expected, 1.0)
    return 2.0 * special.xlogy(observed, observed / safe).sum(axis=-1)


def _at_least(observed: np.ndarray) -> np.ndarray:
    """Thresholds that count ties (up to rounding) as at least as extreme as ``observed``."""
    return observed - _TIES * np.maximum(1.0, np.abs(observed))


def exact_pvalues(observed: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """Exact multinomial p-values of ``observed [N, k]`` (one total) on 2 or 3 cells.

    The null mass of the tables whose G statistic is at least the observed one.
    """
    observed = np.atleast_2d(observed)
    n, k = int(observed[0].sum()), probs.size
    if k == 2:
        # Tables beyond 40 standard deviations carry mass below 1e-300: leave them out.
        mean, spread = n * probs[0], 40.0 * np.sqrt(n * probs[0] * probs[1]) + 10.0
        first = np.arange(max(0, int(mean - spread)), min(n, int(mean + spread)) + 1)
        table = np.stack([first, n - first], axis=1)
    elif k == 3:
        a, b = np.triu_indices(n + 1)
        table = np.stack([a, b - a, n - b], axis=1)
    else:
        raise ValueError(f"the exact test enumerates 2 or 3 cells, not {k}")
    log_pmf = special.gammaln(n + 1) - special.gammaln(table + 1).sum(axis=1) + special.xlogy(table, probs).sum(axis=1)
    expected = n * probs
    statistics = g_statistic(table, expected[None, :])
    order = np.argsort(statistics, kind="stable")
    ordered = statistics[order]
    # mass of the tables at or above each position of the ordering
    upper = np.cumsum(np.exp(log_pmf[order])[::-1])[::-1]
    observed_stat = g_statistic(observed, expected[None, :])
    first_extreme = np.searchsorted(ordered, _at_least(observed_stat), side="left")
    mass = np.where(first_extreme < ordered.size, upper[np.minimum(first_extreme, ordered.size - 1)], 0.0)
    return np.minimum(1.0, mass)


def monte_carlo_pvalues(
    observed: np.ndarray,
    probs: np.ndarray,
    totals: np.ndarray,
    *,
    max_draws: int,
    rng: np.random.Generator,
    stop_after: int = STOP_AFTER,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sequential Monte Carlo p-values of the summed G statistic of ``[N, G, C]`` counts.

    Every check has the group totals ``totals [G]``; each group is drawn as its own multinomial
    (a product-multinomial null), independently for every check.  Returns ``(pvalues, statistics,
    draws)``, one of each per check.
    """
    groups = []
    observed_stat = np.zeros(observed.shape[0])
    for g, (row_p, total) in enumerate(zip(probs, totals)):  # loops over groups
        support = row_p > 0
        p = row_p[support] / row_p[support].sum()
        expected = int(total) * p
        observed_stat += g_statistic(observed[:, g][:, support], expected[None, :])
        groups.append((int(total), p, expected))
    threshold = _at_least(observed_stat)
    cells = sum(p.size for _, p, _ in groups)
    checks = observed.shape[0]
    pvalues = np.ones(checks)
    draws = np.full(checks, max_draws)
    hits = np.zeros(checks, dtype=np.int64)
    decided = _log_tail_bound(observed_stat, groups) + np.log(max_draws) < np.log(DECISIVE)
    pvalues[decided], draws[decided] = 1.0 / (max_draws + 1.0), 0
    active = np.flatnonzero(~decided)
    drawn, chunk = 0, 2 * stop_after
    while active.size and drawn < max_draws:
        size = max(1, min(chunk, max_draws - drawn, _CHUNK_CELLS // (active.size * cells)))
        simulated = np.zeros((active.size, size))
        for total, p, expected in groups:
            counts = rng.multinomial(total, p, size=active.size * size)
            simulated += g_statistic(counts, expected[None, :]).reshape(active.size, size)
        running = hits[active, None] + np.cumsum(simulated >= threshold[active, None], axis=1)
        done = running[:, -1] >= stop_after
        stopped_at = drawn + np.argmax(running >= stop_after, axis=1) + 1
        pvalues[active[done]] = stop_after / stopped_at[done]
        draws[active[done]] = stopped_at[done]
        hits[active] = running[:, -1]
        active = active[~done]
        drawn += size
        chunk *= 2
    pvalues[active] = (hits[active] + 1.0) / (max_draws + 1.0)
    return pvalues, observed_stat, draws


def _log_tail_bound(statistic: np.ndarray, groups: list[tuple[int, np.ndarray, np.ndarray]]) -> np.ndarray:
    """Log of a bound on the null's ``P(G >= statistic)``: each possible table (a product over groups
    of ``C(n + k - 1, k - 1)``) has null probability at most ``exp(-G / 2)`` when its G is at least
    ``statistic`` (method of types: ``P(table) <= exp(-n KL)``, ``G = 2 n KL``)."""
    log_types = sum(
        special.gammaln(total + p.size) - special.gammaln(total + 1) - special.gammaln(p.size) for total, p, _ in groups
    )
    return log_types - statistic / 2.0
