"""Drawing and tallying the ``trees`` family's rows, and the law decisions made on the tallies.

Rows go to the sampler in chunks that double from :data:`FIRST_LOOK` up to a call's worth, so a
sequential test looks after 256, 768, 1,792, ... rows; a failing sampler stops being called as soon
as the evidence is in, a passing one draws the rows its fixed test was sized for.

A law decision at level ``alpha`` is two tests joined by Bonferroni: the fixed G-test at
``(1 - SEQUENTIAL_SHARE) * alpha`` on the rows planned for it, and a mixture e-process
(:class:`specverify.stats.SequentialTest`, anytime-valid by Ville's inequality) at
``SEQUENTIAL_SHARE * alpha``, watched after every chunk.  Its p-value is
``min(1, p_fixed / (1 - s), 1 / (e s))``: the decision's level is ``alpha`` whenever it stops.
Rows are planned at the fixed test's share (0.4% more rows than at the whole ``alpha``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from .._calling.sut import SamplerUnderTest
from .._kinds import kind_of
from .._record.evidence import Evidence
from .._record.result import CheckResult
from .._trees.contract import TreeBatch
from ..stats import SequentialTest, gof_test
from ._base import Context
from ._batteries import TREES
from ._tally import largest_deviation

__all__ = [
    "CHUNK_ELEMENTS",
    "CHUNK_ROWS",
    "DECLARED_LAW",
    "FIRST_LOOK",
    "SEQUENTIAL_SHARE",
    "TARGET_LAW",
    "LawDecision",
    "ceiling",
    "detects",
    "expand",
    "law_result",
    "planned_rows",
    "run_rows",
    "sut_of",
    "tally",
]

#: Rows per sampler call the family makes (the sampler's own max_batch splits them further) ...
CHUNK_ROWS = 4_096
#: ... and most probabilities (rows x N x V) in one call's tree.
CHUNK_ELEMENTS = 2**22
#: Rows of the first chunk (the first look of a sequential test); each next chunk doubles, up to a call.
FIRST_LOOK = 256
#: The share of a law decision's level its anytime-valid test spends (the fixed test has the rest).
SEQUENTIAL_SHARE = 0.1

DECLARED_LAW, TARGET_LAW = "the declared algorithm's law", "the target's law"


def sut_of(ctx: Context) -> SamplerUnderTest:
    """The context's sampler, a tree sampler (``TreeCheck.skip_reason`` lets no other run)."""
    if not kind_of(ctx.sut).runs(TREES):
        raise TypeError(f"a tree check was given a sampler of the {kind_of(ctx.sut).name} kind, not a tree sampler")
    return ctx.sut


def ceiling(ctx: Context, large: bool) -> float:
    return ctx.budget.shape_ceiling_tv if large else ctx.budget.ceiling_tv


def planned_rows(ctx: Context, df: int, alpha: float, *, large: bool, row_elements: int) -> int:
    """Rows a test at ``alpha`` with ``df`` needs to detect the budget's TV (the shape TV for a
    ``large`` shape, whose rows its volume also bounds) with the budget's power."""
    budget = ctx.budget
    if not large:
        return budget.sample_size(df, alpha, cap=budget.max_samples).samples
    cap = min(budget.max_samples, budget.volume_cap(row_elements))
    return budget.sample_size(df, alpha, tv=budget.shape_tv, cap=cap).samples


def expand(tree: TreeBatch, rows: int) -> TreeBatch:
    draft = None if tree.draft_probs is None else tree.draft_probs.expand(rows, -1, -1)
    return TreeBatch(
        tree.parents.expand(rows, -1), tree.tokens.expand(rows, -1), tree.target_probs.expand(rows, -1, -1), draft
    )


def run_rows(
    ctx: Context, tree_for: Callable[[int, torch.Generator], TreeBatch], rows: int, seed: int, row_size: int
) -> Iterator[Any]:
    """Yield ``(tree, path, token)`` over ``rows`` rows (``row_size`` probabilities a row), a chunk a
    call, chunks doubling from :data:`FIRST_LOOK` rows (a caller may stop after any of them)."""
    sut = sut_of(ctx)
    g = torch.Generator().manual_seed(seed)
    generator = sut.generator(ctx.seed_for(seed, "sampler"))
    chunk = max(1, min(CHUNK_ROWS, CHUNK_ELEMENTS // row_size))
    size, start = min(chunk, FIRST_LOOK), 0
    while start < rows:
        count = min(size, rows - start)
        tree = sut.passed(tree_for(count, g))
        path, token = sut.step(tree, generator=generator)
        ctx.advance(count)
        yield tree, path, token
        start, size = start + count, min(chunk, 2 * size)


def tally(
    ctx: Context,
    tree_for: Callable[[int, torch.Generator], TreeBatch],
    rows: int,
    seed: int,
    row_size: int,
    size: int,
    cells: Callable[[TreeBatch, torch.Tensor, torch.Tensor], torch.Tensor],
    *,
    sequential: LawDecision | None = None,
    also: Callable[[TreeBatch, torch.Tensor, torch.Tensor], None] | None = None,
) -> tuple[np.ndarray, TreeBatch | None]:
    """Counts of the ``size`` cells ``cells(tree, path, token)`` puts the sampler's outputs in, over
    ``rows`` rows (see :func:`run_rows`), and the last tree called.  ``also`` sees every chunk too
    (a second tally of the same rows); ``sequential`` is fed each chunk's counts and stops the draw
    when its anytime-valid test rejects."""
    counts = np.zeros(size, dtype=np.int64)
    tree = None
    for tree, path, token in run_rows(ctx, tree_for, rows, seed, row_size):
        chunk = np.bincount(cells(tree, path, token).numpy(), minlength=size)
        counts += chunk
        if also is not None:
            also(tree, path, token)
        if sequential is not None and sequential.watch(chunk):
            break
    return counts, tree


@dataclasses.dataclass
class LawDecision:
    """A law decision at ``alpha``: the fixed G-test at ``(1 - SEQUENTIAL_SHARE) * alpha`` and the
    e-process at ``SEQUENTIAL_SHARE * alpha`` (module docstring), on the counts of one law."""

    law: np.ndarray
    alpha: float
    tv: float
    planned: int = 0
    test: SequentialTest = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.test = SequentialTest(self.law, self.alpha * SEQUENTIAL_SHARE, self.tv)

    @property
    def fixed_alpha(self) -> float:
        return self.alpha * (1 - SEQUENTIAL_SHARE)

    def watch(self, counts: np.ndarray) -> bool:
        """Add a chunk's counts; whether the anytime-valid test has rejected (the draw may stop)."""
        return self.test.update(counts)

    def pvalue(self, fixed_pvalue: float) -> float:
        """The decision's p-value: Bonferroni over the fixed test and the e-value (``1/e`` is a valid p-value)."""
        e_pvalue = math.exp(-min(self.test.log_e_value, 700.0))
        return min(1.0, fixed_pvalue / (1 - SEQUENTIAL_SHARE), e_pvalue / SEQUENTIAL_SHARE)

    def record(self, rows: int) -> Evidence:
        """What the sequential half did, for the evidence."""
        return {
            "log_e_value": self.test.log_e_value,
            "sequential_alpha": self.alpha * SEQUENTIAL_SHARE,
            "fixed_alpha": self.fixed_alpha,
            "planned_rows": self.planned,
            "stopped_early": rows < self.planned,
        }

    def gof(
        self, check_id: str, ctx: Context, counts: np.ndarray, cell_name: Callable[[int], str]
    ) -> tuple[Any, float, float, np.ndarray, str]:
        """The fixed G-test of ``counts``: the test, the decision's p-value, the TV it detects, the
        expected counts and the largest deviation."""
        rows = int(counts.sum())
        test = gof_test(counts, self.law, alpha=self.fixed_alpha, random_state=ctx.seed_for(check_id, "gof"))
        expected = self.law * rows
        where = largest_deviation(counts, expected, lambda g, c: cell_name(c))
        return (
            test,
            self.pvalue(test.pvalue),
            test.min_detectable_tv(self.fixed_alpha, ctx.budget.power),
            expected,
            where,
        )


def detects(test: Any, claim: float, power: float, law: str) -> str:
    """What a law test detects, in words: a TV bound, or, where it saw outcomes the law gives
    probability 0, that (one such outcome is proof; no TV is involved, so none is printed)."""
    if test.method == "impossible":
        return (
            f"{test.impossible} outcomes of probability 0 under {law} were emitted (one is proof that the law is not "
            "followed)"
        )
    return f"TV >= {claim:.3g} detected with probability >= {power}"


def law_result(
    check: Any,
    ctx: Context,
    test: Any,
    pvalue: float,
    claim: float,
    rows: int,
    evidence: Evidence,
    summary: str,
    failure: str,
    finding: str,
    large: bool,
) -> CheckResult:
    """A law check's result: ``fail`` (with ``finding``) at ``p <= alpha``, else ``pass`` where the
    detectable TV is within the budget's ceiling, ``inconclusive`` where it is not."""
    # outcomes of probability 0 seen: proof with no TV involved, so no TV is claimed (none printed)
    common = dict(
        alpha=ctx.alpha,
        p_value=pvalue,
        samples=rows,
        min_detectable_tv=None if test.method == "impossible" else claim,
        evidence=evidence,
    )
    if pvalue <= ctx.alpha:
        stopped = (
            f" (stopped after {rows} of {evidence['planned_rows']} rows: the anytime-valid test rejected)"
            if evidence.get("stopped_early")
            else ""
        )
        return check.result("fail", f"{failure}; {summary}{stopped}", finding=finding, **common)
    top = ceiling(ctx, large)
    status = "pass" if claim <= top else "inconclusive"
    return check.result(status, summary + ("" if status == "pass" else f", above the ceiling {top:.3g}"), **common)
