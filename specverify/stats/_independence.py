"""Independence of paired outcomes: across calls, across batch rows, across batch compositions.

A sampler that reuses uniforms, repeats itself across calls or couples the rows of a batch produces
outcomes that depend on each other.  A G-test of independence on the contingency table of paired
outcomes detects it.  Two things keep its false-positive rate honest on the tables a sampler
produces (many outcomes, some rare):

* rare categories are pooled by their *marginal* counts (legitimate: the test conditions on the
  margins) until every cell of the table expects at least ``MIN_EXPECTED`` observations; without
  that, a table of rare categories is far off its chi-square law (conservative or liberal);
* the G statistic is divided by Williams' factor for contingency tables, which brings its mean to
  the degrees of freedom; uncorrected, a 18 x 18 table's G rejects four times too often at 1e-3.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import special

from ._gof_resampling import g_statistic
from ._power import min_detectable_tv

__all__ = ["IndependenceTest", "homogeneity_test", "independence_test"]

#: Categories are pooled until every cell of the table expects at least this many observations.
MIN_EXPECTED = 10.0


@dataclasses.dataclass(frozen=True)
class IndependenceTest:
    """Result of :func:`independence_test` or :func:`homogeneity_test`.

    Attributes:
        statistic: Williams-corrected G of the pooled table.
        pvalue: its chi-square p-value.
        df: ``(rows - 1) * (columns - 1)`` of the pooled table.
        samples: observations (pairs, or counts in all rows).
        cramers_v: Cramer's V of the pooled table, an effect size in [0, 1].
        pooled_mass: share of the observations in pooled categories (of either margin); a
            dependence confined to them is invisible, so it adds to the smallest detectable TV.
        shape: shape of the pooled table.
    """

    statistic: float
    pvalue: float
    df: int
    samples: int
    cramers_v: float
    pooled_mass: float = 0.0
    shape: tuple[int, int] = (0, 0)

    def min_detectable_tv(self, alpha: float, power: float = 0.99) -> float:
        """Smallest TV between the joint law and the product of its margins detected with ``power``.

        For :func:`homogeneity_test` of two equal-sized rows, a TV of ``t`` between the rows' laws
        is a TV of ``t / 2`` between joint and product.
        """
        if self.df < 1:
            return 1.0
        return min(1.0, min_detectable_tv(self.samples, self.df, alpha, power) + self.pooled_mass)


def independence_test(a: np.ndarray, b: np.ndarray) -> IndependenceTest:
    """G-test that paired categorical outcomes ``a[i]``, ``b[i]`` are independent."""
    a = np.asarray(a).reshape(-1)
    b = np.asarray(b).reshape(-1)
    if a.size != b.size:
        raise ValueError(f"paired outcomes differ in length: {a.size} and {b.size}")
    if a.size == 0:
        return IndependenceTest(0.0, 1.0, 0, 0, 0.0)
    _, rows = np.unique(a, return_inverse=True)
    _, cols = np.unique(b, return_inverse=True)
    shape = (int(rows.max()) + 1, int(cols.max()) + 1)
    table = np.bincount(rows * shape[1] + cols, minlength=shape[0] * shape[1]).reshape(shape)
    return _contingency(table.astype(np.float64))


def homogeneity_test(counts: np.ndarray) -> IndependenceTest:
    """G-test that several samples (rows of ``counts``, outcomes in columns) come from one law."""
    table = np.asarray(counts, dtype=np.float64)
    if table.ndim != 2:
        raise ValueError(f"counts must be [samples, outcomes], got shape {table.shape}")
    return _contingency(table)


def _contingency(table: np.ndarray) -> IndependenceTest:
    table = table[table.sum(axis=1) > 0][:, table.sum(axis=0) > 0]
    n = float(table.sum())
    if min(table.shape) < 2:
        return IndependenceTest(0.0, 1.0, 0, int(n), 0.0, 0.0, table.shape)
    # Rows first to sqrt(MIN_EXPECTED * n) (a homogeneity test's few large rows are left alone),
    # then columns to what the smallest row needs.
    row_labels, row_pooled = _pool_margin(table.sum(axis=1), math.sqrt(MIN_EXPECTED * n))
    table = _relabel(table, row_labels, axis=0)
    smallest_row = float(table.sum(axis=1).min())
    col_labels, col_pooled = _pool_margin(table.sum(axis=0), MIN_EXPECTED * n / smallest_row)
    table = _relabel(table, col_labels, axis=1)
    smallest_col = float(table.sum(axis=0).min())
    if smallest_col * float(table.sum(axis=1).min()) < MIN_EXPECTED * n and table.shape[0] > 1:
        # Columns pooled to one side of the threshold may need the rows pooled further.
        row_labels, more = _pool_margin(table.sum(axis=1), MIN_EXPECTED * n / smallest_col)
        table = _relabel(table, row_labels, axis=0)
        row_pooled = row_pooled + more
    pooled = (row_pooled + col_pooled) / n
    if min(table.shape) < 2:
        return IndependenceTest(0.0, 1.0, 0, int(n), 0.0, pooled, table.shape)
    rows, cols = table.sum(axis=1), table.sum(axis=0)
    expected = np.outer(rows, cols) / n
    r, c = table.shape
    williams = 1.0 + (n * (1.0 / rows).sum() - 1.0) * (n * (1.0 / cols).sum() - 1.0) / (6.0 * n * (r - 1) * (c - 1))
    raw = float(g_statistic(table.reshape(-1), expected.reshape(-1)))
    statistic = raw / williams
    df = (r - 1) * (c - 1)
    v = math.sqrt(raw / (n * (min(r, c) - 1)))
    return IndependenceTest(statistic, float(special.chdtrc(df, statistic)), df, int(n), v, pooled, (r, c))


def _pool_margin(margin: np.ndarray, minimum: float) -> tuple[np.ndarray, float]:
    """Labels pooling categories of small margin (smallest first) until each pool holds ``minimum``.

    Returns the labels and the observations in categories that were pooled.  A remainder too small
    for a pool of its own joins the last pool (or, failing one, the smallest kept category).
    """
    labels = np.arange(margin.size)
    small = np.flatnonzero(margin < minimum)
    if small.size == 0:
        return labels, 0.0
    small = small[np.argsort(margin[small], kind="stable")]
    start, running, pools = 0, 0.0, []
    for position, cell in enumerate(small):  # loops over categories, never over samples
        running += margin[cell]
        if running >= minimum:
            pools.append(small[start : position + 1])
            start, running = position + 1, 0.0
    rest = small[start:]
    if rest.size:
        if pools:
            pools[-1] = np.concatenate([pools[-1], rest])
        else:
            kept = np.setdiff1d(np.arange(margin.size), small)
            anchor = kept[np.argmin(margin[kept])] if kept.size else rest[0]
            pools.append(np.concatenate([[anchor], rest]) if kept.size else rest)
    pooled = 0.0
    for pool in pools:
        labels[pool] = pool[0]
        if pool.size > 1:
            pooled += float(margin[pool].sum())
    return labels, pooled


def _relabel(table: np.ndarray, labels: np.ndarray, axis: int) -> np.ndarray:
    _, dense = np.unique(labels, return_inverse=True)
    moved = np.moveaxis(table, axis, 0)
    out = np.zeros((int(dense.max()) + 1,) + moved.shape[1:])
    for source, target in enumerate(dense):  # loops over categories, never over samples
        out[target] += moved[source]
    return np.moveaxis(out, 0, axis)
