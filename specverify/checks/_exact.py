"""The exact family: outputs set against laws computed exactly by enumeration.

* ``exact.uniform-driven[kind]`` (samplers that take injected uniforms): the sampler is run on a
  grid with one point inside every cell of the canonical algorithm's partition of the uniforms'
  cube; each point must give the canonical output, and the law induced over the uniforms is
  computed with no sampling error at all.
* ``exact.conditional[all-drafts]``: every draft sequence of small models, each with rows in
  proportion to its draft probability, against the exact per-draft law.
* ``exact.emitted[model]``: drafts drawn from the draft model; the emitted sequences against the
  canonical algorithm's exact law of emitted sequences.

The same grid at production shapes is the ``shapes`` family's (``shapes.uniform-driven``).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np
import torch

from .. import strategies as sv
from .._calling.sut import SamplerUnderTest
from .._laws.cases import ModelCase, StepCase
from .._laws.exact import all_sequences, emitted_law, sequence_of
from .._laws.models import step_inputs
from .._laws.oracle import canonical_emit, normalise, residual_distribution
from .._layout import StepInputs
from .._record.evidence import Evidence, tv_record
from .._record.result import CheckResult
from ..errors import SamplerFault
from ..stats import gof_test, tv_estimate
from ._base import Check, Context, check_id, fault_result, law_verdict, step_cases_code
from ._fixtures import random_table_model, seed_chain_case
from ._search import Outcome, search_and_confirm
from ._tally import largest_deviation, model_tally, plan_samples, step_counts

__all__ = ["TIE", "ConditionalEnumerationCheck", "EmittedLawCheck", "UniformGridCheck", "uniform_grid"]

#: Uniform points closer than this to a cell boundary are float ties and are not evaluated.
TIE = 1e-6


def uniform_grid(case: StepCase, tie: float = TIE) -> tuple[torch.Tensor, torch.Tensor, float]:
    """One point inside each cell of the canonical partition of ``[0, 1)^(K+1)``.

    Returns ``(uniforms [G, K+1], volume [G], skipped_volume)``: cells narrower than ``2 * tie``
    are float ties, left out, and their volume is reported.
    """
    p = normalise(case.target_probs)
    q = normalise(case.draft_probs)
    k = case.k
    axes: list[list[tuple[float, float]]] = []
    skipped = 0.0
    for i in range(k):
        ratio = min(1.0, float(p[i, case.draft_tokens[i]] / q[i, case.draft_tokens[i]]))
        cells = [(0.0, ratio), (ratio, 1.0)]
        axes.append(_points(cells, tie))
        skipped += 1.0 - sum(v for _, v in axes[-1])
    q_padded = torch.cat([q, torch.zeros_like(q[:1])])
    dist = residual_distribution(p, q_padded)
    cdf = (dist / dist.sum(-1, keepdim=True)).cumsum(-1)
    edges = sorted({0.0, 1.0, *[float(x) for x in cdf.reshape(-1) if 0.0 < float(x) < 1.0]})
    axes.append(_points(list(zip(edges, edges[1:])), tie))
    skipped += 1.0 - sum(v for _, v in axes[-1])
    grid = list(itertools.product(*axes))
    uniforms = torch.tensor([[u for u, _ in point] for point in grid], dtype=torch.float64)
    volume = torch.tensor([float(np.prod([v for _, v in point])) for point in grid], dtype=torch.float64)
    return uniforms, volume, skipped


def _points(cells: list[tuple[float, float]], tie: float) -> list[tuple[float, float]]:
    return [((a + b) / 2, b - a) for a, b in cells if b - a > 2 * tie]


@dataclasses.dataclass
class UniformGridCheck(Check):
    """The sampler's output law computed over its injected uniforms."""

    case: str = "random"
    max_vocab: int = 6
    max_k: int = 3
    family: str = "exact"
    statistical: bool = False
    proves = "non-canonical"

    @property
    def id(self) -> str:
        return check_id(self.family, "uniform-driven", self.case)

    def skip_reason(self, sut: SamplerUnderTest) -> str | None:
        if not sut.capabilities.uniforms:
            return "the sampler does not declare uniforms=True (injected uniforms)"
        return None

    def run(self, ctx: Context) -> CheckResult:
        caps = ctx.sut.capabilities
        strategy = sv.step_cases(
            max_vocab=min(self.max_vocab, caps.max_vocab or self.max_vocab),
            max_k=min(self.max_k, caps.max_k or self.max_k),
            kind=self.case,
        )
        points = {"n": 0}

        def evaluate(case: StepCase, seed: int, alpha: float, stage: str) -> Outcome:
            case = ctx.as_passed(case)
            uniforms, volume, skipped = uniform_grid(case)
            target, draft, drafts = case.batch(uniforms.shape[0])
            expected = canonical_emit(target, draft, drafts, uniforms)
            # the generator is passed as the contract says; a sampler given uniforms must not use it
            generator = ctx.sut.generator(seed)
            got = ctx.sut.step(
                target, draft, drafts, generator=generator, uniforms=uniforms, dtype=ctx.dtype_for(case.precision)
            )
            ctx.advance(uniforms.shape[0])
            points["n"] += uniforms.shape[0]
            wrong = (got[0] != expected[0]).any(-1) | (got[1] != expected[1])
            vocab = case.vocab_size
            induced = torch.zeros((case.k + 1) * vocab, dtype=torch.float64)
            induced.index_add_(0, ctx.sut.layout.outcome(StepInputs(target, draft, drafts), got), volume)
            tv = 0.5 * float((induced - case.law().reshape(-1)).abs().sum())
            evidence: Evidence = {"points": int(uniforms.shape[0]), "induced_tv": tv, "tie_volume": skipped}
            if wrong.any():
                r = int(wrong.nonzero()[0, 0])
                evidence["first_mismatch"] = {
                    "uniforms": uniforms[r].tolist(),
                    "expected": {"tokens": expected[0][r].tolist(), "num_accepted": int(expected[1][r])},
                    "got": {"tokens": got[0][r].tolist(), "num_accepted": int(got[1][r])},
                    "mismatched_volume": float(volume[wrong].sum()),
                }
            return Outcome({}, int(uniforms.shape[0]), {}, {self.id: evidence}, mismatch=bool(wrong.any()))

        found = search_and_confirm(
            ctx,
            self.id,
            strategy,
            evaluate,
            lambda c: c.fingerprint(),
            examples=ctx.budget.validity_examples,
            statistical=False,
        )
        if found.confirmed is None:
            return CheckResult(
                id=self.id,
                family=self.family,
                case=self.case,
                status="pass" if found.examples else "inconclusive",
                samples=points["n"],
                message=f"{found.examples} cases, {points['n']} uniform points: every output canonical; induced law "
                "exact",
                evidence={"examples": found.examples, "tie": TIE},
            )
        case, outcome = found.confirmed
        if outcome.fault is not None:
            result = fault_result(self, outcome.fault, evidence={"minimal_example": case.describe()})
            result.message = f"on the smallest failing case: {result.message}"
            return result
        ev = outcome.evidence[self.id]
        m = ev["first_mismatch"]
        canonical = m["expected"]["tokens"][: m["expected"]["num_accepted"] + 1]
        repro = ctx.repro(
            f"{case.to_code()}\nuniforms = torch.tensor([{m['uniforms']!r}], dtype=torch.float64)\n"
            "tokens, num_accepted = specverify.replay.call_sampler(sampler, target_probs[None], draft_probs[None], "
            "draft_tokens[None], torch.Generator(), uniforms=uniforms, "
            f"dtype=torch.{str(ctx.dtype_for(case.precision)).removeprefix('torch.')})\n"
            "emitted = tokens[0, : int(num_accepted[0]) + 1].tolist()\n"
            f"canonical = {canonical!r}  # what the canonical algorithm emits for these uniforms\n"
            "print('emitted', emitted, 'canonical', canonical)\n"
            "if emitted != canonical:\n"
            f"    raise SystemExit({self.id + ' fails (finding: non-canonical): emitted '!r} + str(emitted) + ', "
            "canonical ' + str(canonical))"
        )
        return CheckResult(
            id=self.id,
            family=self.family,
            case=self.case,
            status="fail",
            finding="non-canonical",
            samples=points["n"],
            min_detectable_tv=0.0,
            message=(
                f"on the smallest failing case, uniforms {[round(u, 6) for u in m['uniforms']]} give "
                f"{m['got']['tokens']} where the canonical algorithm gives {m['expected']['tokens']}; the law induced "
                f"over the uniforms differs from the exact law by TV {ev['induced_tv']:.3g}"
            ),
            evidence={
                "minimal_example": case.describe(),
                "repro": repro,
                "mismatch": outcome.mismatch,
                **ev,
                "examples": found.examples,
            },
        )


@dataclasses.dataclass
class ConditionalEnumerationCheck(Check):
    """Every draft sequence of small models, rows in proportion to the draft law."""

    case: str = "all-drafts"
    shapes: tuple[tuple[int, int], ...] = ((2, 3), (3, 2), (4, 2))  # (V, K)
    family: str = "exact"
    statistical: bool = True
    proves = "non-canonical"

    @property
    def id(self) -> str:
        return check_id(self.family, "conditional", self.case)

    def skip_reason(self, sut: SamplerUnderTest) -> str | None:
        if all(sut.capabilities.unsupported(k=k, vocab=v) for v, k in self.shapes):
            return "no enumerated shape fits the sampler's declared limits"
        return None

    def run(self, ctx: Context) -> CheckResult:
        total_df = 0
        plans = []
        for index, (vocab, k) in enumerate(self.shapes):
            if ctx.sut.capabilities.unsupported(k=k, vocab=vocab):
                continue
            model = random_table_model(torch.Generator().manual_seed(ctx.seed_for(self.id, index)), vocab, k, zeros=0.2)
            drafts = all_sequences(vocab, k)
            target, draft = step_inputs(model.model, drafts)
            weight = normalise(draft).gather(-1, drafts[..., None]).squeeze(-1).prod(-1)
            cases = [
                ctx.as_passed(StepCase(target[i], draft[i], drafts[i], label="enumerated"))
                for i in range(drafts.shape[0])
                if weight[i] > 0
            ]
            weights = weight[weight > 0]
            laws = np.stack([c.law().reshape(-1).numpy() for c in cases])
            total_df += int(((laws > 0).sum(1) - 1).sum())
            plans.append((cases, weights, laws))
        samples = plan_samples(ctx, total_df, ctx.alpha)
        width = max(laws.shape[1] for _, _, laws in plans)
        observed_rows, law_rows, labels = [], [], []  # labels: (description, V)
        drawn: list[tuple[StepCase, int, int]] = []  # each draft sequence's case, rows and seed (for the repro)
        try:
            for index, (cases, weights, laws) in enumerate(plans):
                rows = np.maximum(1, np.round(samples / len(plans) * weights.numpy())).astype(int)
                for case, law, n in zip(cases, laws, rows):  # loops over draft sequences, not samples
                    drawn.append((case, int(n), ctx.seed_for(self.id, "rows", case.fingerprint())))
                    counts = step_counts(ctx, [case], int(n), drawn[-1][2])[0]
                    observed_rows.append(np.pad(counts, (0, width - counts.size)))
                    law_rows.append(np.pad(law, (0, width - law.size)))
                    labels.append((f"V={case.vocab_size} drafts {case.draft_tokens.tolist()}", case.vocab_size))
        except SamplerFault as fault:
            return fault_result(self, fault)
        observed, laws_all = np.stack(observed_rows), np.stack(law_rows)
        gof = gof_test(observed, laws_all, alpha=ctx.alpha, random_state=ctx.seed_for(self.id, "mc"))
        claim = gof.min_detectable_tv(ctx.alpha, ctx.budget.power)
        expected = laws_all * observed.sum(1, keepdims=True)
        evidence: Evidence = {
            "test": gof.method,
            "df": gof.df,
            "statistic": gof.statistic,
            "draft_sequences": len(labels),
            "where": _where(observed, expected, labels),
        }
        common: dict[str, Any] = dict(
            id=self.id,
            family=self.family,
            case=self.case,
            p_value=gof.pvalue,
            alpha=ctx.alpha,
            samples=gof.samples,
            min_detectable_tv=claim,
        )
        if gof.pvalue <= ctx.alpha:
            evidence["tv"] = tv_record(tv_estimate(observed, laws_all, random_state=0))
            # the draft sequence whose own test is the strongest (of those at p = 0, the one with the
            # most outcomes of probability 0), on the rows and seed it was given: the message names
            # it and the repro poses it
            each = [
                gof_test(observed[g], laws_all[g], alpha=ctx.alpha, random_state=0).pvalue for g in range(len(drawn))
            ]
            impossible = ((expected == 0) & (observed > 0)).sum(1)
            worst = min(range(len(drawn)), key=lambda g: (each[g], -int(impossible[g])))
            worst_case, worst_rows, seed = drawn[worst]
            evidence["where"] = _where(
                observed[worst : worst + 1], expected[worst : worst + 1], labels[worst : worst + 1]
            )
            evidence["minimal_example"] = worst_case.describe()
            evidence["repro"] = ctx.repro(
                f"# the draft sequence that deviates most of the {len(drawn)} the check tested "
                f"together\n{step_cases_code([worst_case])}\n"
                f"result = specverify.replay.step_law_test(sampler, cases, rows_per_case={worst_rows}, seed={seed}, "
                f"alpha={ctx.alpha!r})\n" + law_verdict(self.id, ctx.alpha, "non-canonical")
            )
            return CheckResult(
                **common,
                status="fail",
                finding="non-canonical",
                message=f"the law given the drafts differs from the exact law (p = {gof.pvalue:.3g}); "
                f"{evidence['where']}",
                evidence=evidence,
            )
        status = "inconclusive" if claim > ctx.budget.ceiling_tv else "pass"
        return CheckResult(
            **common,
            status=status,
            message=f"{len(labels)} draft sequences of {len(plans)} models enumerated; law given the drafts exact",
            evidence=evidence,
        )


def _where(observed: np.ndarray, expected: np.ndarray, labels: list[tuple[str, int]]) -> str:
    """Where the draft sequences' counts (one row each, labelled with its drafts and V) deviate most."""
    return largest_deviation(
        observed,
        expected,
        lambda g, c: f"{labels[g][0]}, outcome (accepted {c // labels[g][1]}, token {c % labels[g][1]})",
    )


@dataclasses.dataclass
class EmittedLawCheck(Check):
    """Emitted sequences (drafts drawn from the model) against the canonical exact law."""

    case: str = "seed-chain"
    family: str = "exact"
    statistical: bool = True
    proves = "non-canonical"

    @property
    def id(self) -> str:
        return check_id(self.family, "emitted", self.case)

    def model(self, ctx: Context) -> ModelCase:
        if self.case == "seed-chain":
            return seed_chain_case(k=2)
        return random_table_model(
            torch.Generator().manual_seed(ctx.seed_for(self.id)), 3, 2, zeros=0.2, label=self.case
        )

    def skip_reason(self, sut: SamplerUnderTest) -> str | None:
        vocab = 4 if self.case == "seed-chain" else 3
        return sut.capabilities.unsupported(k=2, vocab=vocab)

    def run(self, ctx: Context) -> CheckResult:
        case = ctx.model_as_passed(self.model(ctx))
        law = emitted_law(case.model, case.k).numpy()
        samples = plan_samples(ctx, int((law > 0).sum()) - 1, ctx.alpha)
        try:
            tally = model_tally(ctx, case, samples, ctx.seed_for(self.id, "tally"))
        except SamplerFault as fault:
            return fault_result(self, fault)
        gof = gof_test(tally.emitted, law, alpha=ctx.alpha, random_state=ctx.seed_for(self.id, "mc"))
        claim = gof.min_detectable_tv(ctx.alpha, ctx.budget.power)
        expected = law * tally.samples
        evidence: Evidence = {
            "test": gof.method,
            "df": gof.df,
            "statistic": gof.statistic,
            "model": case.describe(),
            "observed": tally.emitted.tolist(),
            "expected": expected.tolist(),
            "outcome_labels": [" ".join(map(str, sequence_of(i, case.vocab_size, case.k))) for i in range(law.size)],
        }
        common: dict[str, Any] = dict(
            id=self.id,
            family=self.family,
            case=self.case,
            p_value=gof.pvalue,
            alpha=ctx.alpha,
            samples=tally.samples,
            min_detectable_tv=claim,
        )
        if gof.pvalue <= ctx.alpha:
            evidence["tv"] = tv_record(tv_estimate(tally.emitted, law, random_state=0))
            evidence["where"] = largest_deviation(
                tally.emitted, expected, lambda g, c: f"emitted sequence {sequence_of(c, case.vocab_size, case.k)}"
            )
            evidence["repro"] = ctx.repro(
                f"{case.to_code()}\nresult = specverify.replay.model_law_test(sampler, model, k, samples={samples}, "
                f"seed={ctx.seed_for(self.id, 'tally')}, precision={case.precision!r}, law='emitted', "
                f"alpha={ctx.alpha!r})\n" + law_verdict(self.id, ctx.alpha, "non-canonical")
            )
            return CheckResult(
                **common,
                status="fail",
                finding="non-canonical",
                message=f"emitted sequences do not follow the canonical law (p = {gof.pvalue:.3g}); "
                f"{evidence['where']}",
                evidence=evidence,
            )
        status = "inconclusive" if claim > ctx.budget.ceiling_tv else "pass"
        return CheckResult(
            **common,
            status=status,
            message=f"{tally.samples} steps: emitted sequences follow the canonical law",
            evidence=evidence,
        )
