"""The zoo's loops that get sampling state that remembers wrong, each as a public bug shipped it.

Each is the reference loop (:class:`~specverify.samplers._loop_reference.LoopReference`) with one
of its history hooks wrong: :meth:`~LoopReference.processed` (what a row's logits get),
:meth:`~LoopReference.draft_processed` (the drafter's), :meth:`~LoopReference.cut` (a draft not verified),
:meth:`~LoopReference.row_state` (which drafts a row sees), :meth:`~LoopReference.record` (what a
step adds to the state).  Entries are ``(name, loop, verdict, caught_by, story)`` for
:mod:`specverify.zoo._loops`.
"""

from __future__ import annotations

import dataclasses

import torch

from .._history import HISTORY_CONVENTIONS, generated_length, grammar_mask, is_stop
from .._history.presets import HISTORY_PRESETS
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


class _LogitBiasBonusOnly(LoopReference):
    def processed(self, logits, state, prompt_length, params, position):
        if position < self.k:  # the rejection sampler's rows: no bias; the bonus row's sampler adds it
            params = _without(params, ("logit_bias",))
        return super().processed(logits, state, prompt_length, params, position)


class _MinTokensLiftedEarly(LoopReference):
    def processed(self, logits, state, prompt_length, params, position):
        if position < self.k and params.min_tokens is not None:
            # the verified rows count their own token: row i masked iff len(out) + i + 1 < n, one token early
            params = dataclasses.replace(params, min_tokens=params.min_tokens - 1)
        return super().processed(logits, state, prompt_length, params, position)


class _StopMaskedPastMinTokens(LoopReference):
    def processed(self, logits, state, prompt_length, params, position):
        z = super().processed(logits, state, prompt_length, params, position)
        if position < self.k or state is None or params.min_tokens is None or params.stop_tokens is None:
            return z
        # the bonus row's mask counts the committed tokens, not the k drafts before it: stop tokens stay
        # masked for up to k tokens past the minimum
        committed = generated_length(state[:, : state.shape[1] - position], prompt_length)
        short = (committed < params.min_tokens.to(committed.device)).unsqueeze(-1)
        token = torch.arange(z.shape[-1], device=z.device).expand(z.shape[0], -1)
        return torch.where(short & is_stop(token, params.stop_tokens), -torch.inf, z)


class _GrammarFreeDrafter(LoopReference):
    def draft_processed(self, logits, state, prompt_length, params, position):
        # the drafter proposes without the grammar (an n-gram or EAGLE head), every draft verified
        return super().draft_processed(logits, state, prompt_length, _without(params, ("grammar",)), position)


class _GrammarCutRedrawnFromP(_GrammarFreeDrafter):
    def cut(self, drafted, state, prompt_length, params):
        if params.grammar is None:
            return None
        # an invalid draft is cut and its row drawn from p, as if no draft were there
        return grammar_mask(state, prompt_length, params.grammar).gather(1, drafted.unsqueeze(-1)).squeeze(-1)


class _CountsByConvention(LoopReference):
    """Declares a preset's warp (and history processors), and counts the history's tokens as another
    engine does: exact under that engine's convention (:mod:`specverify._history.conventions`,
    :mod:`specverify._history.presets`), not a speculation bug."""

    def __init__(self, convention: str, declared: str = "vllm") -> None:
        super().__init__(warp=declared)
        self._history = HISTORY_PRESETS.get(convention) or HISTORY_CONVENTIONS[convention].processors


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


#: The members: each at its verdict at quick (seed 0) and at standard through the check named first:
#: ``non-conformant`` where the loop generates an outcome of probability 0 (a stop token before
#: ``min_tokens``, a token the top-k cut, a bias or a grammar removes), ``lossy`` where only the law
#: moves; ``grammar-drafts-not-cut`` is a correct loop that looks like a bug.  The others named catch it too.
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
        ("loop.history[min-tokens]", "loop.history[mixed]", "loop.history[grammar]"),
        "The processor's copies share one state: every drafted token is recorded, rejected or not, and "
        "accepted ones twice, so the law depends on the drafter (vmlx-swift #357, fixed by PR #361). A grammar "
        "matcher advanced through the drafts to fill the step's bitmask and not rolled back (vLLM's "
        "grammar_bitmask rolls back) is this class: its outputs leave the grammar.",
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
        "logit-bias-bonus-only",
        _LogitBiasBonusOnly(),
        "non-conformant",
        ("loop.history[logit-bias]", "loop.history[mixed]"),
        "logit_bias added by the bonus row's sampler only, the verified rows sampled without it (vLLM #38467, "
        "#42744: refused with speculation since #31982).",
    ),
    (
        "min-tokens-lifted-one-early",
        _MinTokensLiftedEarly(),
        "non-conformant",
        ("loop.history[min-tokens]",),
        "The verified rows count their own token against min_tokens (row i masked iff len(out) + i + 1 < n): "
        "the stop tokens' mask lifts one token early (the off-by-one vLLM PR #41768 claims).",
    ),
    (
        "stop-masked-past-min-tokens",
        _StopMaskedPastMinTokens(),
        "lossy",
        ("loop.history[min-tokens]",),
        "The bonus row's min_tokens mask counts the committed tokens, not the step's drafts: stop tokens stay "
        "masked up to k tokens past the minimum (vLLM V1's bonus row, inferred from its code, not reported).",
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
    # a convention, not a bug: the penalties check's finding names it (the run is inconclusive)
    (
        "declares-vllm-penalties-count-output-only",
        _CountsByConvention("output-only"),
        "inconclusive",
        (),
        "Declares vLLM and counts the generated tokens only for every penalty, as SGLang's penaltylib does (vLLM "
        "counts the prompt for repetition): exact under that convention, which loop.history[penalties] names.",
    ),
    (
        "declares-vllm-bad-words-match-prompt",
        _CountsByConvention("bad-words-in-prompt"),
        "inconclusive",
        (),
        "Declares vLLM and matches bad words across the prompt's tail too, as transformers does (vLLM matches the "
        "generated tokens only): exact under that convention, which loop.history[bad-words] names.",
    ),
    (
        "declares-sglang-penalties-as-vllm",
        _CountsByConvention("vllm", declared="sglang"),
        "inconclusive",
        (),
        "Declares SGLang and applies vLLM's penalties (repetition over the prompt too, before the additive terms): "
        "exact under vLLM's history preset, which loop.history[penalties] names.",
    ),
    (
        "grammar-drafts-not-cut",
        _GrammarFreeDrafter(),
        "conformant",
        (),
        "The drafter proposes without the grammar and drafts are not cut at the first invalid token (vLLM's "
        "scheduler cuts them): exact, only slower, since the target's masked row gives an invalid draft "
        "probability 0, so it is rejected and its row drawn from the residual of p.",
    ),
    (
        "grammar-draft-cut-redrawn-from-p",
        _GrammarCutRedrawnFromP(),
        "lossy",
        ("loop.history[grammar]",),
        "A draft proposed without the grammar is cut at the first invalid token and that row drawn from p: "
        "the row's law is p + Q_inv (p - r), r the residual norm(max(p - q, 0)), Q_inv the draft's mass "
        "outside the grammar; exact only for argmax or grammar-masked drafts (derived, no engine reported).",
    ),
]
