"""The fit family: goodness of fit of the emitted law against the exact law, on generated cases.

* ``fit.conditional[kind]``: fixed step inputs, several cases interleaved in one heterogeneous
  batch; the law of (accepted drafts, last token) given the drafts against the canonical algorithm's
  (its failure is ``non-canonical``).
* ``fit.first-token[kind]``, ``fit.step[kind]``, ``fit.position[kind]``: drafts drawn by the harness
  from a model; the emitted tokens, completed to ``K + 1`` with the target, against the target's own
  joint law: the first token, the whole step, and each position given the token before it (which
  localises a bug to a position); their failure is ``loss``, and every lossless sampler passes
  them, canonical or not.
* ``fit.every-shape[random]``: each position's law, completed by the target, at every ``(K, V)``
  the conditional checks use (:class:`~specverify.checks._every_shape.EveryShapeCheck`).
* ``fit.unnormalised[random]``: rows far from normalised, for samplers that declare they take them
  (:class:`RenormalisationCheck`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import torch

from .. import strategies as sv
from .._calling.sut import SamplerUnderTest
from .._laws.cases import ModelCase, StepCase
from .._laws.exact import target_law
from .._record.evidence import CaseRecord, Evidence, PositionPValue, tv_record
from .._record.result import CheckResult
from .._seeds import derive_seed
from ..errors import SamplerFault
from ..stats import FutilityPlan, gof_test, min_detectable_tv, mixture_log_e_value, tv_estimate
from ..strategies._internal.pairs import FAR_SCALES
from ._base import Check, Context, Decision, check_id, fault_result, law_verdict, step_cases_code
from ._fixtures import random_step_batch
from ._looks import budget_looks
from ._search import Outcome, confirm_level, decisions_from_search, p_text, search_and_confirm
from ._tally import largest_deviation, model_tally, plan_samples, step_counts

__all__ = ["ModelFitCheck", "RenormalisationCheck", "StepLawCheck"]


def _limits(sut: SamplerUnderTest, max_vocab: int, max_k: int) -> tuple[int, int]:
    caps = sut.capabilities
    return min(max_vocab, caps.max_vocab or max_vocab), min(max_k, caps.max_k or max_k)


@dataclasses.dataclass
class StepLawCheck(Check):
    """The law given the drafts, on heterogeneous batches of generated step cases."""

    case: str = "random"
    max_vocab: int = 8
    max_k: int = 4
    max_cases: int = 3
    family: str = "fit"
    statistical: bool = True
    proves = "non-canonical"

    @property
    def id(self) -> str:
        return check_id(self.family, "conditional", self.case)

    def run(self, ctx: Context) -> list[Any]:
        vocab, k = _limits(ctx.sut, self.max_vocab, self.max_k)
        strategy = sv.step_batches(max_vocab=vocab, max_k=k, max_cases=self.max_cases, kind=self.case)
        confirm_alpha = confirm_level(ctx)

        drawn: dict[tuple[str, int], int] = {}  # rows each evaluation drew or meant to (for the repro)

        def evaluate(cases: list[StepCase], seed: int, alpha: float, stage: str) -> Outcome:
            # One batch, the cases interleaved row by row; each case tested on its own rows, at
            # its Bonferroni share, so the claim is per case and the failure names the case.
            fingerprint = _fingerprint_cases(cases)
            cases = [ctx.as_passed(c) for c in cases]
            laws = np.stack([c.law().reshape(-1).numpy() for c in cases])
            # A confirmation also runs an anytime-valid test at half its level, so a failing
            # sampler stops as soon as the evidence is in; the fixed test gets the other half.
            sequential = stage != "screen"  # a confirmation, or a depth-tier test at a small TV
            fixed_alpha = alpha / 2 if sequential else alpha
            share = fixed_alpha / len(cases)
            df = int(((laws > 0).sum(axis=1) - 1).max())
            power = ctx.budget.stage_power
            # the depth tier's test also ends a passing case early (futility looks; the claim is then the whole
            # procedure's)
            plan = FutilityPlan(ctx.budget.tv, max(df, 1), share, power)
            looks = (
                budget_looks(ctx, plan, laws, lambda look, g: derive_seed(seed, "look", look, g))
                if stage == "deep"
                else None
            )
            rows = drawn[(fingerprint, seed)] = (
                plan_samples(ctx, df, share, groups=len(cases)) if looks is None else plan.final_samples
            )
            threshold = math.log(2.0 / alpha)
            log_e = [0.0]

            def stop(counts_so_far: np.ndarray) -> bool:
                log_e[0] = float(mixture_log_e_value(counts_so_far, laws, ctx.budget.tv))
                return log_e[0] >= threshold or (looks is not None and looks(counts_so_far))

            counts = step_counts(ctx, cases, rows, seed, stop=stop if sequential else None)
            tests = [gof_test(counts[g], laws[g], alpha=share, random_state=seed + g) for g in range(len(cases))]
            worst = min(range(len(cases)), key=lambda g: tests[g].pvalue)
            pvalue = min(1.0, tests[worst].pvalue * len(cases))
            if sequential:  # Bonferroni over the fixed test and the e-value (1/e is a valid p-value)
                pvalue = min(1.0, 2 * pvalue, 2 * math.exp(-min(log_e[0], 700.0)))
            claim = max(
                t.min_detectable_tv(share, power) if looks is None else plan.claim(t, laws[g])
                for g, t in enumerate(tests)
            )
            if stage != "confirm":
                confirm_share = confirm_alpha / len(cases)
                planned = plan_samples(ctx, df, confirm_share, groups=len(cases))
                claim = max(claim, min_detectable_tv(planned, max(df, 1), confirm_share, power))
            vocab_size = cases[0].vocab_size
            expected = laws * counts.sum(axis=1, keepdims=True)  # a sequential or futility stop drew fewer than rows
            evidence: Evidence = {
                "test": tests[worst].method,
                "df": tests[worst].df,
                "statistic": tests[worst].statistic,
                "case_pvalues": [t.pvalue for t in tests],
                "observed": counts.tolist(),
                "expected": expected.tolist(),
                "outcome_labels": [f"a{j}:t{t}" for j in range(cases[0].k + 1) for t in range(vocab_size)],
                "where": f"case {worst} of {len(cases)}; "
                + largest_deviation(
                    counts[worst],
                    expected[worst],
                    lambda g, c: f"outcome (accepted {c // vocab_size}, token {c % vocab_size})",
                ),
            }
            if sequential:
                evidence["tv"] = tv_record(tv_estimate(counts[worst], laws[worst], random_state=seed))
                evidence["log_e_value"] = log_e[0]
                evidence["stopped_early"] = bool(counts.sum() < rows * len(cases)) and (
                    looks is None or looks.stopped_at is None
                )  # by the e-value
            if looks is not None:
                evidence["futility"] = looks.record()
            return Outcome({self.id: pvalue}, int(counts.sum()), {self.id: claim}, {self.id: evidence})

        found = search_and_confirm(ctx, self.id, strategy, evaluate, _fingerprint_cases)

        def repro(cases: list[StepCase], outcome: Outcome, decision: Decision) -> str:
            # the rows and seed the failing evaluation drew (a fault: the rows it was to draw), so
            # the sampler is given the same inputs and generator; the fixed test at its level
            rows = drawn.get((_fingerprint_cases(cases), outcome.seed or 0), outcome.samples // max(1, len(cases)))
            if outcome.fault is None:
                rows = min(rows, outcome.samples // max(1, len(cases)))  # a sequential stop drew fewer
            alpha = found.confirm_alpha / 2
            return ctx.repro(
                f"{step_cases_code(cases)}\nresult = specverify.replay.step_law_test(sampler, cases, "
                f"rows_per_case={rows}, seed={outcome.seed or 0}, alpha={alpha!r})\n"
                + law_verdict(decision.id, alpha, decision.finding)
            )

        return decisions_from_search(ctx, self.decision_list(), found, _describe_cases, repro)


def _fingerprint_cases(cases: list[StepCase]) -> str:
    return ":".join(c.fingerprint() for c in cases)


def _describe_cases(cases: list[StepCase]) -> CaseRecord:
    return {"cases": [c.describe() for c in cases]}


@dataclasses.dataclass
class ModelFitCheck(Check):
    """Emitted tokens completed by the target, against the target's joint law, on generated models."""

    case: str = "random"
    max_vocab: int = 4
    max_k: int = 3
    max_cells: int = 256
    family: str = "fit"
    statistical: bool = True
    decisions = 3

    @property
    def id(self) -> str:
        return check_id(self.family, "model", self.case)

    def decision_list(self) -> list[Decision]:
        return [
            Decision(check_id(self.family, name, self.case), self.family, self.case, "loss")
            for name in ("first-token", "step", "position")
        ]

    def run(self, ctx: Context) -> list[Any]:
        vocab, k = _limits(ctx.sut, self.max_vocab, self.max_k)
        strategy = sv.model_cases(max_vocab=vocab, max_k=k, kind=self.case, max_cells=self.max_cells)
        first_id, step_id, position_id = (d.id for d in self.decision_list())
        confirm_alpha = confirm_level(ctx)

        drawn: dict[tuple[str, int], int] = {}  # samples each evaluation drew or meant to (for the repro)

        def evaluate(case: ModelCase, seed: int, alpha: float, stage: str) -> Outcome:
            fingerprint = case.fingerprint()
            case = ctx.model_as_passed(case)
            # a screen alarm covers the three decisions; a confirmation tests each at its own share
            share = alpha / 3 if stage != "confirm" else alpha
            vocab_size, k_case = case.vocab_size, case.k
            joint = target_law(case.model, k_case + 1).numpy()
            df_step = int((joint > 0).sum()) - 1
            samples = plan_samples(ctx, df_step, share)
            drawn[(fingerprint, seed)] = samples
            tally = model_tally(ctx, case, samples, seed)
            observed = tally.completed
            power = ctx.budget.stage_power
            tests: dict[str, Any] = {}
            first_obs = observed.reshape(vocab_size, -1).sum(axis=1)
            first_law = joint.reshape(vocab_size, -1).sum(axis=1)
            tests[first_id] = (
                gof_test(first_obs, first_law, alpha=share, random_state=seed),
                first_obs,
                first_law,
                None,
            )
            tests[step_id] = (gof_test(observed, joint, alpha=share, random_state=seed), observed, joint, None)
            # each position given the token before it (positions 1..K), Bonferroni over positions
            position_results = []
            grid = observed.reshape((vocab_size,) * (k_case + 1))
            law_grid = joint.reshape((vocab_size,) * (k_case + 1))
            for i in range(1, k_case + 1):
                others = tuple(a for a in range(k_case + 1) if a not in (i - 1, i))
                obs_i = grid.sum(axis=others)
                law_i = law_grid.sum(axis=others)
                position_results.append(
                    (gof_test(obs_i, law_i, alpha=share / k_case, random_state=seed + i), obs_i, law_i, i)
                )
            worst = min(position_results, key=lambda r: r[0].pvalue)
            pvalues: dict[str, float] = {}
            claims: dict[str, float] = {}
            evidence: dict[str, Evidence] = {}
            for key, (gof, obs, law, _) in tests.items():
                pvalues[key] = gof.pvalue
                claims[key] = gof.min_detectable_tv(share, power)
            pvalues[position_id] = min(1.0, worst[0].pvalue * k_case)
            claims[position_id] = max(g.min_detectable_tv(share / k_case, power) for g, *_ in position_results)
            if stage != "confirm":
                planned = plan_samples(ctx, df_step, confirm_alpha)
                for key in claims:
                    claims[key] = max(claims[key], min_detectable_tv(planned, max(df_step, 1), confirm_alpha, power))
            for key, (gof, obs, law, _) in {**tests, position_id: worst}.items():
                length = k_case + 1 if key == step_id else 1
                where = (
                    None
                    if key != position_id
                    else (worst[3], [PositionPValue(position=r[3], pvalue=r[0].pvalue) for r in position_results])
                )
                evidence[key] = _decision_evidence(
                    gof, obs, law, vocab_size, length, where, seed if stage == "confirm" else None
                )
            return Outcome(pvalues, tally.samples, claims, evidence)

        found = search_and_confirm(ctx, self.id, strategy, evaluate, lambda c: c.fingerprint())

        def repro(case: ModelCase, outcome: Outcome, decision: Decision) -> str:
            samples = drawn.get((case.fingerprint(), outcome.seed or 0), outcome.samples)
            alpha = found.confirm_alpha
            law = {first_id: "law='first-token'", step_id: "law='completed'"}.get(decision.id)
            if law is None:  # fit.position: the worst position given the token before it, Bonferroni over positions
                positions = outcome.evidence.get(position_id, {}).get("positions") or [{"position": 1, "pvalue": 1.0}]
                worst = min(positions, key=lambda r: r["pvalue"])
                law, alpha = f"law='given-previous', position={worst['position']}", alpha / max(1, case.k)
            return ctx.repro(
                f"{case.to_code()}\nresult = specverify.replay.model_law_test(sampler, model, k, samples={samples}, "
                f"seed={outcome.seed or 0}, precision={case.precision!r}, {law}, alpha={alpha!r})\n"
                + law_verdict(decision.id, alpha, decision.finding)
            )

        return decisions_from_search(ctx, self.decision_list(), found, lambda c: c.describe(), repro)


def _decision_evidence(
    gof: Any,
    obs: np.ndarray,
    law: np.ndarray,
    vocab: int,
    length: int,
    position: tuple[int, list[PositionPValue]] | None,
    tv_seed: int | None,
) -> Evidence:
    """What one decision of the model fit shows: its test, where the counts stray most from the
    law (for the position decision, at its worst ``position``: (index, every position's p-value)),
    the counts beside their expectation where they are few enough to read, and with ``tv_seed`` a
    TV estimate (at confirmation)."""
    law2, obs2 = np.atleast_2d(law), np.atleast_2d(obs)
    mass = law2.sum(axis=-1, keepdims=True)
    expected = np.divide(law2, mass, out=np.zeros_like(law2), where=mass > 0) * obs2.sum(axis=-1, keepdims=True)
    entry: Evidence = {"test": gof.method, "df": gof.df, "statistic": gof.statistic}
    if position is not None:
        entry["positions"] = position[1]
        entry["where"] = f"position {position[0]} given the token before it; " + largest_deviation(
            obs, expected, lambda g, c: f"token {g} then token {c}"
        )
    else:
        entry["where"] = largest_deviation(obs, expected, lambda g, c: f"sequence {_decode(c, vocab, length)}")
    if obs.size <= 4096:
        entry["observed"] = np.atleast_2d(obs).tolist()
        entry["expected"] = expected.tolist()
        entry["outcome_labels"] = [" ".join(map(str, _decode(c, vocab, length))) for c in range(expected.shape[-1])]
    if tv_seed is not None:
        entry["tv"] = tv_record(tv_estimate(obs, law, random_state=tv_seed))
    return entry


def _decode(code: int, vocab: int, length: int) -> tuple[int, ...]:
    tokens = []
    for _ in range(length):
        tokens.append(int(code % vocab))
        code //= vocab
    return tuple(reversed(tokens))


@dataclasses.dataclass
class RenormalisationCheck(Check):
    """The law given the drafts on rows scaled far from normalised, one fixed case per shape.

    By default a sampler is given what engines give it: rows normalised as well as their dtype
    allows (engine kernels do not renormalise, and need not).  A sampler that declares
    ``Capabilities(unnormalised=True)`` promises that a row stands for the row divided by its sum
    whatever its scale; here every target and draft row is scaled by a factor far from 1
    (:data:`~specverify.strategies._internal.pairs.FAR_SCALES`), and the law given the drafts is set
    against the canonical law of the normalised rows.  A failure is its own finding,
    ``renormalisation`` ("does not renormalise its inputs"): the sampler broke what it declared,
    which says nothing of its law on the rows engines pass.
    """

    case: str = "random"
    shapes: tuple[tuple[int, int], ...] = ((1, 2), (2, 4), (3, 5), (4, 8))  # (K, V)
    family: str = "fit"
    statistical: bool = True
    proves = "renormalisation"

    @property
    def id(self) -> str:
        return check_id(self.family, "unnormalised", self.case)

    def skip_reason(self, sut: SamplerUnderTest) -> str | None:
        caps = sut.capabilities
        if not caps.unnormalised:
            return (
                "the sampler does not declare unnormalised=True: it is given rows normalised as well as their dtype "
                "allows, as engines pass them"
            )
        if not caps.canonical:
            return "the sampler declares canonical=False: its law given the drafts is not the canonical one by design"
        if all(caps.unsupported(k=k, vocab=v) for k, v in self.shapes):
            return "no shape fits the sampler's declared limits"
        return None

    def cases(self, ctx: Context) -> list[StepCase]:
        """One random case per shape, every row scaled by a factor of :data:`FAR_SCALES`."""
        cases = []
        scales = torch.tensor(FAR_SCALES, dtype=torch.float64)
        for index, (k, vocab) in enumerate(self.shapes):
            if ctx.sut.capabilities.unsupported(k=k, vocab=vocab):
                continue
            generator = torch.Generator().manual_seed(ctx.seed_for(self.id, k, vocab))
            target, draft, drafts = random_step_batch(generator, 1, k, vocab, zeros=0.2)
            t_scale = scales[(torch.arange(k + 1) + index) % len(FAR_SCALES)][:, None]
            d_scale = scales[(torch.arange(k) + index + 1) % len(FAR_SCALES)][:, None]
            cases.append(
                ctx.as_passed(StepCase(target[0] * t_scale, draft[0] * d_scale, drafts[0], label="unnormalised"))
            )
        return cases

    def run(self, ctx: Context) -> CheckResult:
        cases = self.cases(ctx)
        share = ctx.alpha / len(cases)
        tests, observed, laws = [], [], []
        try:
            for index, case in enumerate(cases):
                law = case.law().reshape(-1).numpy()
                rows = plan_samples(ctx, int((law > 0).sum()) - 1, share)
                counts = step_counts(ctx, [case], rows, ctx.seed_for(self.id, "rows", index))[0]
                tests.append(gof_test(counts, law, alpha=share, random_state=ctx.seed_for(self.id, "mc", index)))
                observed.append(counts)
                laws.append(law)
        except SamplerFault as fault:
            return fault_result(self, fault)
        worst = min(range(len(cases)), key=lambda g: tests[g].pvalue)
        gof, case = tests[worst], cases[worst]
        pvalue = min(1.0, gof.pvalue * len(cases))
        claim = max(t.min_detectable_tv(share, ctx.budget.power) for t in tests)
        vocab = case.vocab_size
        expected = laws[worst] * observed[worst].sum()
        sums = [round(float(s), 4) for s in case.target_probs.sum(-1)] + [
            round(float(s), 4) for s in case.draft_probs.sum(-1)
        ]
        evidence: Evidence = {
            "test": gof.method,
            "df": gof.df,
            "statistic": gof.statistic,
            "row_sums": sums,
            "where": f"K={case.k}, V={vocab}; "
            + largest_deviation(
                observed[worst], expected, lambda g, c: f"outcome (accepted {c // vocab}, token {c % vocab})"
            ),
        }
        common: dict[str, Any] = dict(
            id=self.id,
            family=self.family,
            case=self.case,
            p_value=pvalue,
            alpha=ctx.alpha,
            samples=int(sum(o.sum() for o in observed)),
            min_detectable_tv=claim,
        )
        if pvalue <= ctx.alpha:
            evidence["tv"] = tv_record(tv_estimate(observed[worst], laws[worst], random_state=0))
            evidence["minimal_example"] = case.describe()
            evidence["repro"] = ctx.repro(
                f"{step_cases_code([case])}\n"
                f"result = specverify.replay.step_law_test(sampler, cases, rows_per_case={int(observed[worst].sum())}, "
                f"seed={ctx.seed_for(self.id, 'rows', worst)}, alpha={share!r})\n"
                + law_verdict(self.id, share, "renormalisation")
            )
            return CheckResult(
                **common,
                status="fail",
                finding="renormalisation",
                evidence=evidence,
                message=(
                    f"does not renormalise its inputs, though it declares unnormalised=True: on rows summing to {sums} "
                    f"the law given the drafts is not that of the normalised rows ({p_text(pvalue)} <= "
                    f"{ctx.alpha:.3g}); {evidence['where']}"
                ),
            )
        status = "inconclusive" if claim > ctx.budget.ceiling_tv else "pass"
        return CheckResult(
            **common,
            status=status,
            evidence=evidence,
            message=f"{len(cases)} cases with rows scaled by {list(FAR_SCALES)}: renormalised exactly",
        )
