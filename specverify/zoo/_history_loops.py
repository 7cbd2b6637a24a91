"""The zoo's loops that get sampling state that remembers wrong, each as a public bug shipped it.

Each is the reference loop (:class:`~specverify.samplers._loop_reference.LoopReference`) with one
of its history hooks wrong: :meth:`~LoopReference.processed` (what a row's logits get),
:meth:`~LoopReference.row_state` (which drafts a row sees), :meth:`~LoopReference.record` (what a
step adds to the state).  Entries are ``(name, loop, verdict, caught_by, story)`` for
:mod:`specverify.zoo._loops`.
"""

from __future__ import annotations

import dataclasses

import torch

from .._history import grammar_mask
from .._warps.rules import SamplingParams
from ..samplers._loop_reference import LoopReference

__all__ = ["HISTORY_ENTRIES"]

_PENALTIES = ("repetition_penalty", "presence_penalty", "frequency_penalty")


def _without(params: SamplingParams, names: tuple[str, ...]) -> SamplingParams:
    return dataclasses.replace(params, **dict.fromkeys(names))


class _PenaltiesIgnoredAtVerifiedRows(LoopReference):
    def processed(self, logits, state, prompt_length, params, position):
        if position < self.k:  # the rejection sampler's rows: no penalties; the bonus row's sampler has them
            params = _without(params, _PENALTIES)
        return super().processed(logits, state, prompt_length, params, position)


class _MinTokensBonusOnly(LoopReference):
    def processed(self, logits, state, prompt_length, params, position):
        if position < self.k:  # the stop tokens are masked on the bonus row only
            params = _without(params, ("min_tokens",))
        return super().processed(logits, state, prompt_length, params, position)


class _BadWordsIgnoredAtVerifiedRows(LoopReference):
    def processed(self, logits, state, prompt_length, params, position):
        if position < self.k:  # the rejection sampler's rows are not masked; the bonus row's sampler is
            params = _without(params, ("bad_words",))
        return super().processed(logits, state, prompt_length, params, position)


class _OneGrammarMaskPerStep(LoopReference):
    def processed(self, logits, state, prompt_length, params, position):
        if params.grammar is None or state is None or position == 0:
            return super().processed(logits, state, prompt_length, params, position)
        # every row of the step masked as its first row is: the grammar's state not advanced by the drafts
        z = super().processed(logits, state, prompt_length, _without(params, ("grammar",)), position)
        first = grammar_mask(state[:, : state.shape[1] - position], prompt_length, params.grammar)
        return torch.where(first, -torch.inf, z)


class _RelaxedState(LoopReference):
    def row_state(self, seen, drafts, position):
        return seen  # one state from the committed tokens, copied over every row of the step


class _OneTokenPerStep(LoopReference):
    def record(self, tokens, accepted, drafts):
        return tokens.gather(1, accepted.unsqueeze(-1))  # the step's last token only


class _RejectedDraftsRecorded(LoopReference):
    def record(self, tokens, accepted, drafts):
        # the processor's copy shares the state: every drafted token, rejected or not, then the emitted ones
        return torch.cat([drafts, tokens], dim=1)


#: The members: each ``non-conformant`` at quick (seed 0) through the check named first, where it
#: generates an outcome of probability 0 (a stop token before ``min_tokens``, a token the top-k cut
#: removes once the penalty is applied); the others catch it as a ``loss``.
HISTORY_ENTRIES = [
    (
        "penalties-ignored-at-verified-rows",
        _PenaltiesIgnoredAtVerifiedRows(),
        "non-conformant",
        ("loop.history[mixed]", "loop.history[penalties]", "loop.history[positions]"),
        "Repetition, presence and frequency penalties applied by the bonus row's sampler only, silently "
        "skipped at the verified rows (vLLM #18902, fixed by PR #19482; TensorRT-LLM before PR #17701).",
    ),
    (
        "penalty-state-one-token-per-step",
        _OneTokenPerStep(),
        "non-conformant",
        ("loop.history[mixed]", "loop.history[penalties]", "loop.history[positions]"),
        "The penalty state advances by one token per speculative step, whatever the step emitted: "
        "frequency acts at about f/L, min_tokens counts steps (SGLang PR #33643).",
    ),
    (
        "relaxed-penalty-state",
        _RelaxedState(),
        "non-conformant",
        ("loop.history[mixed]", "loop.history[penalties]", "loop.history[positions]"),
        "One 'relaxed' penalty state from the committed tokens broadcast over every draft row: row i "
        "misses drafts 1..i-1 (SGLang EAGLE v1/v2, DFlash).",
    ),
    (
        "rejected-drafts-recorded",
        _RejectedDraftsRecorded(),
        "non-conformant",
        ("loop.history[min-tokens]", "loop.history[mixed]"),
        "The processor's copies share one state: every drafted token is recorded, rejected or not, and "
        "accepted ones twice, so the law depends on the drafter (vmlx-swift #357, fixed by PR #361).",
    ),
    (
        "min-tokens-bonus-only",
        _MinTokensBonusOnly(),
        "non-conformant",
        ("loop.history[min-tokens]",),
        "min_tokens' stop-token mask reaches only the bonus row, the verified rows may stop early "
        "(as min_p and logit_bias in vLLM #42744, #38467).",
    ),
    (
        "bad-words-ignored-at-verified-rows",
        _BadWordsIgnoredAtVerifiedRows(),
        "non-conformant",
        ("loop.history[bad-words]",),
        "Bad words masked by the bonus row's sampler only, the verified draft rows sampled without the mask "
        "(vLLM #18902, fixed by PR #19482).",
    ),
    (
        "one-grammar-mask-per-step",
        _OneGrammarMaskPerStep(),
        "non-conformant",
        ("loop.history[grammar]",),
        "One grammar bitmask for every row of a speculative step, the step's first row's: the automaton "
        "is not advanced through the drafts (the note's grammar hazard; SGLang and vLLM fill one row per draft).",
    ),
]
