"""Goodness of fit on generated cases: the emitted law against the exact law.

* ``fit.conditional[kind]``: fixed step inputs, several cases interleaved in one heterogeneous
  batch; the law of (accepted drafts, last token) given the drafts against the canonical algorithm's
  (its failure is ``non-canonical``).
* ``fit.first-token[kind]``, ``fit.step[kind]``, ``fit.position[kind]``: drafts drawn by the harness
  from a model; the emitted tokens, completed to ``K + 1`` with the target, against the target's own
  joint law: the first token, the whole step, and each position given the token before it (which
  localises a bug to a position); their failure is ``loss``, and every lossless sampler passes
  them, canonical or not.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from .._calling import SamplerUnderTest
from .._cases import ModelCase, StepCase
from .._exact import target_law
from .. import strategies as sv
from ..stats import confirmation_alpha, gof_test, min_detectable_tv, mixture_log_e_value, samples_needed, tv_estimate
from ._base import Context, check_id
from ._sampling import model_tally, step_counts
from ._search import Decision, Outcome, decisions_from_search, search_and_confirm

__all__ = ["ModelFitCheck", "StepLawCheck", "confirm_level", "largest_deviation", "plan_samples"]

_OUTCOME_NAMES = "accepted {j}, then token {t}"


def plan_samples(ctx: Context, df: int, alpha: float, groups: int = 1) -> int:
    """Samples per group for a level-``alpha`` test with ``df`` to detect the budget's TV."""
    needed = samples_needed(ctx.budget.tv, max(df, 1), alpha, ctx.budget.stage_power)
    return max(1, min(needed, ctx.budget.max_samples // groups))


def confirm_level(ctx: Context) -> float:
    return confirmation_alpha(ctx.alpha, ctx.budget.examples, ctx.budget.screen_alpha, confirmations=2)


def _limits(sut: SamplerUnderTest, max_vocab: int, max_k: int) -> tuple[int, int]:
    caps = sut.capabilities
    return min(max_vocab, caps.max_vocab or max_vocab), min(max_k, caps.max_k or max_k)


def largest_deviation(observed: np.ndarray, expected: np.ndarray, label) -> str:
    """Where observed and expected counts differ most, in words; an impossible outcome first."""
    observed = np.atleast_2d(observed).astype(np.float64)
    expected = np.atleast_2d(expected)
    impossible = (expected == 0) & (observed > 0)
    if impossible.any():  # decisive on its own: no sampling error explains it
        g, c = np.unravel_index(int(np.argmax(np.where(impossible, observed, -1))), observed.shape)
        return f"outcome of exact probability 0 at {label(g, c)}: observed {int(observed[g, c])}"
    score = np.abs(observed - expected) / np.sqrt(np.maximum(expected, 1.0))
    g, c = np.unravel_index(int(np.argmax(score)), score.shape)
    return f"largest deviation at {label(g, c)}: observed {int(observed[g, c])}, expected {expected[g, c]:.1f}"


@dataclasses.dataclass
class StepLawCheck:
    """The law given the drafts, on heterogeneous batches of generated step cases."""

    case: str = "random"
    max_vocab: int = 8
    max_k: int = 4
    max_cases: int = 3
    family: str = "fit"
    statistical: bool = True
    decisions = 1
    proves = "non-canonical"

    @property
    def id(self) -> str:
        return check_id(self.family, "conditional", self.case)

    def skip_reason(self, sut: SamplerUnderTest) -> str | None:
        return None

    def run(self, ctx: Context) -> list[Any]:
        vocab, k = _limits(ctx.sut, self.max_vocab, self.max_k)
        strategy = sv.step_batches(max_vocab=vocab, max_k=k, max_cases=self.max_cases, kind=self.case)
        decision = Decision(self.id, self.family, self.case, "non-canonical")
        confirm_alpha = confirm_level(ctx)

        def evaluate(cases: list[StepCase], seed: int, alpha: float, stage: str) -> Outcome:
            # One batch, the cases interleaved row by row; each case tested on its own rows, at
            # its Bonferroni share, so the claim is per case and the failure names the case.
            cases = [ctx.as_passed(c) for c in cases]
            laws = np.stack([c.law().reshape(-1).numpy() for c in cases])
            # A confirmation also runs an anytime-valid test at half its level, so a failing
            # sampler stops as soon as the evidence is in; the fixed test gets the other half.
            sequential = stage == "confirm"
            fixed_alpha = alpha / 2 if sequential else alpha
            share = fixed_alpha / len(cases)
            df = int(((laws > 0).sum(axis=1) - 1).max())
            rows = plan_samples(ctx, df, share, groups=len(cases))
            threshold = math.log(2.0 / alpha)
            log_e = [0.0]

            def stop(counts_so_far: np.ndarray) -> bool:
                log_e[0] = float(mixture_log_e_value(counts_so_far, laws, ctx.budget.tv))
                return log_e[0] >= threshold

            counts = step_counts(ctx, cases, rows, seed, stop=stop if sequential else None)
            power = ctx.budget.stage_power
            tests = [gof_test(counts[g], laws[g], alpha=share, random_state=seed + g) for g in range(len(cases))]
            worst = min(range(len(cases)), key=lambda g: tests[g].pvalue)
            pvalue = min(1.0, tests[worst].pvalue * len(cases))
            if sequential:  # Bonferroni over the fixed test and the e-value (1/e is a valid p-value)
                pvalue = min(1.0, 2 * pvalue, 2 * math.exp(-min(log_e[0], 700.0)))
            claim = max(t.min_detectable_tv(share, power) for t in tests)
            if stage == "screen":
                confirm_share = confirm_alpha / len(cases)
                planned = plan_samples(ctx, df, confirm_share, groups=len(cases))
                claim = max(claim, min_detectable_tv(planned, max(df, 1), confirm_share, power))
            vocab_size = cases[0].vocab_size
            expected = laws * rows
            evidence: dict[str, Any] = {
                "test": tests[worst].method,
                "df": tests[worst].df,
                "statistic": tests[worst].statistic,
                "case_pvalues": [t.pvalue for t in tests],
                "observed": counts.tolist(),
                "expected": expected.tolist(),
                "outcome_labels": [f"a{j}:t{t}" for j in range(cases[0].k + 1) for t in range(vocab_size)],
                "where": f"case {worst} of {len(cases)}; " + largest_deviation(
                    counts[worst], expected[worst], lambda g, c: f"outcome (accepted {c // vocab_size}, token {c % vocab_size})"
                ),
            }
            if sequential:
                evidence["tv"] = dataclasses.asdict(tv_estimate(counts[worst], laws[worst], random_state=seed))
                evidence["log_e_value"] = log_e[0]
                evidence["stopped_early"] = bool(counts.sum() < rows * len(cases))
            return Outcome({self.id: pvalue}, int(counts.sum()), {self.id: claim}, {self.id: evidence})

        found = search_and_confirm(ctx, self.id, strategy, evaluate, _fingerprint_cases)

        def repro(cases: list[StepCase], outcome: Outcome) -> str:
            body = "\n".join(
                f"# case {i}\n{c.to_code()}\ncase{i} = specverify.StepCase(target_probs, draft_probs, draft_tokens, precision={c.precision!r})"
                for i, c in enumerate(cases)
            )
            names = ", ".join(f"case{i}" for i in range(len(cases)))
            rows = outcome.samples // max(1, len(cases))
            return ctx.repro(
                f"{body}\nresult = specverify.step_law_test(sampler, [{names}], rows_per_case={rows}, seed=0)\nprint(result)"
            )

        return decisions_from_search(ctx, [decision], found, _describe_cases, repro)


def _fingerprint_cases(cases: list[StepCase]) -> str:
    return ":".join(c.fingerprint() for c in cases)


def _describe_cases(cases: list[StepCase]) -> dict[str, Any]:
    return {"cases": [c.describe() for c in cases]}


@dataclasses.dataclass
class ModelFitCheck:
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

    def skip_reason(self, sut: SamplerUnderTest) -> str | None:
        return None

    def run(self, ctx: Context) -> list[Any]:
        vocab, k = _limits(ctx.sut, self.max_vocab, self.max_k)
        strategy = sv.model_cases(max_vocab=vocab, max_k=k, kind=self.case, max_cells=self.max_cells)
        first_id, step_id, position_id = (d.id for d in self.decision_list())
        confirm_alpha = confirm_level(ctx)

        def evaluate(case: ModelCase, seed: int, alpha: float, stage: str) -> Outcome:
            case = ctx.model_as_passed(case)
            # a screen alarm covers the three decisions; a confirmation tests each at its own share
            share = alpha / 3 if stage == "screen" else alpha
            vocab_size, k_case = case.vocab_size, case.k
            joint = target_law(case.model, k_case + 1).numpy()
            df_step = int((joint > 0).sum()) - 1
            samples = plan_samples(ctx, df_step, share)
            tally = model_tally(ctx, case, samples, seed)
            observed = tally.completed
            power = ctx.budget.stage_power
            tests: dict[str, Any] = {}
            first_obs = observed.reshape(vocab_size, -1).sum(axis=1)
            first_law = joint.reshape(vocab_size, -1).sum(axis=1)
            tests[first_id] = (gof_test(first_obs, first_law, alpha=share, random_state=seed), first_obs, first_law, None)
            tests[step_id] = (gof_test(observed, joint, alpha=share, random_state=seed), observed, joint, None)
            # each position given the token before it (positions 1..K), Bonferroni over positions
            position_results = []
            grid = observed.reshape((vocab_size,) * (k_case + 1))
            law_grid = joint.reshape((vocab_size,) * (k_case + 1))
            for i in range(1, k_case + 1):
                others = tuple(a for a in range(k_case + 1) if a not in (i - 1, i))
                obs_i = grid.sum(axis=others)
                law_i = law_grid.sum(axis=others)
                position_results.append((gof_test(obs_i, law_i, alpha=share / k_case, random_state=seed + i), obs_i, law_i, i))
            worst = min(position_results, key=lambda r: r[0].pvalue)
            pvalues, claims, evidence = {}, {}, {}
            for key, (gof, obs, law, _) in tests.items():
                pvalues[key] = gof.pvalue
                claims[key] = gof.min_detectable_tv(share, power)
            pvalues[position_id] = min(1.0, worst[0].pvalue * k_case)
            claims[position_id] = max(
                g.min_detectable_tv(share / k_case, power) for g, *_ in position_results
            )
            if stage == "screen":
                planned = plan_samples(ctx, df_step, confirm_alpha)
                for key in claims:
                    claims[key] = max(claims[key], min_detectable_tv(planned, max(df_step, 1), confirm_alpha, power))
            for key, (gof, obs, law, _) in {**tests, position_id: worst}.items():
                law2, obs2 = np.atleast_2d(law), np.atleast_2d(obs)
                mass = law2.sum(axis=-1, keepdims=True)
                expected = np.divide(law2, mass, out=np.zeros_like(law2), where=mass > 0) * obs2.sum(axis=-1, keepdims=True)
                entry: dict[str, Any] = {"test": gof.method, "df": gof.df, "statistic": gof.statistic}
                if key == position_id:
                    entry["positions"] = [{"position": r[3], "pvalue": r[0].pvalue} for r in position_results]
                    entry["where"] = f"position {worst[3]} given the token before it; " + largest_deviation(
                        obs, expected, lambda g, c: f"token {g} then token {c}"
                    )
                else:
                    entry["where"] = largest_deviation(obs, expected, lambda g, c: f"sequence {_decode(c, vocab_size, k_case + 1 if key == step_id else 1)}")
                if obs.size <= 4096:
                    entry["observed"] = np.atleast_2d(obs).tolist()
                    entry["expected"] = expected.tolist()
                    length = k_case + 1 if key == step_id else 1
                    entry["outcome_labels"] = [" ".join(map(str, _decode(c, vocab_size, length))) for c in range(expected.shape[-1])]
                if stage == "confirm":
                    entry["tv"] = dataclasses.asdict(tv_estimate(obs, law, random_state=seed))
                evidence[key] = entry
            return Outcome(pvalues, tally.samples, claims, evidence)

        found = search_and_confirm(ctx, self.id, strategy, evaluate, lambda c: c.fingerprint())

        def repro(case: ModelCase, outcome: Outcome) -> str:
            return ctx.repro(
                f"{case.to_code()}\nresult = specverify.model_law_test(sampler, model, k, samples={outcome.samples}, seed=0, precision={case.precision!r})\nprint(result)"
            )

        return decisions_from_search(ctx, self.decision_list(), found, lambda c: c.describe(), repro)


def _decode(code: int, vocab: int, length: int) -> tuple[int, ...]:
    tokens = []
    for _ in range(length):
        tokens.append(int(code % vocab))
        code //= vocab
    return tuple(reversed(tokens))
