"""The zoo's engines: the reference engine, right, and wrong in the ways engines go wrong.

Each member is an engine (:mod:`specverify._kinds.engine`) with its declared verdict under the
engine family and the checks that catch it.  Two kinds of fault: a speculative loop that is wrong
(the loop zoo's members, run as the engine's speculative path: the engine family knows no exact
law, so what the loop family proves ``non-conformant`` against the target's law is here a
``loss`` against the engine with speculation off), and the engine around the loop wrong (a seed
consumed differently with speculation on; stop tokens checked once a step).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from .._record.vocabulary import Verdict
from .._warps.rules import SamplingParams
from ..samplers import EngineReference, LoopReference
from ._history_loops import (
    _BadWordsIgnoredAtVerifiedRows,
    _LogitBiasBonusOnly,
    _MinTokensBonusOnly,
    _OneGrammarMaskPerStep,
    _PenaltiesIgnoredAtVerifiedRows,
)
from ._loops import _SharedCoins

__all__ = ["ENGINE_MEMBERS", "EngineMember"]


@dataclasses.dataclass(frozen=True)
class EngineMember:
    """An engine, its declared verdict under the engine family (at quick, seed 0), the checks that
    catch it, and its story."""

    name: str
    engine: Any
    verdict: Verdict
    caught_by: tuple[str, ...]
    story: str

    def __post_init__(self) -> None:  # a misspelt declaration fails at import
        object.__setattr__(self, "verdict", Verdict(self.verdict))


class _SeedIgnoredWhenSpeculating(EngineReference):
    """Speculation on draws from the process's global generator, not from the request's seed."""

    def __call__(
        self, prompts: torch.Tensor, num_tokens: int, params: SamplingParams, seed: int, speculative: bool
    ) -> torch.Tensor:
        if speculative:
            seed = int(torch.randint(2**31, ()))
        return super().__call__(prompts, num_tokens, params, seed, speculative)


class _StopCheckedOncePerStep(EngineReference):
    """Speculation on looks for a stop token once a step (every ``k + 1`` tokens), so the tokens a
    step emitted after its stop token stay in the output (rows with a minimum length are right)."""

    def __call__(
        self, prompts: torch.Tensor, num_tokens: int, params: SamplingParams, seed: int, speculative: bool
    ) -> torch.Tensor:
        if not speculative or params.stop_tokens is None or params.min_tokens is not None:
            return super().__call__(prompts, num_tokens, params, seed, speculative)
        free = super().__call__(prompts, num_tokens, dataclasses.replace(params, stop_tokens=None), seed, speculative)
        stops = ((params.stop_tokens.unsqueeze(-1) >> free.clamp(min=0)) & 1).bool()
        first = torch.where(stops.any(-1), stops.int().argmax(-1), num_tokens)
        step = self.loop.k + 1
        kept = (first // step + 1) * step  # the end of the step the stop token was emitted in
        return torch.where(torch.arange(num_tokens) < kept.unsqueeze(-1), free, -1)


def _members() -> dict[str, EngineMember]:
    entries = [
        ("engine-reference", EngineReference(), "conformant", (), "The reference engine: every part right."),
        (
            "engine-speculation-never-on",
            EngineReference(LoopReference(k=0)),
            "conformant",
            (),
            "Speculation off on both sides (the flag ignored): the null calibration of the two-sample tests.",
        ),
        (
            "engine-shared-draft-and-verifier-coins",
            EngineReference(_SharedCoins()),
            "lossy",
            ("engine.law[sampled]",),
            "The speculative path's draft noise and acceptance coin come from one stream (vLLM #47386, #54282).",
        ),
        (
            "engine-penalties-ignored-at-verified-rows",
            EngineReference(_PenaltiesIgnoredAtVerifiedRows()),
            "lossy",
            ("engine.law[penalties]",),
            "Penalties applied by the bonus row's sampler only (vLLM #18902, fixed by PR #19482).",
        ),
        (
            "engine-bad-words-ignored-at-verified-rows",
            EngineReference(_BadWordsIgnoredAtVerifiedRows()),
            "lossy",
            ("engine.law[bad-words]",),
            "Bad words masked by the bonus row's sampler only (vLLM #18902, fixed by PR #19482).",
        ),
        (
            "engine-min-tokens-bonus-only",
            EngineReference(_MinTokensBonusOnly()),
            "lossy",
            ("engine.law[min-tokens]",),
            "min_tokens' stop-token mask reaches only the bonus row (as min_p and logit_bias in vLLM #42744, #38467).",
        ),
        (
            "engine-logit-bias-bonus-only",
            EngineReference(_LogitBiasBonusOnly()),
            "lossy",
            ("engine.law[logit-bias]",),
            "The logit bias added by the bonus row's sampler only, the verified rows sampled without it "
            "(vLLM #38467, #42744).",
        ),
        (
            "engine-one-grammar-mask-per-step",
            EngineReference(_OneGrammarMaskPerStep()),
            "lossy",
            ("engine.law[grammar]",),
            "One grammar bitmask for every row of a speculative step, the step's first row's: the automaton is "
            "not advanced through the drafts (the grammar hazard of speculation).",
        ),
        (
            "engine-seed-ignored-when-speculating",
            _SeedIgnoredWhenSpeculating(),
            "non-conformant",
            ("engine.determinism",),
            "With speculation on the request's seed is not what the sampling draws from: the same seed, "
            "another output.",
        ),
        (
            "engine-stop-checked-once-per-step",
            _StopCheckedOncePerStep(),
            "lossy",
            ("engine.law[stop]",),
            "With speculation on a stop token is looked for once a step: the tokens a step emitted after it are kept.",
        ),
    ]
    return {
        name: EngineMember(name, engine, Verdict(verdict), caught, story)
        for name, engine, verdict, caught, story in entries
    }


#: name -> member, in declaration order.
ENGINE_MEMBERS: dict[str, EngineMember] = _members()
for _name, _member in ENGINE_MEMBERS.items():
    _member.engine.name = f"specverify.zoo.{_name}"
