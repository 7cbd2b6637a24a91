"""The exact law of a short generation under history-dependent parameters, stop tokens included.

A row that emits one of its stop tokens ends there: the loop returns the stop token and ``-1`` in
every later column (:func:`stop_padding_violation` audits that).  An outcome is coded in base
``V + 1``, ``-1`` as the digit ``V`` (:func:`padded_code`), first token most significant.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .._loop import MarkovLM
from .._warps.rules import SamplingParams, warp
from .processors import history_logits, is_stop

__all__ = ["history_generation_law", "padded_code", "stop_padding_violation"]

Law = Callable[[torch.Tensor, SamplingParams], torch.Tensor]
Processors = Callable[[torch.Tensor, torch.Tensor, int, SamplingParams], torch.Tensor]


def padded_code(tokens: torch.Tensor, vocab: int) -> torch.Tensor:
    """``[B]`` base-``V+1`` codes of ``tokens [B, n]`` (``-1`` is the digit ``V``)."""
    n = tokens.shape[1]
    digits = torch.where(tokens < 0, vocab, tokens)
    return (digits * (vocab + 1) ** torch.arange(n - 1, -1, -1, device=tokens.device)).sum(-1)


def history_generation_law(
    target: MarkovLM,
    prompt: torch.Tensor,
    num_tokens: int,
    params: SamplingParams,
    law: Law | None = None,
    processors: Processors = history_logits,
) -> torch.Tensor:
    """``[(V+1)**num_tokens]``: the exact law of one row's output (:func:`padded_code`) after
    ``prompt [L]`` under the row's ``params`` (one row): at every position the warp ``law``
    (``(logits, params) -> probs``, default transformers') of the target's logits after the history
    processors (default :func:`~specverify._history.processors.history_logits`, vLLM's convention;
    another of :mod:`specverify._history.conventions`) of the prompt and the tokens before it; after a
    stop token, ``-1``.  Every sequence enumerated at once (vectorised over sequences, a loop over
    positions): small ``V**num_tokens`` only."""
    vocab = target.vocab_size
    sequences = torch.cartesian_prod(*[torch.arange(vocab)] * num_tokens).reshape(-1, num_tokens)
    count = sequences.shape[0]
    rows = params.select(torch.zeros(count, dtype=torch.int64))
    joint = torch.ones(count, dtype=torch.float64)
    stopped = torch.zeros(count, dtype=torch.bool)
    for t in range(num_tokens):  # over positions, vectorised over sequences
        prefix = torch.cat([prompt.expand(count, -1), sequences[:, :t]], dim=1)
        z = processors(target(prefix), prefix, prompt.shape[0], rows)
        probs = warp(z, rows) if law is None else law(z, rows)
        token = sequences[:, t]
        # past the stop token the output is -1: count each ended sequence once (its token-0 copy)
        factor = torch.where(stopped, (token == 0).to(torch.float64), probs.gather(-1, token[:, None]).squeeze(-1))
        joint = joint * factor
        stopped = stopped | is_stop(token, rows.stop_tokens)
    ended = torch.cumsum(is_stop(sequences, rows.stop_tokens).to(torch.int64), dim=1)
    padded = torch.where((ended - is_stop(sequences, rows.stop_tokens).to(torch.int64)) > 0, -1, sequences)
    out = torch.zeros((vocab + 1) ** num_tokens, dtype=torch.float64)
    return out.index_add_(0, padded_code(padded, vocab), joint)


def stop_padding_violation(output: torch.Tensor, stop_tokens: torch.Tensor | None) -> str | None:
    """Where ``output [B, n]`` breaks the stop rule: ``-1`` anywhere but after the row's first stop
    token, or a token after it; ``None`` when every row keeps it."""
    stop = is_stop(output, stop_tokens)
    before = torch.cumsum(stop.to(torch.int64), dim=1) - stop.to(torch.int64) > 0  # past the first stop token
    wrong = (output == -1) != before
    if not bool(wrong.any()):
        return None
    row = int(wrong.any(-1).nonzero()[0, 0])
    column = int(wrong[row].nonzero()[0, 0])
    if bool(before[row, column]):
        return f"row {row} generated token {int(output[row, column])} at position {column}, after its stop token"
    return f"row {row}: -1 at position {column} before any stop token"
