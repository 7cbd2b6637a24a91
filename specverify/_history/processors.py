"""The history-dependent sampling parameters as a law: what the tokens so far do to the logits.

Penalties, the min-tokens mask and logit bias change every position's law by the prefix emitted
before it (the *history*).  :func:`history_logits` states them once, vectorised over rows, for one
convention, vLLM's (V1 ``Sampler``; ``ops/penalties.py``), named :data:`CONVENTION`; the declared
memoryless warp (temperature, top-k, top-p, min-p) then runs on its result.  In order:

0. the grammar's and the bad words' masks (:mod:`specverify._history.masks`), ``-inf``;
1. ``logit_bias`` is added, and while fewer than ``min_tokens`` tokens are generated the stop
   tokens (``stop_tokens``) get ``-inf`` (vLLM applies the two together, before the penalties);
2. ``repetition_penalty`` ``rho`` on every token seen: a positive logit is divided by ``rho``,
   any other multiplied by it;
3. ``frequency_penalty`` ``f`` and ``presence_penalty`` ``p``: ``-f * count - p * [count > 0]``.

The tokens counted (``penalty_window``): ``-1``, vLLM's own sets (repetition: prompt and generated
tokens as a set; frequency and presence: generated tokens only); ``0``, generated tokens only, for
all three; ``n > 0``, the last ``n`` tokens of prompt and generated ones (llama.cpp's
``penalty_last_n``).  Under speculation the history of drafted row ``i`` is the emitted prefix and
drafts ``1..i-1``; of the bonus row, every draft: the law never depends on the drafter.
"""

from __future__ import annotations

import torch

from .._warps.rules import SamplingParams
from .masks import bad_words_mask, grammar_mask

__all__ = ["CONVENTION", "generated_length", "history_logits", "is_stop"]

#: The one convention stated here (the order and token sets above).
CONVENTION = "vllm"


def is_stop(tokens: torch.Tensor, stop_tokens: torch.Tensor | None) -> torch.Tensor:
    """``tokens [B, ...]`` that are their row's stop tokens (``stop_tokens [B]`` bit masks); ``-1`` never is."""
    if stop_tokens is None:
        return torch.zeros_like(tokens, dtype=torch.bool)
    mask = stop_tokens.to(tokens.device).reshape(-1, *([1] * (tokens.dim() - 1)))
    return (tokens >= 0) & (((mask >> tokens.clamp_min(0)) & 1) == 1)


def generated_length(history: torch.Tensor, prompt_length: int) -> torch.Tensor:
    """``[B]``: the generated tokens in each left-padded ``history [B, L]`` (its tokens past the prompt)."""
    return (history >= 0).sum(-1) - prompt_length


def history_logits(
    logits: torch.Tensor, history: torch.Tensor, prompt_length: int, params: SamplingParams
) -> torch.Tensor:
    """``[B, V]`` float64: ``logits [B, V]`` after the history processors of each row's parameters,
    ``history [B, L]`` the prompt (``prompt_length`` tokens) and the tokens generated after it,
    left-padded with ``-1``.  Parameters not given are off; with none given the logits come back
    as float64, unchanged."""
    z = logits.to(torch.float64)
    rows, vocab = z.shape
    if params.grammar is not None:
        z = torch.where(grammar_mask(history, prompt_length, params.grammar).to(z.device), -torch.inf, z)
    if params.bad_words is not None:
        z = torch.where(bad_words_mask(history, prompt_length, params.bad_words, vocab).to(z.device), -torch.inf, z)
    if params.logit_bias is not None:
        z = z + params.logit_bias.to(z.device)
    if params.min_tokens is not None and params.stop_tokens is not None:
        short = generated_length(history, prompt_length).to(z.device) < params.min_tokens.to(z.device)
        token = torch.arange(vocab, device=z.device).expand(rows, -1)
        z = torch.where(short.unsqueeze(-1) & is_stop(token, params.stop_tokens), -torch.inf, z)
    rho, presence, frequency = params.repetition_penalty, params.presence_penalty, params.frequency_penalty
    if rho is None and presence is None and frequency is None:
        return z
    whole, generated = _counts(history, prompt_length, vocab, params.penalty_window)
    if rho is not None:
        seen = whole > 0
        r = rho.to(z.device).unsqueeze(-1)
        z = torch.where(seen, torch.where(z > 0, z / r, z * r), z)
    if frequency is not None:
        z = z - frequency.to(z.device).unsqueeze(-1) * generated
    if presence is not None:
        z = z - presence.to(z.device).unsqueeze(-1) * (generated > 0)
    return z


def _counts(
    history: torch.Tensor, prompt_length: int, vocab: int, window: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``[B, V]`` counts of each token for repetition and for frequency/presence, by ``window``
    (the module docstring); vectorised over rows and positions."""
    width = history.shape[1]
    valid = history >= 0
    from_end = torch.arange(width - 1, -1, -1, device=history.device).expand_as(history)  # 0 at the last column
    generated = valid & (from_end < generated_length(history, prompt_length).unsqueeze(-1))
    onehot = torch.nn.functional.one_hot(history.clamp_min(0), vocab).to(torch.float64)

    def count(mask: torch.Tensor) -> torch.Tensor:
        return (onehot * mask.unsqueeze(-1)).sum(1)

    own_whole, own_generated = count(valid), count(generated)
    if window is None:
        return own_whole, own_generated
    n = window.to(history.device).unsqueeze(-1)
    windowed = count(valid & (from_end < n))
    scope = torch.where(n > 0, windowed, torch.where(n == 0, own_generated, own_whole))
    return scope, torch.where(n == -1, own_generated, torch.where(n > 0, windowed, own_generated))
