"""The ``shapes`` family: the law at production shapes and at float edges.

Kernels break where the small cases of the other families never go: past a tile of the vocabulary,
past the range of a narrow index type, past a fixed-size per-position array, at large batches, and
where a residual rounds to zero.  These checks give the sampler those inputs and test its *law*:

* ``shapes.conditional[<V>x<K>]``: a structured step case (mass on tokens across tiles and index
  boundaries, diffuse tails) at each production shape; the law of (accepted drafts, last token)
  on the active tokens and lumped tail cells against the exact law (failure: ``non-canonical``);
* ``shapes.first-token``, ``shapes.position``: drafts drawn by the harness from a structured draft
  law at the common vocabulary sizes, the emitted tokens completed with the target, against the
  target's own law (failure: ``loss``); ``shapes.acceptance``: accepted drafts per call against
  the exact expectation (failure: ``suboptimal``);
* ``shapes.edge-law[<kind>]``: float edges (sub-ulp, zero and small residuals, exact zeros next
  to sub-ulp mass, one-ulp and near-equal laws, bf16/fp16 rounding) as law tests;
* ``shapes.uniform-driven[<V>x<K>]`` (samplers that take injected uniforms): the exact family's
  uniform grid at full size (V up to 262,144, K up to 16) on a structured case, one point per cell
  of the partition by accepted prefix (``K + 1`` prefixes, not ``2^K`` corners) and residual token:
  every output canonical, no sampling error.

A structured case's law lives on a few dozen cells whatever ``V``, so the samples a test needs do
not grow with ``V``; the sampler's own cost does (it reads every probability of every row), so a
budget affords fewer rows at the largest vocabularies, and each result claims the TV its rows
reach, held to :attr:`~specverify.Budget.shape_ceiling_tv`, its own ceiling (stated in its
message and evidence).  A sampler's declared limits bound every shape; what was reduced is said.

Every law difference found given forced drafts states two sizes (:mod:`._event`): its TV given the
drafts, and the probability of drafts as rare, which bounds how far the emitted law moves; below
the resolution it is a ``float-edge`` result, shown and deciding nothing.  The target-law checks
(:mod:`._shape_target`) and the uniform grid (:mod:`._shape_grid`) are modules of their own.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
import torch

from .._calling.sut import SamplerUnderTest
from .._laws.cases import StepCase
from .._record.evidence import Evidence, tv_record
from .._record.result import CheckResult
from ..errors import SamplerFault
from ..stats import gof_test, identity_plan, identity_test, tv_estimate
from ..strategies._internal.shapes import EDGE_LAW_KINDS, active_tokens, cell_map, edge_case, structured_case
from ._base import Check, Context, Decision, check_id, fault_result
from ._event import event_size, sized_status, sizes_text
from ._shape_base import (
    CONDITIONAL_SHAPES,
    EDGE_ACTIVE,
    EDGE_SHAPE,
    EDGE_VOCAB,
    FULL_DOMAIN_SHAPE,
    TARGET_SHAPES,
    LumpedUnit,
    Ran,
    Shape,
    beyond_budget,
    bounded,
    call_rows,
    count_lumped,
    earlier_hang,
    lumped_law,
    lumped_units,
    not_run,
    planned_rows,
    remember_hang,
    run_together,
)
from ._shape_grid import FullSizeGridCheck, prefix_grid
from ._shape_target import ShapeTargetLawCheck
from ._tally import largest_deviation, tally

__all__ = [
    "CONDITIONAL_SHAPES",
    "EDGE_SHAPE",
    "EDGE_VOCAB",
    "FULL_DOMAIN_SHAPE",
    "TARGET_SHAPES",
    "EdgeLawCheck",
    "FullSizeGridCheck",
    "Shape",
    "ShapeConditionalCheck",
    "ShapeTargetLawCheck",
    "call_rows",
    "earlier_hang",
    "lumped_law",
    "prefix_grid",
    "remember_hang",
]


def _claim_note(ctx: Context, claim: float, rows: int, needed: int) -> str:
    budget = ctx.budget
    sized = f"sized for TV {budget.shape_tv:g}" + (
        "" if rows >= needed else f" ({needed:,} rows; the budget's volume affords {rows:,})"
    )
    return f"detects TV >= {claim:.3g} on the lumped cells ({sized}; this family's ceiling {budget.shape_ceiling_tv:g})"


@dataclasses.dataclass
class ShapeConditionalCheck(Check):
    """The law given the drafts on a structured case at each production shape."""

    shapes: tuple[Shape, ...] = CONDITIONAL_SHAPES
    family: str = "shapes"
    case: str | None = None
    statistical: bool = True
    decisions = 1  # one share of the budget, split among the shapes (Bonferroni)
    proves = "non-canonical"

    @property
    def id(self) -> str:
        return check_id(self.family, "conditional")

    def decision_list(self) -> list[Decision]:
        full = Decision(
            check_id(self.family, "full-law", FULL_DOMAIN_SHAPE.label), self.family, FULL_DOMAIN_SHAPE.label
        )
        return [Decision(check_id(self.family, "conditional", s.label), self.family, s.label) for s in self.shapes] + [
            full
        ]

    def run(self, ctx: Context) -> list[CheckResult]:
        full = ctx.budget.shape_full_domain
        share = ctx.alpha / (len(self.shapes) + full)
        results: list[CheckResult | None] = []
        posed: list[
            tuple[int, str, Any, list[LumpedUnit]]
        ] = []  # (index in results, id, how to judge its counts, its units)
        hang = earlier_hang(ctx)
        for declared in self.shapes:
            rid = check_id(self.family, "conditional", declared.label)
            shape, reduced = bounded(ctx.sut, declared)
            if shape.vocab > ctx.budget.shape_max_vocab:
                results.append(beyond_budget(ctx, rid, self.family, declared.label, shape))
                continue
            if hang is not None:
                results.append(not_run(rid, self.family, declared.label, hang))
                continue
            case = ctx.as_passed(
                structured_case(
                    shape.vocab,
                    shape.k,
                    ctx.seed_for(rid, "case"),
                    accept_until=shape.accept_until,
                    actives=shape.actives,
                )
            )
            cells, labels = cell_map(active_tokens(case), shape.vocab)
            law = lumped_law(case, cells, len(labels))
            df = int((law > 0).sum()) - 1
            rows, needed = planned_rows(ctx, shape, df, share)
            per_call = call_rows(ctx.sut, shape)
            extra: Evidence = {
                "V": shape.vocab,
                "K": shape.k,
                "rows_per_call": per_call,
                "rows_needed": needed,
                "sized_for_tv": ctx.budget.shape_tv,
            }
            if reduced:
                extra["reduced"] = reduced
            judge = functools.partial(
                _lumped_result,
                ctx,
                Decision(rid, self.family, declared.label),
                case,
                labels,
                law,
                rows,
                share,
                kind="structured",
                extra=extra,
                fault_evidence={"V": shape.vocab, "K": shape.k},
                where=f"V={shape.vocab:,}, K={shape.k}",
                law_name="law given the drafts",
                claim_note=functools.partial(_reduced_note, ctx, rows, needed, reduced),
            )
            posed.append(
                (
                    len(results),
                    rid,
                    judge,
                    lumped_units(ctx, case, cells, len(labels), rows, ctx.seed_for(rid, "rows"), per_call),
                )
            )
            results.append(None)
        # the shapes' units in one stream (a hang stops the shapes after it; another fault does not)
        ran = run_together(ctx, count_lumped, [units for *_, units in posed], [rid for _, rid, _, _ in posed])
        for (at, _, judge, _), outcome in zip(posed, ran):
            results[at] = judge(outcome)
        fault = earlier_hang(ctx)
        results.append(
            _full_law(ctx, share, fault)
            if full
            else CheckResult(
                id=self.decision_list()[-1].id,
                family=self.family,
                case=FULL_DOMAIN_SHAPE.label,
                status="skip",
                message="the full-domain identity test runs at budgets with shape_full_domain (thorough); "
                f"{ctx.budget.name} tests the lumped law",
            )
        )
        return [r for r in results if r is not None]


def _reduced_note(ctx: Context, rows: int, needed: int, reduced: str | None, claim: float) -> str:
    return _claim_note(ctx, claim, rows, needed) + (f"; {reduced}" if reduced else "")


def _full_law(ctx: Context, alpha: float, fault: SamplerFault | None) -> CheckResult:
    """The whole law of one shape, every (accepted, token) cell, by the identity test."""
    family = "shapes"
    shape, reduced = bounded(ctx.sut, FULL_DOMAIN_SHAPE)
    rid = check_id(family, "full-law", FULL_DOMAIN_SHAPE.label)
    fault = fault or earlier_hang(ctx)
    if fault is not None:
        return not_run(rid, family, FULL_DOMAIN_SHAPE.label, fault)
    case = ctx.as_passed(structured_case(shape.vocab, shape.k, ctx.seed_for(rid, "case")))
    law = case.law().reshape(-1).numpy()
    cells = law.size
    eps = ctx.budget.shape_tv
    batches, size = identity_plan(cells, eps, alpha, ctx.budget.power)
    affordable = ctx.budget.volume_cap(shape.row_elements())
    mean_size = min(float(size), affordable / batches)  # what the volume affords: a coarser claim
    harness = np.random.default_rng(ctx.seed_for(rid, "batches"))
    sizes = harness.poisson(mean_size, size=batches)  # Poisson-sized batches: independent cell counts
    batch_of = torch.from_numpy(np.repeat(np.arange(batches), sizes))
    rows = int(sizes.sum())
    per_call = call_rows(ctx.sut, shape)
    generator = ctx.sut.generator(ctx.seed_for(rid, "rows"))
    dtype = ctx.dtype_for(case.precision)
    counts = np.zeros(batches * cells, dtype=np.int64)
    ctx.sut.reach.reset()
    try:
        calls = (case.batch(min(per_call, rows - start)) for start in range(0, rows, per_call))  # over calls, not rows
        start = 0
        for tokens, accepted in ctx.sut.steps(calls, generator=generator, dtype=dtype):
            n = accepted.shape[0]
            code = (
                batch_of[start : start + n] * cells + accepted * shape.vocab + tokens.gather(1, accepted[:, None])[:, 0]
            )
            tally(counts, code.numpy())
            ctx.advance(n)
            start += n
    except SamplerFault as f:
        remember_hang(ctx, rid, f)
        result = fault_result(Decision(rid, family, FULL_DOMAIN_SHAPE.label), f)
        result.reach = ctx.sut.reach.snapshot(kinds=["structured"])
        return result
    test = identity_test(counts.reshape(batches, cells), law, eps=eps, mean_size=mean_size)
    claim = test.min_detectable_tv(alpha, ctx.budget.power)
    evidence: Evidence = {
        "V": shape.vocab,
        "K": shape.k,
        "cells": cells,
        "test": test.method,
        "batches": batches,
        "mean_batch_size": mean_size,
        "planned_batch_size": size,
        "rejecting_batches": test.rejecting,
        "statistics": list(test.statistics),
        "impossible": test.impossible,
        "power_against": "the spread deviation (every cell moved by a relative factor)",
        "ceiling_tv": ctx.budget.shape_ceiling_tv,
    }
    if reduced:
        evidence["reduced"] = reduced
    new_result = functools.partial(
        CheckResult,
        id=rid,
        family=family,
        case=FULL_DOMAIN_SHAPE.label,
        p_value=test.pvalue,
        alpha=alpha,
        samples=rows,
        min_detectable_tv=claim,
        proves="non-canonical",
        evidence=evidence,
    )
    if test.pvalue <= alpha:
        tv = evidence["tv"] = tv_record(tv_estimate(counts.reshape(batches, cells).sum(0), law, random_state=0))
        found = evidence["event"] = event_size(case, tv["estimate"])
        status = sized_status(found)
        result = new_result(
            status=status,
            finding="non-canonical" if status == "fail" else None,
            message=(
                f"V={shape.vocab:,}, K={shape.k}: the whole law (all {cells:,} cells) differs from the exact law: "
                + (
                    f"{test.impossible} outcomes of probability 0"
                    if test.impossible
                    else f"{test.rejecting} of {batches} batches reject (p = {test.pvalue:.3g})"
                )
                + f"; {sizes_text(found)}"
            ),
        )
    else:
        status = "pass" if claim <= ctx.budget.shape_ceiling_tv else "inconclusive"
        result = new_result(
            status=status,
            message=(
                f"V={shape.vocab:,}, K={shape.k}: the whole law over {cells:,} cells exact ({rows:,} rows in {batches} "
                f"batches, {test.rejecting} rejecting); detects a spread deviation of TV >= {claim:.3g}"
            ),
        )
    result.reach = ctx.sut.reach.snapshot(kinds=["structured"])
    return result


def _lumped_result(
    ctx: Context,
    decision: Decision,
    case: StepCase,
    labels: list[str],
    law: np.ndarray,
    rows: int,
    alpha: float,
    ran: Ran,
    *,
    kind: str,
    extra: Evidence,
    fault_evidence: Evidence,
    where: str,
    law_name: str,
    claim_note: Any,
) -> CheckResult:
    """A structured case's lumped counts (``ran``, :func:`run_together`) against its lumped law
    given the drafts (G-test at ``alpha``): a pass with its claim, a failure with where the counts
    deviate most, or the fault (or the earlier hang that left it unrun)."""
    if ran.not_run is not None:
        return not_run(decision.id, decision.family, decision.case, ran.not_run)
    if ran.fault is not None:
        result = fault_result(decision, ran.fault, evidence=fault_evidence)
        result.reach = ran.reach_of(kind)
        return result
    counts = ran.result
    gof = gof_test(counts, law, alpha=alpha, random_state=ctx.seed_for(decision.id, "mc"))
    claim = gof.min_detectable_tv(alpha, ctx.budget.power)
    expected = law * counts.sum()
    n_cells = len(labels)
    deviation = largest_deviation(counts, expected, lambda g, c: f"accepted {c // n_cells}, {labels[c % n_cells]}")
    evidence: Evidence = {
        **extra,
        "rows": rows,
        "test": gof.method,
        "df": gof.df,
        "statistic": gof.statistic,
        "cells": labels,
        "observed": counts.tolist(),
        "expected": expected.tolist(),
        "where": deviation,
        "ceiling_tv": ctx.budget.shape_ceiling_tv,
        "draft_tokens": case.draft_tokens.tolist(),
    }
    new_result = functools.partial(
        CheckResult,
        id=decision.id,
        family=decision.family,
        case=decision.case,
        p_value=gof.pvalue,
        alpha=alpha,
        samples=rows,
        min_detectable_tv=claim,
        proves="non-canonical",
    )
    if gof.pvalue <= alpha:
        tv = evidence["tv"] = tv_record(tv_estimate(counts, law, random_state=0))
        size = evidence["event"] = event_size(case, tv["estimate"])
        status = sized_status(size)
        result = new_result(
            status=status,
            finding="non-canonical" if status == "fail" else None,
            evidence=evidence,
            message=f"{where}: the {law_name} differs from the exact law (p = {gof.pvalue:.3g}); {sizes_text(size)}; "
            f"{deviation}",
        )
    else:
        status = "pass" if claim <= ctx.budget.shape_ceiling_tv else "inconclusive"
        result = new_result(
            status=status, evidence=evidence, message=f"{where}, {rows:,} rows: {law_name} exact; {claim_note(claim)}"
        )
    result.reach = ran.reach_of(kind)
    return result


@dataclasses.dataclass
class EdgeLawCheck(Check):
    """Float edges as law tests: where the emitted token goes when the residual vanishes."""

    kinds: tuple[str, ...] = EDGE_LAW_KINDS
    vocab: int = EDGE_VOCAB
    rows: int = 2_048
    family: str = "shapes"
    case: str | None = None
    statistical: bool = True
    decisions = 1  # one share, split among the kinds
    proves = "non-canonical"

    @property
    def id(self) -> str:
        return check_id(self.family, "edge-law")

    def decision_list(self) -> list[Decision]:
        return [Decision(check_id(self.family, "edge-law", kind), self.family, kind) for kind in self.kinds]

    def skip_reason(self, sut: SamplerUnderTest) -> str | None:
        return sut.capabilities.unsupported(k=2, vocab=9)

    def run(self, ctx: Context) -> list[CheckResult]:
        share = ctx.alpha / len(self.kinds)
        vocab = min(self.vocab, ctx.sut.capabilities.max_vocab or self.vocab)
        shape = Shape(vocab, 2)
        hang = earlier_hang(ctx)
        if hang is not None:
            return [not_run(check_id(self.family, "edge-law", kind), self.family, kind, hang) for kind in self.kinds]
        judges, experiments = [], []
        for kind in self.kinds:
            rid = check_id(self.family, "edge-law", kind)
            case = ctx.as_passed(edge_case(kind, vocab, seed=ctx.seed_for(rid) % 2**32))
            cells, labels = cell_map(active_tokens(case, threshold=EDGE_ACTIVE), vocab)
            law = lumped_law(case, cells, len(labels))
            df = int((law > 0).sum()) - 1
            cap = ctx.budget.shape_volume // shape.row_elements()  # what the volume affords; self.rows the floor
            rows = ctx.budget.sample_size(df, share, tv=ctx.budget.shape_tv, cap=cap, floor=self.rows).samples
            judges.append(
                functools.partial(
                    _lumped_result,
                    ctx,
                    Decision(rid, self.family, kind),
                    case,
                    labels,
                    law,
                    rows,
                    share,
                    kind=kind,
                    extra={"case": kind, "V": vocab, "precision": case.precision},
                    fault_evidence={"case": kind, "V": vocab},
                    where=f"'{kind}' at V={vocab:,}",
                    law_name="emitted law",
                    claim_note=lambda claim: f"detects TV >= {claim:.3g} on the lumped cells",
                )
            )
            experiments.append(
                lumped_units(ctx, case, cells, len(labels), rows, ctx.seed_for(rid, "rows"), call_rows(ctx.sut, shape))
            )
        ran = run_together(
            ctx, count_lumped, experiments, [check_id(self.family, "edge-law", kind) for kind in self.kinds]
        )
        return [judge(outcome) for judge, outcome in zip(judges, ran)]
