"""Fixed-sample decisions that a passing sampler ends early: group-sequential futility stops.

A chi-square decision sized for power ``1 - beta`` against a total-variation deviation ``tv``
spends every one of its samples on a correct sampler, which is the common case.  Looking at the
counts at fractions ``t_1 < ... < t_m`` of a final sample ``N`` and *accepting* where the statistic
lies below ``b_j``, the ``beta_j`` quantile of its law under the least favourable deviation of size
``tv`` at that look (noncentral chi-square, ``lambda = 4 tv**2 n_j``, as in
:mod:`specverify.stats._power`), keeps the power: a deviation of at least ``tv`` is missed with
probability at most ``beta_1 + ... + beta_m + beta_final`` (a union bound over the looks; the
statistic grows stochastically with the deviation).  The level is untouched, since a futility stop
only ever accepts and the final test is the fixed-sample one (non-binding futility, Jennison and
Turnbull 2000, ch. 7).  ``N`` is sized for ``beta_final``, 0.3 of ``beta``: 7-14% above the fixed
design.  Under the null the statistic sits near its degrees of freedom, and most decisions stop by
the second or third look: about half the fixed design's samples.  The schedule (five looks from 0.3
to 0.7 of ``N``) drew the fewest samples under the null, over experiments of 1 to 23 decisions that
must all agree to stop, among the schedules ``scripts/futility_calibration.py`` compares whose
``N`` stays within 10% of the fixed design's (what a failing sampler draws).  The statistic
compared is Pearson's on the compared cells, whose noncentrality under a deviation of ``tv`` is at
least ``4 tv**2 n`` by Cauchy-Schwarz; what a deviation may hide from those cells (pools, a rare
tail, forbidden outcomes) is taken off ``tv`` first (:meth:`FutilityPlan.hidden`).  See
docs/statistics.md, "Futility looks".
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import stats

from ._gof import MIN_EXPECTED, GoodnessOfFit, gof_test
from ._power import samples_needed

__all__ = ["FutilityPlan"]

#: Looks, as fractions of the final sample.
LOOKS = (0.3, 0.4, 0.5, 0.6, 0.7)
#: Share of the miss probability ``1 - power`` left to the final test (the rest split over looks).
FINAL_SHARE = 0.3
#: Mass moved into a rare-cell tail that a look bounds by the rare count (a share of ``tv``).
RARE_SHIFT = 0.05


@dataclasses.dataclass(frozen=True)
class FutilityPlan:
    """A level-``alpha`` decision that detects any deviation of ``tv`` with ``power``, looking at
    :attr:`look_samples` and stopping where :meth:`futile` says so.

    ``df`` (at least 1) sizes the sample (the law's support less one, as for
    :func:`samples_needed`); the bounds use each look's own test's.
    """

    tv: float
    df: int
    alpha: float
    power: float
    looks: tuple[float, ...] = LOOKS
    final_share: float = FINAL_SHARE

    def __post_init__(self) -> None:
        if not (0 < self.tv <= 1 and 0 < self.alpha < 1 and 0 < self.power < 1 and self.df >= 1):
            raise ValueError(
                f"tv must lie in (0, 1], alpha and power in (0, 1), df >= 1; got {self.tv}, {self.alpha}, "
                f"{self.power}, {self.df}"
            )
        if not self.looks or list(self.looks) != sorted(set(self.looks)) or not all(0 < t < 1 for t in self.looks):
            raise ValueError(f"looks are one or more increasing fractions in (0, 1), got {self.looks}")
        if not 0 < self.final_share < 1:
            raise ValueError(f"final_share must lie in (0, 1), got {self.final_share}")

    @property
    def final_power(self) -> float:
        """The power the final test is sized for: it may miss with ``final_share`` of ``1 - power``."""
        return 1.0 - (1.0 - self.power) * self.final_share

    @property
    def look_miss(self) -> float:
        """The probability each look may stop a deviation of ``tv``."""
        return (1.0 - self.power) * (1.0 - self.final_share) / len(self.looks)

    @property
    def final_samples(self) -> int:
        """``N``: the samples of a decision no look stops."""
        return samples_needed(self.tv, self.df, self.alpha, self.final_power)

    @property
    def look_samples(self) -> tuple[int, ...]:
        """The samples at each look."""
        return tuple(math.ceil(t * self.final_samples) for t in self.looks)

    def bound(self, samples: int, df: int, hidden: float = 0.0) -> float:
        """The statistic below which a look on ``samples`` of compared cells stops, for a test with
        ``df``: the ``look_miss`` quantile at a deviation of ``tv`` less ``hidden``, the part of
        it the compared cells may not see (:meth:`hidden`).  ``0`` (no stop) where nothing is left."""
        tv = self.tv - hidden
        if tv <= 0 or df < 1 or samples < 1:
            return 0.0
        return float(stats.ncx2.ppf(self.look_miss, df, 4.0 * tv * tv * samples))

    def hidden(self, test: GoodnessOfFit) -> float | None:
        """How much of a deviation of ``tv`` a look's test may fail to show on its compared cells,
        or ``None`` where its own counts already rule out such a bound.

        Each part is a case of the deviation, so the look still stops a deviation of ``tv`` with
        probability at most ``look_miss``:

        * pooled cells hide at most their null mass (``merged_mass``);
        * mass moved onto forbidden outcomes, once over ``log(1 / look_miss) / n``, shows as an
          impossible outcome (a rejection, never a stop) with probability ``1 - look_miss``;
        * the rare-cell tail: mass moved out of it is at most its null mass, and mass moved into it
          beyond ``RARE_SHIFT * tv`` would have given more than the rare count seen (``None``
          where the count is too high for that, with probability ``1 - look_miss``).
        """
        n = test.samples
        hidden = test.merged_mass
        if test.forbidden_cells:
            hidden += math.log(1.0 / self.look_miss) / n
        if test.rare_expected > 0:
            shift = RARE_SHIFT * self.tv
            rate = min(1.0, test.rare_expected / n + shift)
            if stats.binom.cdf(test.rare_observed, n, rate) > self.look_miss:
                return None
            hidden += test.rare_expected / n + shift
        return hidden

    def futile(self, test: GoodnessOfFit, law: np.ndarray | None = None) -> bool:
        """Whether a look's test of one law may stop its decision: it rejects nothing, and its Pearson
        statistic on the compared cells lies below :meth:`bound` at what :meth:`hidden` leaves of
        ``tv`` (with no compared cells, ``df = 0``, the hidden parts must hold all of ``tv``).

        The bound is the noncentral chi-square's, so the test must be one whose compared cells all
        expect ``MIN_EXPECTED``: an asymptotic one (its pools and rare tail are accounted for in
        :meth:`hidden`), or an exact one on two or three cells given ``law`` to show they do; never
        a Monte Carlo test (small cells its level needs resolved).
        """
        if test.samples == 0 or test.pvalue <= self.alpha or test.method not in ("g-test", "pearson", "exact"):
            return False
        if test.method == "exact":
            if law is None:
                return False
            probs = _one_law(law)
            if test.samples * float(probs[probs > 0].min()) < MIN_EXPECTED:
                return False
        hidden = self.hidden(test)
        if hidden is None or hidden >= self.tv:
            return False
        if test.df == 0:  # no compared cells: a deviation of tv is all in the forbidden or rare cells
            return True
        return test.pearson_statistic < self.bound(test.samples - test.rare_observed, test.df, hidden)

    def claim(self, test: GoodnessOfFit, law: np.ndarray | None = None) -> float:
        """The smallest TV the whole procedure detects with ``power``, whether a look stopped it or
        ``test`` is its final one: the final test's own claim at ``N`` (what it adds for forbidden,
        pooled or rare cells included), and never below ``tv``.  Given the decision's ``law``, the
        final test's cells are those ``N`` samples would have (pooling follows expected counts
        alone), not the look's, which pools more."""
        if law is not None and test.samples < self.final_samples:
            test = gof_test(_expected_counts(_one_law(law), self.final_samples), law, alpha=self.alpha, random_state=0)
        at_final = dataclasses.replace(test, samples=max(test.samples, self.final_samples))
        return max(self.tv, at_final.min_detectable_tv(self.alpha, self.final_power))

    def simulate(self, law: np.ndarray, truth: np.ndarray, rng: np.random.Generator) -> tuple[bool, int]:
        """One decision on counts drawn from ``truth`` (multinomial, up to each look) and tested
        against ``law``: ``(rejected, samples drawn)``.  How its level and power are calibrated
        (``scripts/futility_calibration.py``)."""
        counts, done = np.zeros(len(law), dtype=np.int64), 0
        for samples in self.look_samples:
            counts += rng.multinomial(samples - done, truth)
            done = samples
            if self.futile(gof_test(counts, law, alpha=self.alpha), law):
                return False, done
        counts += rng.multinomial(self.final_samples - done, truth)
        return gof_test(counts, law, alpha=self.alpha).pvalue <= self.alpha, self.final_samples


def _one_law(law: np.ndarray) -> np.ndarray:
    """``law`` normalised; a plan's decision tests one law (a ``[G, C]`` test's groups share no bound)."""
    probs = np.asarray(law, dtype=np.float64)
    if probs.ndim != 1:
        raise ValueError(f"a futility look bounds a test of one law, got shape {probs.shape}")
    return probs / probs.sum()


def _expected_counts(probs: np.ndarray, total: int) -> np.ndarray:
    """Counts summing to ``total`` exactly, each within one of ``total * probs`` (largest remainders)."""
    exact = probs * total
    counts = np.floor(exact).astype(np.int64)
    counts[np.argsort(counts - exact, kind="stable")[: total - int(counts.sum())]] += 1
    return counts
