"""The generation-loop family: a whole speculative loop against the target's warped law.

A loop is judged by what it generates, never by how (see :mod:`specverify._loop`):

* ``loop.output``: shape, dtype and ids; a greedy row generates the target's argmax path; a sampled
  row never generates a token its warped target forbids (exact, on a mixed batch);
* ``loop.determinism``: the same generator state gives the same output (exact);
* ``loop.seeds``: for loops that declare per-request seeds: same seed same output, wherever the
  row sits in the batch; different seeds, different outputs (exact);
* ``loop.law[kind]``: the law of a short generation (every sequence enumerated) for each group of
  rows sharing sampling parameters, in one heterogeneous batch, against
  :func:`~specverify._loop.generation_law`: G-tests, Bonferroni over groups;
* ``loop.positions``: a long generation; the law of each consecutive pair of tokens against the
  exact pair law of the warped chain, Bonferroni over positions (bookkeeping that breaks after many
  steps, or only after a rejection, shows at a position).

Every failure of a law check is a ``loss``; of the exact checks, ``contract``.  Cases are derived
from the run seed alone (no search): chain models over a few tokens, heterogeneous parameters.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import torch

from .._budgets import decision_cap, sample_size
from .._loop import MarkovLM, generation_law
from .._record.evidence import Evidence, tv_record
from .._record.families import LOOP_FAMILY
from .._record.result import CheckResult
from .._warps.presets import PRESETS
from .._warps.rules import SamplingParams
from .._warps.separating import SEPARATING_GROUPS, separating_chain
from ..errors import SamplerFault
from ..stats import FutilityPlan, gof_test, tv_estimate
from ._base import Check, Context, registered
from ._looks import FutilityLooks
from ._loop_context import LoopContext, LoopTally, _chain, _needs, _params, loop_parameters
from ._loop_history import HISTORY_KINDS, history_law, posable

__all__ = ["REACH", "LoopCheck", "loop_battery"]

#: Parameter sets of the law checks' kinds: each row group gets one.
KINDS: dict[str, list[dict[str, float]]] = {
    "plain": [{}],
    "temperature": [{"temperature": 0.5}, {"temperature": 1.6}],
    "top-k": [{"top_k": 2}, {"temperature": 0.8, "top_k": 3}],
    "top-p": [{"top_p": 0.6}, {"temperature": 1.2, "top_p": 0.85}],
    "min-p": [{"min_p": 0.15}, {"temperature": 1.3, "min_p": 0.05}],
    "mixed": [{}, {"temperature": 0.7, "top_k": 3, "top_p": 0.9}, {"temperature": 1.1, "top_p": 0.7, "min_p": 0.1}],
    # where engines' warps differ (ties, exact boundaries, temperature last): specverify._warps.separating
    "separating": SEPARATING_GROUPS,
}


@dataclasses.dataclass
class LoopCheck(Check):
    """One check of the loop family (``name`` picks what it does; ``case`` the kind)."""

    name: str
    case: str | None = None
    family: str = LOOP_FAMILY

    @property
    def id(self) -> str:
        return f"{self.family}.{self.name}" + (f"[{self.case}]" if self.case else "")

    @property
    def statistical(self) -> bool:
        return self.name in ("law", "positions", "history")

    @property
    def proves(self) -> str:
        return "loss" if self.statistical else "contract"

    def skip_reason(self, loop: Any) -> str | None:
        declared = set(loop_parameters(loop))
        if self.name == "seeds" and "seeds" not in declared:
            return "the loop declares no per-request seeds (parameters has no 'seeds')"
        if self.name in ("law", "history"):
            missing = _needs((KINDS if self.name == "law" else HISTORY_KINDS)[self.case or "plain"]) - declared
            if self.name == "history" and posable(self.case or "", declared):
                return None  # the groups whose parameters the loop declares are posed
            if missing:
                return f"the loop does not declare {', '.join(sorted(missing))}"
        return None

    def skipped(self, reason: str) -> list[CheckResult]:
        return [self._result("skip", message=reason)]

    def run(self, ctx: Context | LoopContext) -> CheckResult:
        """Run on the loop's generations (:meth:`LoopContext.of` the run's context)."""
        try:
            return getattr(self, f"_{self.name}")(LoopContext.of(ctx))
        except SamplerFault as fault:
            return self._result(
                "fail",
                finding="contract",
                message=str(fault),
                evidence={"violation": fault.violation.rule, **fault.details},
            )
        except Exception as exc:  # everything the loop raises is evidence against it
            text = str(exc).strip().splitlines()
            message = f"the loop raised {type(exc).__name__}: {text[0] if text else '(no message)'}"
            return self._result("fail", finding="contract", message=message, evidence={"violation": "raised"})

    def _result(self, status: str, **fields: Any) -> CheckResult:
        return CheckResult(id=self.id, family=self.family, case=self.case, status=status, proves=self.proves, **fields)

    # --- exact checks -------------------------------------------------------------------------

    def _output(self, ctx: LoopContext) -> CheckResult:
        vocab, length, rows = 5, 8, 96
        target, draft = (
            _chain(ctx.seed_for(self.id, "target"), vocab, 2),
            _chain(ctx.seed_for(self.id, "draft"), vocab, 2),
        )
        names = loop_parameters(ctx.loop)
        groups = [g for g in KINDS["mixed"] if not (_needs([g]) - set(names))] + [{"temperature": 0.0}]
        which = torch.arange(rows) % len(groups)
        params = _params(groups, which, names)
        prompt = torch.randint(
            vocab, (rows, 2), generator=torch.Generator().manual_seed(ctx.seed_for(self.id, "prompt"))
        )
        out = ctx.run(target, draft, prompt, length, params, ctx.seed_for(self.id, "loop"))
        history = torch.cat([prompt, out], dim=1)
        wrong = _forbidden(ctx.oracle, target, history, out, params, groups, which)
        if wrong is not None and not ctx.oracle.declared:
            fits = next(
                (
                    name
                    for name, c in PRESETS.items()
                    if name != ctx.oracle.preset and _forbidden(c, target, history, out, params, groups, which) is None
                ),
                None,
            )
            if fits is not None:  # an undeclared loop warping as another engine does: not a fault
                message = (
                    f"the generations are allowed by the {fits} preset's warp, not by transformers' (the undeclared "
                    f"default): declare warp={fits!r}; against transformers': {wrong[1]}"
                )
                return self._result("inconclusive", samples=rows, message=message, evidence={"explained_by": fits})
        if wrong is not None:
            return self._result("fail", finding=wrong[0], message=wrong[1])
        return self._result(
            "pass",
            samples=rows,
            message=f"{rows} rows of {length} tokens: valid; greedy rows follow the argmax path; no forbidden token",
        )

    def _determinism(self, ctx: LoopContext) -> CheckResult:
        target, draft = _chain(ctx.seed_for(self.id, "target"), 4), _chain(ctx.seed_for(self.id, "draft"), 4)
        params = _params([{}], torch.zeros(64, dtype=torch.int64), loop_parameters(ctx.loop))
        prompt = torch.zeros((64, 1), dtype=torch.int64)
        first, second = (ctx.run(target, draft, prompt, 6, params, ctx.seed_for(self.id)) for _ in range(2))
        if not torch.equal(first, second):
            return self._result(
                "fail", finding="contract", message="the same generator seed gave different generations"
            )
        return self._result("pass", samples=128, message="the same generator seed gives the same generation")

    def _seeds(self, ctx: LoopContext) -> CheckResult:
        target, draft = _chain(ctx.seed_for(self.id, "target"), 4), _chain(ctx.seed_for(self.id, "draft"), 4)
        rows, length = 32, 10
        names = loop_parameters(ctx.loop)
        seeds = torch.arange(rows, dtype=torch.int64) % 16 + ctx.seed_for(self.id, "seeds") % 1_000_000
        params = dataclasses.replace(_params([{}], torch.zeros(rows, dtype=torch.int64), names), seeds=seeds)
        prompt = torch.zeros((rows, 1), dtype=torch.int64)
        out = ctx.run(target, draft, prompt, length, params, ctx.seed_for(self.id, "a"))
        order = torch.randperm(rows, generator=torch.Generator().manual_seed(ctx.seed_for(self.id, "order")))[
            : rows // 2
        ]
        moved = ctx.run(target, draft, prompt[order], length, params.select(order), ctx.seed_for(self.id, "b"))
        if not torch.equal(out[:16], out[16:]):
            return self._result(
                "fail",
                finding="contract",
                message="two rows with the same seed in one batch generated different tokens",
            )
        if not torch.equal(moved, out[order]):
            return self._result(
                "fail",
                finding="contract",
                message="a seeded row's generation changed with the rest of the batch (or the generator)",
            )
        if len({tuple(r) for r in out[:16].tolist()}) < 8:
            return self._result(
                "fail",
                finding="contract",
                message="16 different seeds gave fewer than 8 different generations: seeds are ignored or shared",
            )
        return self._result(
            "pass",
            samples=rows + rows // 2,
            message="same seed, same generation wherever the row sits; different seeds, different generations",
        )

    # --- statistical checks -------------------------------------------------------------------

    def _law(self, ctx: LoopContext) -> CheckResult:
        vocab, length = 4, 3
        groups = KINDS[self.case or "plain"]
        target, draft = (
            _chain(ctx.seed_for(self.id, "target"), vocab, 2),
            _chain(ctx.seed_for(self.id, "draft"), vocab, 2),
        )
        if self.case == "separating":
            target = separating_chain()
        prompt_row = torch.tensor([1, 2])
        names = loop_parameters(ctx.loop)

        def laws_of(law: Callable[..., torch.Tensor]) -> np.ndarray:
            one = torch.zeros(1, dtype=torch.int64)
            return np.stack(
                [generation_law(target, prompt_row, length, _params([g], one, names), law=law).numpy() for g in groups]
            )

        laws = laws_of(ctx.oracle)
        share = ctx.alpha / len(groups)

        tally = LoopTally(vocab, pairs=False, law=laws, groups=len(groups))

        def draw(phases: list[tuple[int, int]]) -> Generator[np.ndarray, None, None]:
            return ctx.tally_phases(
                target, draft, prompt_row[None], [(n * len(groups), seed) for n, seed in phases], length, groups, tally
            )

        counts, looked = self._counts(
            ctx, laws, share, decision_cap(ctx.max_samples, len(groups), per_decision=ctx.cap_per_decision), draw
        )
        return self._decide(
            ctx,
            counts,
            laws,
            share,
            [str(g or "no warps") for g in groups],
            lambda c: " ".join(map(str, np.unravel_index(c, (vocab,) * length))),
            generations=int(counts.sum()),
            laws_of=laws_of,
            looked=looked,
        )

    def _history(self, ctx: LoopContext) -> CheckResult:
        return history_law(self, ctx)

    def _positions(self, ctx: LoopContext) -> CheckResult:
        vocab, length = 4, 24
        names = loop_parameters(ctx.loop)
        group = {"temperature": 0.9} if "temperature" in names else {}
        target, draft = _chain(ctx.seed_for(self.id, "target"), vocab), _chain(ctx.seed_for(self.id, "draft"), vocab)
        params_one = _params([group], torch.zeros(1, dtype=torch.int64), names)

        def laws_of(law: Callable[..., torch.Tensor]) -> np.ndarray:
            transition = law(target.logits, params_one.select(torch.zeros(vocab, dtype=torch.int64))).numpy()
            marginal = np.eye(vocab)[1]  # the prompt is token 1; order 1: the law after it is row 1
            pairs = []
            for _ in range(length):  # exact pair laws (x_{t-1}, x_t), x_0 the prompt
                pairs.append((marginal[:, None] * transition).reshape(-1))
                marginal = marginal @ transition
            return np.stack(pairs[1:])  # positions 1..length-1: pairs of generated tokens

        laws = laws_of(ctx.oracle)
        share = ctx.alpha / len(laws)
        tally = LoopTally(vocab, pairs=True, law=laws)

        def draw(phases: list[tuple[int, int]]) -> Generator[np.ndarray, None, None]:
            return ctx.tally_phases(
                target, draft, torch.ones((1, 1), dtype=torch.int64), phases, length, [group], tally
            )

        counts, looked = self._counts(ctx, laws, share, ctx.max_samples, draw)
        return self._decide(
            ctx,
            counts,
            laws,
            share,
            [f"tokens {t} and {t + 1}" for t in range(1, length)],
            lambda c: f"{c // vocab} then {c % vocab}",
            generations=int(counts[0].sum()),
            counted=f"{int(counts.sum()):,} pairs of adjacent tokens",
            laws_of=laws_of,
            looked=looked,
        )

    def _counts(
        self,
        ctx: LoopContext,
        laws: np.ndarray,
        share: float,
        cap: int,
        draw: Callable[[list[tuple[int, int]]], Generator[np.ndarray, None, None]],
    ) -> tuple[np.ndarray, FutilityLooks | None]:
        """Counts for the decisions ``laws [D, C]`` of one experiment: ``draw(phases)`` yields, for
        each phase ``(n, seed)`` in turn, the counts of ``n`` more samples of every decision (a law
        group's rows, or one generation's positions).

        At a ``--tv`` budget whose decisions are not capped, the experiment runs in phases with
        futility looks between them (:class:`~specverify.stats.FutilityPlan`), and stops where
        every decision's look says so.  Every phase is the same experiment (the same groups in
        the same heterogeneous batch), so a deviation that depends on the batch is in every
        phase; phases are seeded by (run seed, check, phase), so the counts are the same for any
        worker count.  The phases are one stream of units (:meth:`LoopContext.tally_phases`): the
        workers draw the next phase while a look is taken, and what a stopping look left unread
        is dropped.
        """
        df = max(1, int(((laws > 0).sum(axis=1) - 1).max()))  # the largest law's: every decision draws as many
        plan = FutilityPlan(ctx.tv, df, share, ctx.power)
        looks = FutilityLooks.where_uncapped(
            plan,
            laws,
            lambda look, d: ctx.seed_for(self.id, "look", look, d),
            per_decision=ctx.cap_per_decision,
            cap=cap,
        )
        if looks is None:  # a fixed sample, as large as the cap allows
            n = sample_size(ctx.tv, df, share, ctx.power, cap).samples
            with contextlib.closing(draw([(n, ctx.seed_for(self.id, "loop"))])) as fixed:
                return np.asarray(next(fixed), dtype=np.int64), None
        ends = [*plan.look_samples, plan.final_samples]
        phases = [
            (end - start, ctx.seed_for(self.id, "loop", phase))
            for phase, (start, end) in enumerate(zip([0, *ends], ends))
        ]
        counts = np.zeros(laws.shape, dtype=np.int64)
        with contextlib.closing(draw(phases)) as drawn:
            for _, part in zip(plan.look_samples, drawn):  # the looks first: zip leaves the final phase unread
                counts += part
                if looks(counts):
                    return counts, looks
            counts += next(drawn)
        return counts, looks

    def _decide(
        self,
        ctx: LoopContext,
        counts: np.ndarray,
        laws: np.ndarray,
        share: float,
        groups: list[str],
        label: Callable[[int], str],
        *,
        generations: int,
        counted: str | None = None,
        laws_of: Callable[[Callable[..., torch.Tensor]], np.ndarray] | None = None,
        looked: FutilityLooks | None = None,
    ) -> CheckResult:
        """One test per group, Bonferroni over groups; ``generations`` is how many the loop made
        (``counted``: what was tallied from them, where that is not one outcome a generation);
        ``laws_of`` gives the same laws under another warp, to explain an undeclared loop's failure;
        ``looked``: the experiment's futility looks (the claim is then the whole procedure's)."""
        tests = [
            gof_test(counts[g], laws[g], alpha=share, random_state=ctx.seed_for(self.id, g)) for g in range(len(groups))
        ]
        worst = min(range(len(groups)), key=lambda g: tests[g].pvalue)
        pvalue = min(1.0, tests[worst].pvalue * len(groups))
        if looked is None:
            claim = max(t.min_detectable_tv(share, ctx.power) for t in tests)
        else:
            claim = max(looked.plan.claim(test, laws[g]) for g, test in enumerate(tests))
        expected = laws[worst] * counts[worst].sum()
        score = np.where(
            laws[worst] > 0,
            np.abs(counts[worst] - expected) / np.sqrt(np.maximum(expected, 1.0)),
            np.where(counts[worst] > 0, np.inf, 0.0),
        )
        cell = int(np.argmax(score))
        evidence: Evidence = {
            "test": tests[worst].method,
            "group_pvalues": [t.pvalue for t in tests],
            "groups": groups,
            "observed": counts.tolist(),
            "expected": (laws * counts.sum(axis=1, keepdims=True)).tolist(),
            "where": f"{groups[worst]}: largest deviation at {label(cell)}: observed {int(counts[worst][cell])}, "
            f"expected {expected[cell]:.1f}",
        }
        if looked is not None:
            evidence["futility"] = looked.record()
        samples = int(counts.sum())
        if pvalue <= ctx.alpha:
            tv = tv_estimate(counts[worst], laws[worst], random_state=ctx.seed_for(self.id, "tv"))
            evidence["tv"] = tv_record(tv)
            message = (
                f"generated tokens differ from the warped target law (p = {pvalue:.3g} <= {ctx.alpha:.3g}); estimated "
                f"TV {tv.estimate:.3g} [{tv.low:.3g}, {tv.high:.3g}]; {evidence['where']}"
            )
            explained = (
                None if ctx.oracle.declared or laws_of is None else _explained_by(ctx, self.id, counts, laws_of, share)
            )
            if explained is not None:  # an undeclared loop warping as another engine does: not a loss
                evidence["explained_by"] = explained
                message = (
                    f"the generations fit the {explained} preset's warp, not transformers' (the undeclared default): "
                    f"declare warp={explained!r} to be judged by your engine's own law; against transformers': "
                    f"{message}"
                )
                return self._result(
                    "inconclusive",
                    p_value=pvalue,
                    alpha=ctx.alpha,
                    samples=samples,
                    min_detectable_tv=claim,
                    message=message,
                    evidence=evidence,
                )
            return self._result(
                "fail",
                finding="loss",
                p_value=pvalue,
                alpha=ctx.alpha,
                samples=samples,
                min_detectable_tv=claim,
                message=message,
                evidence=evidence,
            )
        status = "pass" if claim <= 2 * ctx.tv else "inconclusive"
        made = f"{generations:,} generations" + (f" ({counted})" if counted else "")
        message = (
            f"{len(groups)} groups, {made}, no deviation found"
            if status == "pass"
            else f"{made}: could only detect TV >= {claim:.3g}"
        )
        if looked is not None:
            message += f"; {looked.text()}"
        return self._result(
            status,
            p_value=pvalue,
            alpha=ctx.alpha,
            samples=samples,
            min_detectable_tv=claim,
            message=message,
            evidence=evidence,
        )


def _forbidden(
    law: Callable[..., torch.Tensor],
    target: MarkovLM,
    history: torch.Tensor,
    out: torch.Tensor,
    params: SamplingParams,
    groups: list[dict[str, float]],
    which: torch.Tensor,
) -> tuple[str, str] | None:
    """The first generated token the warp ``law`` forbids (a greedy row off its argmax path, or a
    token of probability 0), as ``(finding, message)``; ``None`` when every token is allowed."""
    rows, length = out.shape
    prompt_length = history.shape[1] - length
    greedy = params.temperature == 0 if params.temperature is not None else torch.zeros(rows, dtype=torch.bool)
    for t in range(length):  # over positions, vectorised over rows
        warped = law(target(history[:, : prompt_length + t]), params)
        chosen = warped.gather(-1, out[:, t : t + 1]).squeeze(-1)
        argmax = warped.argmax(-1)
        wrong_greedy = greedy & (out[:, t] != argmax)
        if bool(wrong_greedy.any()):
            row = int(wrong_greedy.nonzero()[0, 0])
            return (
                "contract",
                f"greedy row {row}, position {t}: generated {int(out[row, t])}, the target's argmax is "
                f"{int(argmax[row])}",
            )
        if bool((chosen == 0).any()):
            row = int((chosen == 0).nonzero()[0, 0])
            return (
                "support",
                f"row {row}, position {t}: generated token {int(out[row, t])}, which its warped target forbids "
                f"({groups[int(which[row])]})",
            )
    return None


def _explained_by(
    ctx: LoopContext,
    check_id: str,
    counts: np.ndarray,
    laws_of: Callable[[Callable[..., torch.Tensor]], np.ndarray],
    share: float,
) -> str | None:
    """The first other preset whose law fits the same counts at the check's alpha (every group)."""
    for name, convention in PRESETS.items():
        if name == ctx.oracle.preset:
            continue
        laws = laws_of(convention)
        pvalue = min(
            gof_test(counts[g], laws[g], alpha=share, random_state=ctx.seed_for(check_id, g)).pvalue
            for g in range(len(laws))
        )
        if pvalue * len(laws) > ctx.alpha:
            return name
    return None


def loop_battery() -> list[LoopCheck]:
    """Every loop check, exact ones first."""
    return registered(
        [
            LoopCheck("output"),
            LoopCheck("determinism"),
            LoopCheck("seeds"),
            *[LoopCheck("law", kind) for kind in KINDS],
            LoopCheck("positions"),
            *[LoopCheck("history", kind) for kind in HISTORY_KINDS],
        ],
        families=(LOOP_FAMILY,),
    )


#: What the loop family's models and generations cover: the claim of a conformant verdict holds there.
REACH = (
    "Markov chain models over 4-5 tokens (orders 1-2): 3 generated tokens per parameter group "
    f"({', '.join(kind for kind in KINDS)}), pairs of tokens over 24 generated tokens; "
    f"history parameters ({', '.join(k for k in HISTORY_KINDS if k != 'positions')}): 4 generated tokens, "
    "and pairs over 16 under a windowed penalty, on a self-repeating chain over 3 tokens"
)
