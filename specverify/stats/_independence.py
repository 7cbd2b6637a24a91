"""Independence of paired outcomes: across calls, across batch rows, across batch compositions.

A sampler that reuses uniforms, repeats itself across calls or couples the rows of a batch produces
outcomes that depend on each other.  A G-test of independence on the contingency table of paired
outcomes detects it; rare categories are pooled by their *marginal* counts, which is legitimate here
because the test conditions on the margins.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy import stats

__all__ = ["IndependenceTest", "homogeneity_test", "independence_test"]

_MIN_MARGIN_SHARE = 0.01


@dataclasses.dataclass(frozen=True)
class IndependenceTest:
    """Result of :func:`independence_test` or :func:`homogeneity_test`."""

    statistic: float
    pvalue: float
    df: int
    samples: int
    cramers_v: float


def _pool(codes: np.ndarray, minimum: int) -> np.ndarray:
    values, inverse, counts = np.unique(codes, return_inverse=True, return_counts=True)
    rare = counts < minimum
    if rare.any() and not rare.all():
        counts_label = np.where(rare, -1, np.arange(values.size))
        return counts_label[inverse]
    return inverse


def independence_test(a: np.ndarray, b: np.ndarray) -> IndependenceTest:
    """G-test that paired categorical outcomes ``a[i]``, ``b[i]`` are independent."""
    a = np.asarray(a).reshape(-1)
    b = np.asarray(b).reshape(-1)
    n = a.size
    minimum = max(5, int(_MIN_MARGIN_SHARE * n / 10))
    rows = _pool(a, minimum)
    cols = _pool(b, minimum)
    _, rows = np.unique(rows, return_inverse=True)
    _, cols = np.unique(cols, return_inverse=True)
    table = np.zeros((rows.max() + 1, cols.max() + 1))
    np.add.at(table, (rows, cols), 1)
    if min(table.shape) < 2:
        return IndependenceTest(0.0, 1.0, 0, n, 0.0)
    result = stats.chi2_contingency(table, correction=False, lambda_="log-likelihood")
    v = float(np.sqrt(result.statistic / (n * (min(table.shape) - 1))))
    return IndependenceTest(float(result.statistic), float(result.pvalue), int(result.dof), n, v)


def homogeneity_test(counts: np.ndarray) -> IndependenceTest:
    """G-test that several samples (rows of ``counts``) come from one law."""
    table = np.asarray(counts, dtype=np.float64)
    table = table[:, table.sum(axis=0) > 0]
    n = int(table.sum())
    if table.shape[1] < 2 or (table.sum(axis=1) == 0).any():
        return IndependenceTest(0.0, 1.0, 0, n, 0.0)
    result = stats.chi2_contingency(table, correction=False, lambda_="log-likelihood")
    v = float(np.sqrt(result.statistic / (n * (min(table.shape) - 1))))
    return IndependenceTest(float(result.statistic), float(result.pvalue), int(result.dof), n, v)
