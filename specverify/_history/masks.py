"""Tokens the history forbids outright: bad words and a grammar (a token automaton).

Both read the *generated* tokens only (vLLM matches bad words against the output, and a grammar
constrains the output from its first token), both are masks (``-inf``), and both apply first,
before logit bias and the penalties (vLLM applies the grammar's bitmask before its sampler and bad
words first within it).  Under speculation drafted row ``i`` is masked after the emitted prefix and
drafts ``1..i-1``: the grammar's state advances through the drafts, row by row, and a step's
rejected drafts never advance the committed state.

* ``bad_words [B, W, M]``: a sequence's last token is masked where the generated tokens end with
  its other tokens (a one-token sequence is always masked).
* ``grammar [B, S, V]``: the state after the generated tokens (start 0, ``grammar[s, t]`` after token
  ``t``); the tokens with ``-1`` in that state's row are masked.  Once a token outside the grammar
  was generated the state is dead (``-1``) and nothing is masked: the output is non-conformant
  already (:func:`grammar_violation` says where).
"""

from __future__ import annotations

import torch

__all__ = ["bad_words_mask", "grammar_mask", "grammar_states", "grammar_violation"]


def _generated(history: torch.Tensor, prompt_length: int) -> torch.Tensor:
    return (history >= 0).sum(-1) - prompt_length


def bad_words_mask(history: torch.Tensor, prompt_length: int, bad_words: torch.Tensor, vocab: int) -> torch.Tensor:
    """``[B, V]`` bool: the tokens ``bad_words [B, W, M]`` ban after each left-padded ``history [B, L]``
    (``prompt_length`` prompt tokens, then the generated ones); vectorised over rows and sequences."""
    words = bad_words.to(history.device)
    rows, _, width = words.shape
    before = width - 1  # the tokens a sequence's last one must follow
    tail = history[:, -before:] if before else history[:, :0]
    if tail.shape[1] < before:  # a history shorter than the longest sequence: pad it on the left
        tail = torch.cat([tail.new_full((rows, before - tail.shape[1]), -1), tail], dim=1)
    from_end = torch.arange(before - 1, -1, -1, device=history.device)  # 0 at the last generated token
    generated = from_end < _generated(history, prompt_length).unsqueeze(-1)  # [B, M-1]
    prefix = words[:, :, :-1]
    matches = (prefix == -1) | ((prefix == tail.unsqueeze(1)) & generated.unsqueeze(1))
    banned = (words[:, :, -1] >= 0) & matches.all(-1)  # [B, W]
    onehot = torch.nn.functional.one_hot(words[:, :, -1].clamp_min(0), vocab).to(torch.bool)
    return (onehot & banned.unsqueeze(-1)).any(1)


def grammar_states(history: torch.Tensor, prompt_length: int, grammar: torch.Tensor) -> torch.Tensor:
    """``[B]``: each row's automaton state after its generated tokens (``-1``: one left the grammar);
    a loop over the generated columns, vectorised over rows."""
    table = grammar.to(history.device)
    rows, width = history.shape
    generated = _generated(history, prompt_length)
    state = torch.zeros(rows, dtype=torch.int64, device=history.device)
    index = torch.arange(rows, device=history.device)
    longest = int(generated.max()) if rows else 0
    for column in range(width - longest, width):  # over positions, vectorised over rows
        token = history[:, column]
        moves = (width - 1 - column < generated) & (state >= 0)
        step = table[index, state.clamp_min(0), token.clamp_min(0)]
        state = torch.where(moves, step, state)
    return state


def grammar_mask(history: torch.Tensor, prompt_length: int, grammar: torch.Tensor) -> torch.Tensor:
    """``[B, V]`` bool: the tokens the grammar forbids in each row's state (none in a dead state)."""
    state = grammar_states(history, prompt_length, grammar)
    table = grammar.to(history.device)
    allowed = table[torch.arange(table.shape[0], device=history.device), state.clamp_min(0)] >= 0
    return ~allowed & (state >= 0).unsqueeze(-1)


def grammar_violation(tokens: torch.Tensor, grammar: torch.Tensor) -> tuple[int, int] | None:
    """Where the generated ``tokens [n]`` (``-1`` after a stop token) first leave ``grammar [S, V]``:
    ``(position, state)``, the state that forbade the token there; ``None`` when they stay in it."""
    state = 0
    for position, token in enumerate(tokens.tolist()):
        if token < 0:
            break
        after = int(grammar[state, token])
        if after < 0:
            return position, state
        state = after
    return None
