"""The ``shapes`` family's target-law checks: drafts drawn by the harness, the target's own law.

``shapes.first-token`` and ``shapes.position`` test the emitted tokens, completed with the target,
against the target's law at the common vocabulary sizes (failure: ``loss``);
``shapes.acceptance`` tests accepted drafts per call against the exact expectation (failure:
``suboptimal``).  The drafts are drawn from the case's draft law, so these laws are unconditional.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
import torch

from .._laws.cases import StepCase
from .._record.evidence import AcceptedShapeRecord, ShapeRecord
from .._record.result import CheckResult
from ..stats import gof_test, mean_test
from ..strategies._internal.shapes import active_tokens, cell_map, structured_case
from ._base import Check, Context, Decision, check_id, fault_result
from ._shape_base import (
    TARGET_SHAPES,
    LumpedUnit,
    Shape,
    bounded,
    call_rows,
    earlier_hang,
    lumped_units,
    not_run,
    planned_rows,
    run_together,
)
from ._tally import largest_deviation

__all__ = ["ShapeTargetLawCheck", "accepted_law", "tally_completed"]


@dataclasses.dataclass
class ShapeTargetLawCheck(Check):
    """Drafts drawn from a structured draft law; the target's own law and acceptance at common sizes.

    The model is position-only (the law at position ``i`` does not depend on the prefix), so the
    completed token at position ``i`` of a lossless sampler follows the target's row ``i`` exactly,
    and the number of accepted drafts has the exact law ``P(N >= j) = prod_{i<j} sum_t min(p_i, q_i)``.
    Tested: the first token, each later position's marginal (Bonferroni over positions), and the
    mean number of accepted drafts.  A deviation of the joint law with exact marginals is not seen
    here (the ``fit`` family's small models see it).
    """

    shapes: tuple[Shape, ...] = TARGET_SHAPES
    family: str = "shapes"
    case: str | None = None
    statistical: bool = True
    decisions = 3
    proves = "loss"

    @property
    def id(self) -> str:
        return check_id(self.family, "target-law")

    def decision_list(self) -> list[Decision]:
        return [
            Decision(check_id(self.family, name), self.family, None)
            for name in ("first-token", "position", "acceptance")
        ]

    def run(self, ctx: Context) -> list[CheckResult]:
        share = ctx.alpha / len(self.shapes)
        posed = []
        left_out = []
        hang = earlier_hang(ctx)
        if hang is not None:
            return [not_run(d.id, self.family, None, hang) for d in self.decision_list()]
        for declared in self.shapes:
            shape, reduced = bounded(ctx.sut, declared)
            if shape.vocab > ctx.budget.shape_max_vocab:
                left_out.append(
                    f"V={shape.vocab:,}: beyond the {ctx.budget.name} budget's shape_max_vocab "
                    f"{ctx.budget.shape_max_vocab:,}"
                )
                continue
            case = ctx.as_passed(
                structured_case(
                    shape.vocab,
                    shape.k,
                    ctx.seed_for(self.id, shape.label),
                    actives=shape.actives,
                    label="position-model",
                )
            )
            cells, labels = cell_map(active_tokens(case), shape.vocab)
            df = len(labels) * (shape.k + 1) - 1
            rows, needed = planned_rows(ctx, shape, df, share / shape.k)
            seed = ctx.seed_for(self.id, shape.label, "rows")
            units = lumped_units(
                ctx,
                case,
                cells,
                len(labels),
                rows,
                ctx.seed_for(seed, "sampler"),
                call_rows(ctx.sut, shape),
                harness=seed,
            )
            posed.append(((shape, reduced, case, cells, labels, rows, needed), units))
        ran = run_together(
            ctx, tally_completed, [units for _, units in posed], [self.id] * len(posed), stop_at_fault=True
        )
        fault = next((r.fault for r in ran if r.fault is not None), None)
        if fault is not None:
            return [fault_result(d, fault) for d in self.decision_list()]
        tallies = [(*what, outcome.result) for (what, _), outcome in zip(posed, ran)]
        note = f" ({'; '.join(left_out)})" if left_out else ""
        if not tallies:
            return [
                CheckResult(
                    id=d.id,
                    family=self.family,
                    case=None,
                    status="skip",
                    message=f"no shape within the budget's limits{note}",
                )
                for d in self.decision_list()
            ]
        first_id, position_id, accept_id = (d.id for d in self.decision_list())
        return [
            self._law_result(ctx, first_id, [0], tallies, share, note),
            self._law_result(ctx, position_id, None, tallies, share, note),
            self._acceptance_result(ctx, accept_id, tallies, share, note),
        ]

    def _law_result(
        self, ctx: Context, rid: str, positions: list[int] | None, tallies: list, share: float, note: str
    ) -> CheckResult:
        """The completed token's law at ``positions`` (``None``: 1..K), Bonferroni over shapes and positions."""
        worst_p, claim, failure = 1.0, 0.0, None
        evidence: list[ShapeRecord] = []
        power = ctx.budget.power
        for shape, reduced, case, cells, labels, rows, needed, (completed, _) in tallies:
            p = case.target_probs / case.target_probs.sum(-1, keepdim=True)
            lumped = torch.zeros((case.k + 1, len(labels)), dtype=torch.float64).index_add_(1, cells, p).numpy()
            at = positions or list(range(1, case.k + 1))
            level = share / len(at)
            for i in at:
                obs = completed[i]
                gof = gof_test(obs, lumped[i], alpha=level, random_state=ctx.seed_for(rid, shape.label, i))
                detectable = gof.min_detectable_tv(level, power)
                claim = max(claim, detectable)
                expected = lumped[i] * obs.sum()
                entry: ShapeRecord = {
                    "V": shape.vocab,
                    "K": shape.k,
                    "position": i,
                    "rows": rows,
                    "rows_needed": needed,
                    "test": gof.method,
                    "df": gof.df,
                    "pvalue": gof.pvalue,
                    "min_detectable_tv": detectable,
                    "cells": labels,
                    "observed": obs.tolist(),
                    "expected": expected.tolist(),
                    "where": largest_deviation(obs, expected, lambda g, c: labels[c]),
                }
                if reduced:
                    entry["reduced"] = reduced
                evidence.append(entry)
                if gof.pvalue <= level and failure is None:
                    failure = f"V={shape.vocab:,}, K={shape.k}, position {i}: {entry['where']}"
                worst_p = min(worst_p, min(1.0, gof.pvalue * len(at)))
        new_result = functools.partial(
            CheckResult,
            id=rid,
            family=self.family,
            case=None,
            alpha=ctx.alpha,
            samples=sum(t[5] for t in tallies),
            proves="loss",
            p_value=min(1.0, worst_p * len(self.shapes)),
            min_detectable_tv=claim,
            evidence={
                "shapes": evidence,
                "sized_for_tv": ctx.budget.shape_tv,
                "ceiling_tv": ctx.budget.shape_ceiling_tv,
            },
        )
        what = "the first token" if positions == [0] else "each later position's completed token"
        if failure is not None:
            return new_result(
                status="fail", finding="loss", message=f"{what} does not follow the target's law: {failure}"
            )
        status = "pass" if claim <= ctx.budget.shape_ceiling_tv else "inconclusive"
        sizes = ", ".join(f"V={t[0].vocab:,} (K={t[0].k}, {t[5]:,} rows)" for t in tallies)
        return new_result(
            status=status,
            message=f"{what} follows the target's law at {sizes}; detects TV >= {claim:.3g} on the lumped cells (this "
            f"family's ceiling {ctx.budget.shape_ceiling_tv:g}){note}",
        )

    def _acceptance_result(self, ctx: Context, rid: str, tallies: list, share: float, note: str) -> CheckResult:
        """Mean accepted drafts against the exact expectation, both tails at ``share / 2`` per shape."""
        worst_p, inconclusive = 1.0, False
        evidence: list[AcceptedShapeRecord] = []
        for shape, _, case, _, _, rows, _, (_, accepted) in tallies:
            test = mean_test(
                np.repeat(np.arange(case.k + 1), accepted), accepted_law(case), alpha=share / 2, power=ctx.budget.power
            )
            drop = test.min_detectable_drop
            assert drop is not None  # mean_test was given alpha
            ceiling = case.k * ctx.budget.shape_ceiling_tv  # a TV deviation t moves the mean by at most K t
            evidence.append(
                AcceptedShapeRecord(
                    {
                        "V": shape.vocab,
                        "K": shape.k,
                        "rows": rows,
                        "expected_accepted": test.expected_mean,
                        "observed_accepted": test.observed_mean,
                        "min_detectable_drop": drop,
                        "ceiling_drop": ceiling,
                        "pvalue_low": test.pvalue_low,
                        "pvalue_high": test.pvalue_high,
                    }
                )
            )
            low = test.pvalue_low <= share / 2
            high = test.pvalue_high <= share / 2 and ctx.sut.capabilities.canonical
            if low or high:
                return CheckResult(
                    id=rid,
                    family=self.family,
                    case=None,
                    status="fail",
                    finding="suboptimal" if low else "non-canonical",
                    proves="suboptimal",
                    p_value=test.pvalue_low if low else test.pvalue_high,
                    alpha=ctx.alpha,
                    samples=rows,
                    evidence={"shapes": evidence},
                    message=f"V={shape.vocab:,}, K={shape.k}: {test.observed_mean:.4f} accepted drafts per call, "
                    f"canonical {test.expected_mean:.4f} ({'fewer' if low else 'more'})",
                )
            worst_p = min(worst_p, min(1.0, 2 * min(test.pvalue_low, test.pvalue_high)))
            inconclusive |= drop > ceiling
        return CheckResult(
            id=rid,
            family=self.family,
            case=None,
            status="inconclusive" if inconclusive else "pass",
            proves="suboptimal",
            p_value=min(1.0, worst_p * len(self.shapes)),
            alpha=ctx.alpha,
            samples=sum(t[5] for t in tallies),
            evidence={"shapes": evidence},
            message="accepted drafts per call match the exact expectation at "
            + ", ".join(f"V={t[0].vocab:,}, K={t[0].k}" for t in tallies)
            + note,
        )


def accepted_law(case: StepCase) -> np.ndarray:
    """``[K+1]``: law of the accepted count when draft ``i`` is drawn from ``q_i`` independently."""
    p = case.target_probs[: case.k] / case.target_probs[: case.k].sum(-1, keepdim=True)
    q = case.draft_probs / case.draft_probs.sum(-1, keepdim=True)
    a = torch.minimum(p, q).sum(-1).clamp(max=1.0).numpy()
    reach = np.concatenate([[1.0], np.cumprod(a)])
    return reach * np.concatenate([1.0 - a, [1.0]])


def tally_completed(sut: Any, unit: LumpedUnit) -> tuple[np.ndarray, np.ndarray]:
    """A unit's drafts drawn from its case's draft rows (stream ``unit.harness``), the emitted
    tokens completed with the target's draws: ``([K+1, C] completed-token counts, [K+1] accepted
    counts)``, tallied where the sampler runs."""
    case, n_cells, rows, per_call = unit.case, unit.n_cells, unit.rows, unit.per_call
    k = case.k
    harness = torch.Generator().manual_seed(unit.harness if unit.harness is not None else unit.seed)
    q = case.draft_probs / case.draft_probs.sum(-1, keepdim=True)
    p = case.target_probs / case.target_probs.sum(-1, keepdim=True)
    completed = np.zeros((k + 1, n_cells), dtype=np.int64)
    accepted_counts = np.zeros(k + 1, dtype=np.int64)
    fills = []  # each call's target draws, drawn with its drafts (one call ahead of the outputs)

    def batches():
        for start in range(0, rows, per_call):  # over calls, not rows
            n = min(per_call, rows - start)
            drafts = torch.multinomial(q, n, replacement=True, generator=harness).T.contiguous()  # [n, K]
            fills.append(torch.multinomial(p, n, replacement=True, generator=harness).T)  # [n, K+1] target draws
            yield case.target_probs.expand(n, -1, -1), case.draft_probs.expand(n, -1, -1), drafts

    for index, (tokens, accepted) in enumerate(
        sut.steps(batches(), generator=sut.generator(unit.seed), dtype=unit.dtype)
    ):
        fill = fills[index]
        emitted = torch.arange(k + 1)[None, :] <= accepted[:, None]
        full = torch.where(emitted, tokens, fill)
        codes = torch.arange(k + 1)[None, :] * n_cells + unit.cells[full]
        completed += np.bincount(codes.reshape(-1).numpy(), minlength=completed.size).reshape(k + 1, n_cells)
        accepted_counts += np.bincount(accepted.numpy(), minlength=k + 1)
    return completed, accepted_counts
