"""Identity test of a whole law over a large domain, with samples growing like sqrt(cells) / eps^2.

A goodness-of-fit test on ``C`` cells needs about ``C / eps^2`` samples before its chi-square
approximation holds; the chi-square-type statistic of Acharya, Daskalakis and Kamath (2015,
"Optimal testing for properties of distributions") needs ``sqrt(C) / eps^2``.  Its form here:

* samples come in ``r`` batches of Poisson(``n``) size (the sizes drawn by the harness), so the
  counts ``N_i`` of a batch are independent Poisson(``n p_i``) under the null;
* on the cells ``A = {i : p_i >= eps / (50 C)}`` each batch computes
  ``Z = sum_A ((N_i - n p_i)^2 - N_i) / (n p_i)``: mean 0 and variance ``2 |A|`` exactly under
  the null, mean ``n chi2_A(q, p) >= 4 n TV_A^2`` under an alternative ``q``;
* a batch rejects when ``Z >= sqrt(6 |A|)``: by Cantelli's inequality with probability at most
  ``1/4`` under the null, whatever the law;
* the test rejects when ``R`` batches of ``r`` do: the p-value ``P(Binomial(r, 1/4) >= R)`` is
  exact (conservative), so the level holds at any ``alpha`` with no asymptotics (median
  amplification, as in the paper);
* an observation where the null puts no mass is an exact failure (p-value 0).

Power is stated against the *spread* deviation (every cell of ``A`` moved by a factor
``1 +- delta``, the construction lower bounds are built on), by Chebyshev's inequality on each
batch and the binomial law of ``R``: a lower bound, measured in ``tests/stats/test_identity.py``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import stats

__all__ = ["IdentityTest", "identity_min_tv", "identity_plan", "identity_test"]

#: Each batch's false-alarm probability under the null is at most this (Cantelli).
BATCH_LEVEL = 0.25
#: Cells below ``eps / (CELL_FLOOR * C)`` are left out of the statistic (their mass is <= eps / 50).
CELL_FLOOR = 50.0


def _threshold(cells: int) -> float:
    return math.sqrt(2.0 * cells * (1.0 - BATCH_LEVEL) / BATCH_LEVEL)


def _batch_power(n: float, cells: int, tv: float) -> float:
    """Lower bound on one batch's rejection probability under the spread deviation of ``tv``."""
    mean = 4.0 * n * tv * tv  # n chi2_A >= n (2 TV)^2
    gap = mean - _threshold(cells)
    if gap <= 0:
        return 0.0
    return max(0.0, 1.0 - (2.0 * cells + 4.0 * mean) / gap**2)


def _critical(batches: int, alpha: float) -> int | None:
    """Fewest rejecting batches whose null probability is at most ``alpha`` (``None``: none)."""
    r = np.arange(batches + 1)
    tail = stats.binom.sf(r - 1, batches, BATCH_LEVEL)
    ok = np.nonzero(tail <= alpha)[0]
    return int(ok[0]) if ok.size else None


def _overall_power(n: float, batches: int, cells: int, tv: float, alpha: float) -> float:
    critical = _critical(batches, alpha)
    if critical is None:
        return 0.0
    return float(stats.binom.sf(critical - 1, batches, _batch_power(n, cells, tv)))


def identity_plan(cells: int, tv: float, alpha: float, power: float = 0.99, max_batches: int = 400) -> tuple[int, int]:
    """``(batches, mean batch size)`` detecting the spread deviation of ``tv`` with ``power``; fewest samples."""
    best: tuple[int, int] | None = None
    for batches in range(1, max_batches + 1):
        if _critical(batches, alpha) is None:
            continue
        lo, hi = 1.0, 1.0
        while _overall_power(hi, batches, cells, tv, alpha) < power:
            hi *= 2.0
            if hi > 1e15:
                break
        else:
            while hi - lo > max(1.0, 1e-3 * hi):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if _overall_power(mid, batches, cells, tv, alpha) < power else (lo, mid)
            if best is None or batches * hi < best[0] * best[1]:
                best = (batches, math.ceil(hi))
            elif batches > 2 * best[0]:
                break
    if best is None:
        raise ValueError(f"no plan of at most {max_batches} batches reaches level {alpha}")
    return best


def identity_min_tv(batch_size: float, batches: int, cells: int, alpha: float, power: float = 0.99) -> float:
    """The smallest spread deviation detected with ``power`` (1.0 where none is)."""
    if _overall_power(batch_size, batches, cells, 1.0, alpha) < power:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _overall_power(batch_size, batches, cells, mid, alpha) < power else (lo, mid)
    return hi


@dataclasses.dataclass(frozen=True)
class IdentityTest:
    """Result of :func:`identity_test`.

    Attributes:
        pvalue: ``P(Binomial(batches, 1/4) >= rejecting)``; 0 for an impossible observation.
        statistics: each batch's ``Z / sqrt(2 |A|)`` (standardised).
        rejecting: batches whose ``Z`` reached the threshold.
        batches: batches tested.
        cells: ``|A|``, the cells in the statistic.
        samples: observations in all.
        impossible: observations in cells of null probability 0.
        method: ``"adk-chi-square"`` or ``"impossible"``.
    """

    pvalue: float
    statistics: tuple[float, ...]
    rejecting: int
    batches: int
    cells: int
    samples: int
    impossible: int
    method: str

    def min_detectable_tv(self, alpha: float, power: float = 0.99) -> float:
        mean_size = self.samples / max(1, self.batches)
        return identity_min_tv(mean_size, self.batches, self.cells, alpha, power)


def identity_test(counts: np.ndarray, probs: np.ndarray, *, eps: float, mean_size: float | None = None) -> IdentityTest:
    """Test batches of counts ``[r, C]`` (Poisson-sized batches) against the law ``probs [C]``.

    ``eps`` is the TV the test is planned for (it fixes the cells left out); ``mean_size`` is the
    Poisson mean of the batch sizes (default: the observed mean).
    """
    counts = np.atleast_2d(np.asarray(counts, dtype=np.float64))
    probs = np.asarray(probs, dtype=np.float64)
    probs = probs / probs.sum()
    batches, size = counts.shape
    impossible = int(counts[:, probs == 0].sum())
    n = float(mean_size if mean_size is not None else counts.sum() / batches)
    cells = probs >= eps / (CELL_FLOOR * size)
    if impossible:
        return IdentityTest(0.0, (), batches, batches, int(cells.sum()), int(counts.sum()), impossible, "impossible")
    expected = n * probs[cells]
    observed = counts[:, cells]
    z = (((observed - expected) ** 2 - observed) / expected).sum(axis=1)
    scale = math.sqrt(2.0 * cells.sum())
    rejecting = int((z >= _threshold(int(cells.sum()))).sum())
    pvalue = float(stats.binom.sf(rejecting - 1, batches, BATCH_LEVEL)) if rejecting else 1.0
    return IdentityTest(
        pvalue,
        tuple((z / scale).tolist()),
        rejecting,
        batches,
        int(cells.sum()),
        int(counts.sum()),
        0,
        "adk-chi-square",
    )
