"""The ``shapes`` family's uniform-driven check: the exact family's grid at production shapes.

``shapes.uniform-driven[<V>x<K>]`` (samplers that take injected uniforms) gives the sampler one
point per cell of the partition by accepted prefix and residual token, on a structured case at
full size: every output must be canonical; there is no sampling error.
"""

from __future__ import annotations

import dataclasses
import functools

import torch

from .._calling.sut import SamplerUnderTest
from .._laws.cases import StepCase
from .._laws.oracle import canonical_emit, normalise, residual_distribution
from .._layout import StepInputs
from .._record.evidence import Evidence
from .._record.result import CheckResult
from ..errors import SamplerFault
from ..strategies._internal.shapes import structured_case
from ._base import Check, Context, Decision, check_id, fault_result
from ._event import event_size, sized_status, sizes_text
from ._exact import TIE
from ._shape_base import Shape, bounded, call_rows, earlier_hang, remember_hang

__all__ = ["FullSizeGridCheck", "prefix_grid"]


def prefix_grid(case: StepCase, tie: float = TIE) -> tuple[torch.Tensor, torch.Tensor, float]:
    """One point in each cell of the canonical partition by accepted prefix and emitted token.

    The canonical output depends on ``u_1..u_{j+1}`` only up to the first rejection ``j``, so the
    cells are ``K + 1`` prefixes times the residual's tokens, not ``2^K`` corners (uniforms past the
    rejection are set to 1/2).  Returns ``(uniforms [G, K+1], volume [G], skipped_volume)``.
    """
    p = normalise(case.target_probs)
    q = normalise(case.draft_probs)
    k = case.k
    index = case.draft_tokens[:, None]
    ratio = (p[:k].gather(1, index) / q.gather(1, index))[:, 0].clamp(max=1.0)
    dist = residual_distribution(p, torch.cat([q, torch.zeros_like(q[:1])]))
    cdf = (dist / dist.sum(-1, keepdim=True)).cumsum(-1)
    points, volumes, reach, kept = [], [], 1.0, 0.0
    for j in range(k + 1):  # over prefixes; each prefix's tokens vectorised
        stop = 1.0 if j == k else 1.0 - float(ratio[j])
        if reach * stop > 0:
            live = dist[j] > 0
            hi = cdf[j][live]
            lo = torch.cat([hi.new_zeros(1), hi[:-1]])
            hi[-1] = 1.0
            wide = hi - lo > 2 * tie
            if j < k and stop <= 2 * tie:
                wide[:] = False
            u = torch.full((int(wide.sum()), k + 1), 0.5, dtype=torch.float64)
            u[:, :j] = ratio[:j] / 2
            if j < k:
                u[:, j] = (1.0 + float(ratio[j])) / 2
            u[:, k] = ((lo + hi) / 2)[wide]
            volume = reach * stop * (hi - lo)[wide]
            points.append(u)
            volumes.append(volume)
            kept += float(volume.sum())
        if j < k:
            reach *= float(ratio[j])
    return torch.cat(points), torch.cat(volumes), 1.0 - kept


@dataclasses.dataclass
class FullSizeGridCheck(Check):
    """Injected uniforms at production shapes: every cell's output canonical, no sampling error."""

    shapes: tuple[tuple[int, int], ...] = ((65_537, 16), (262_144, 4))  # (V, K)
    family: str = "shapes"
    case: str | None = None
    statistical: bool = False
    proves = "non-canonical"

    @property
    def id(self) -> str:
        return check_id(self.family, "uniform-driven")

    def decision_list(self) -> list[Decision]:
        return [
            Decision(check_id(self.family, "uniform-driven", f"{v}x{k}"), self.family, f"{v}x{k}")
            for v, k in self.shapes
        ]

    def skip_reason(self, sut: SamplerUnderTest) -> str | None:
        if not sut.capabilities.uniforms:
            return "the sampler does not declare uniforms=True (injected uniforms)"
        return None

    def run(self, ctx: Context) -> list[CheckResult]:
        results = []
        for decision, (declared_vocab, declared_k) in zip(self.decision_list(), self.shapes):
            shape, reduced = bounded(ctx.sut, Shape(declared_vocab, declared_k))
            if shape.vocab > ctx.budget.shape_max_vocab:
                results.append(
                    CheckResult(
                        id=decision.id,
                        family=self.family,
                        case=decision.case,
                        status="skip",
                        message=f"V={shape.vocab:,} is beyond the {ctx.budget.name} budget's shape_max_vocab "
                        f"({ctx.budget.shape_max_vocab:,})",
                    )
                )
                continue
            # draft tails above the target's: the residual lives on the active tokens; the bonus
            # row's tail is exact zeros, so every axis has a few cells whatever V
            hang = earlier_hang(ctx)
            if hang is not None:
                results.append(
                    CheckResult(
                        id=decision.id,
                        family=self.family,
                        case=decision.case,
                        status="skip",
                        message=f"not run: {hang.violation.rule}: {hang.violation.message}",
                    )
                )
                continue
            case = ctx.as_passed(
                structured_case(
                    shape.vocab,
                    shape.k,
                    ctx.seed_for(decision.id),
                    tail_mass=(0.1, 0.3),
                    bonus_tail=0.0,
                    accept_until=shape.k // 2,
                )
            )
            results.append(self._grid_result(ctx, decision, case, shape, reduced))
        return results

    def _grid_result(
        self, ctx: Context, decision: Decision, case: StepCase, shape: Shape, reduced: str | None
    ) -> CheckResult:
        """The grid of ``case`` run through the sampler: a pass, the first mismatch (sized by its
        drafts' probability), or the fault."""
        uniforms, volume, skipped = prefix_grid(case)
        ctx.sut.reach.reset()
        per_call = call_rows(ctx.sut, shape)
        try:
            wrong, tokens, accepted, outcomes = _run_grid(ctx, decision, case, uniforms, per_call)
        except SamplerFault as fault:
            remember_hang(ctx, decision.id, fault)
            result = fault_result(decision, fault, evidence={"V": shape.vocab, "K": shape.k})
            result.reach = ctx.sut.reach.snapshot(kinds=["structured"])
            return result
        vocab = shape.vocab
        induced = torch.zeros((shape.k + 1) * vocab, dtype=torch.float64)
        induced.index_add_(0, outcomes, volume)
        tv = 0.5 * float((induced - case.law().reshape(-1)).abs().sum())
        evidence: Evidence = {
            "V": vocab,
            "K": shape.k,
            "points": int(uniforms.shape[0]),
            "rows_per_call": per_call,
            "induced_tv": tv,
            "tie_volume": skipped,
            "draft_tokens": case.draft_tokens.tolist(),
        }
        if reduced:
            evidence["reduced"] = reduced
        new_result = functools.partial(
            CheckResult,
            id=decision.id,
            family=self.family,
            case=decision.case,
            samples=int(uniforms.shape[0]),
            proves="non-canonical",
        )
        if wrong.any():
            r = int(wrong.nonzero()[0, 0])
            expected = canonical_emit(*case.batch(1), uniforms[r : r + 1])
            mismatched = float(volume[wrong].sum())
            evidence["first_mismatch"] = {
                "uniforms": uniforms[r].tolist(),
                "expected": {"tokens": expected[0][0].tolist(), "num_accepted": int(expected[1][0])},
                "got": {"tokens": tokens[r].tolist(), "num_accepted": int(accepted[r])},
                "mismatched_volume": mismatched,
            }
            size = evidence["event"] = event_size(case, tv)
            status = sized_status(size)
            result = new_result(
                status=status,
                finding="non-canonical" if status == "fail" else None,
                min_detectable_tv=0.0,
                evidence=evidence,
                message=f"V={vocab:,}, K={shape.k}: uniforms {[round(x, 6) for x in uniforms[r].tolist()]} give "
                f"{tokens[r].tolist()} where the canonical algorithm gives {expected[0][0].tolist()}; the law induced "
                f"over the uniforms differs from the exact law by {sizes_text(size)}",
            )
        else:
            result = new_result(
                status="pass",
                evidence=evidence,
                message=f"V={vocab:,}, K={shape.k}: {uniforms.shape[0]} uniform points, every output canonical; "
                f"induced law within TV {tv:.2g} of the exact law (tie volume {skipped:.2g})",
            )
        result.reach = ctx.sut.reach.snapshot(kinds=["structured"])
        return result


def _run_grid(
    ctx: Context, decision: Decision, case: StepCase, uniforms: torch.Tensor, per_call: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(wrong [G], tokens [G, K+1], accepted [G], outcomes [G])``: the grid's points through the
    sampler in calls of ``per_call`` rows, each output against the canonical one."""
    dtype = ctx.dtype_for(case.precision)
    wrong_rows, got_tokens, got_accepted, got_outcomes = [], [], [], []
    for start in range(0, uniforms.shape[0], per_call):  # over calls, not points
        u = uniforms[start : start + per_call]
        target, draft, drafts = case.batch(u.shape[0])
        expected = canonical_emit(target, draft, drafts, u)
        got = ctx.sut.step(
            target,
            draft,
            drafts,
            generator=ctx.sut.generator(ctx.seed_for(decision.id, start)),
            uniforms=u,
            dtype=dtype,
        )
        ctx.advance(u.shape[0])
        wrong_rows.append((got[0] != expected[0]).any(-1) | (got[1] != expected[1]))
        got_tokens.append(got[0])
        got_accepted.append(got[1])
        got_outcomes.append(ctx.sut.layout.outcome(StepInputs(target, draft, drafts), got))
    return torch.cat(wrong_rows), torch.cat(got_tokens), torch.cat(got_accepted), torch.cat(got_outcomes)
