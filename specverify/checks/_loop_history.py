"""The loop family's checks of sampling state that remembers: ``loop.history[kind]``.

Each kind poses history-dependent parameters (:mod:`specverify._history`) to groups of rows of one
heterogeneous batch, on a *self-repeating* order-1 chain over 3 tokens (a heavy diagonal, so
penalties bite at every row of a speculative step) with a drafter close to it (most drafts
accepted, so the rows after the first carry the step), after a prompt that already holds some of the
tokens penalised.  The law of 4 generated tokens, ``-1`` after a stop token, is tested per group
against :func:`~specverify._history.history_generation_law` under the declared warp: G-tests,
Bonferroni over groups.  A group is one parameter (or one mix), so a failure names it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import torch

from .._budgets import decision_cap
from .._history import history_generation_law
from .._loop import MarkovLM
from .._result import CheckResult
from ._loop_context import LoopContext, LoopTally, _params, loop_parameters

__all__ = ["HISTORY_KINDS", "HISTORY_LENGTH", "HISTORY_VOCAB", "PaddedTally", "history_law", "repeating_chain"]

HISTORY_VOCAB, HISTORY_LENGTH = 3, 4
#: The prompt: token 0 twice (penalised from the start where the prompt counts), then token 1.
PROMPT = (0, 0, 1)
#: Parameter groups of each kind (min_tokens at, below and above a 3-draft step; stop token 0).
HISTORY_KINDS: dict[str, list[dict[str, Any]]] = {
    "penalties": [
        {"repetition_penalty": 2.5},
        {"frequency_penalty": 1.2},
        {"presence_penalty": 1.5},
        {"repetition_penalty": 1.8, "frequency_penalty": 0.6, "penalty_window": 0},
        {"frequency_penalty": 1.0, "presence_penalty": 0.5, "penalty_window": 2},
    ],
    "min-tokens": [{"min_tokens": n, "stop_tokens": 0b001} for n in (1, 2, 3, 4)],
    "stop": [{"stop_tokens": 0b001}, {"stop_tokens": 0b110}],
    "logit-bias": [{"logit_bias": [1.5, 0.0, -1.0]}, {"logit_bias": [-float("inf"), 0.5, 0.0]}],
    "mixed": [
        {},
        {"repetition_penalty": 1.5, "min_tokens": 2, "stop_tokens": 0b100, "logit_bias": [0.0, 0.5, 0.0]},
        {"temperature": 0.7, "frequency_penalty": 0.8, "stop_tokens": 0b010, "top_k": 2},
    ],
}


@dataclasses.dataclass(frozen=True)
class PaddedTally(LoopTally):
    """Whole generations by row group, coded in base ``V + 1`` (``-1`` after a stop token is the digit ``V``)."""

    def count(self, out: torch.Tensor) -> np.ndarray:
        rows, length = out.shape
        tokens = out.numpy()
        digits = np.where(tokens < 0, self.vocab, tokens)
        cells = (self.vocab + 1) ** length
        code = digits @ ((self.vocab + 1) ** np.arange(length - 1, -1, -1, dtype=np.int64))
        group = (self.start + np.arange(rows)) % self.groups
        return np.bincount(group * cells + code, minlength=self.groups * cells).reshape(self.groups, cells)


def repeating_chain(seed: int, vocab: int = HISTORY_VOCAB, repeat: float = 2.0, noise: float = 0.5) -> MarkovLM:
    """An order-1 chain that mostly repeats its last token: logits ``noise * N(0, 1) + repeat * I``."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(vocab, vocab, generator=g, dtype=torch.float64) * noise
    return MarkovLM(logits + repeat * torch.eye(vocab, dtype=torch.float64), context=(0,))


def history_law(check: Any, ctx: LoopContext) -> CheckResult:
    """Run ``loop.history[kind]`` for ``check`` (a :class:`~specverify.checks._loop.LoopCheck`,
    whose sizing and decision it uses)."""
    vocab, length = HISTORY_VOCAB, HISTORY_LENGTH
    groups = HISTORY_KINDS[check.case]
    target = repeating_chain(ctx.seed_for(check.id, "target"))
    near = torch.randn(vocab, vocab, generator=torch.Generator().manual_seed(ctx.seed_for(check.id, "draft")))
    draft = MarkovLM(target.logits + 0.3 * near.to(torch.float64), context=(0,))
    prompt_row = torch.tensor(PROMPT)
    names = loop_parameters(ctx.loop)

    def laws_of(law: Callable[..., torch.Tensor]) -> np.ndarray:
        one = torch.zeros(1, dtype=torch.int64)
        return np.stack(
            [history_generation_law(target, prompt_row, length, _params([g], one, names), law).numpy() for g in groups]
        )

    laws = laws_of(ctx.oracle)
    share = ctx.alpha / len(groups)
    tally = PaddedTally(vocab, pairs=False, law=laws, groups=len(groups))

    def draw(phases: list[tuple[int, int]]) -> Generator[np.ndarray, None, None]:
        return ctx.tally_phases(
            target, draft, prompt_row[None], [(n * len(groups), seed) for n, seed in phases], length, groups, tally
        )

    counts, looked = check._counts(
        ctx, laws, share, decision_cap(ctx.max_samples, len(groups), per_decision=ctx.cap_per_decision), draw
    )
    result: CheckResult = check._decide(
        ctx,
        counts,
        laws,
        share,
        [_label(g) for g in groups],
        lambda c: " ".join("-" if d == vocab else str(d) for d in np.unravel_index(c, (vocab + 1,) * length)),
        generations=int(counts.sum()),
        laws_of=laws_of,
        looked=looked,
    )
    return result


def _label(group: dict[str, Any]) -> str:
    """A group as the parameters it sets (the parameter a failure names)."""
    if not group:
        return "no history parameters"
    return ", ".join(f"{name}={value}" for name, value in group.items())
