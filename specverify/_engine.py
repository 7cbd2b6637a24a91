"""Engines: a whole inference engine's ``generate()``, with speculation on, against itself with it off.

An engine is the system under test end to end, KV cache, position ids, scheduler and stop handling
included::

    tokens = engine(prompts, num_tokens, params, seed, speculative)   # [B, num_tokens] int64

``prompts [B, P] int64`` are token ids; ``params`` the rows' :class:`~specverify._warps.rules.SamplingParams`;
``seed`` seeds the engine's own randomness (the same seed gives the same output); ``speculative``
turns speculation on or off.  A row that a stop token ends early is ``-1`` after it.  The one oracle
with no convention at all is the engine with speculation off: the two modes' laws must be equal, and
:func:`position_tables` and :func:`length_counts` turn generations into the tables the two-sample tests
(:func:`~specverify.stats.two_sample_test`) compare.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ._warps.rules import PARAMETERS

__all__ = ["audit_generations", "engine", "length_counts", "position_tables"]


def engine(fn: Any = None, *, name: str | None = None, parameters: tuple[str, ...] = ("temperature",)) -> Any:
    """Declare a callable an engine (see the module docstring), in one line.

    ``parameters`` names the sampling parameters it honours; the harness gives it only those.
    """
    unknown = set(parameters) - set(PARAMETERS)
    if unknown:
        raise ValueError(f"unknown sampling parameters {sorted(unknown)}; known: {PARAMETERS}")

    def declare(f: Any) -> Any:
        f.contract = "engine"
        f.parameters = tuple(parameters)
        if name is not None:
            f.name = name
        return f

    return declare(fn) if fn is not None else declare


def audit_generations(tokens: Any, rows: int, num_tokens: int, vocab: int) -> list[str]:
    """What breaks the engine contract in one call's output (empty: nothing): its type, shape and
    dtype, ids outside ``[0, vocab)``, and a token after ``-1`` (a row must stay ended)."""
    if not isinstance(tokens, torch.Tensor):
        return [f"the engine returned {type(tokens).__name__}, not a tensor of token ids"]
    if tuple(tokens.shape) != (rows, num_tokens) or tokens.dtype != torch.int64:
        return [f"the engine returned {tokens.dtype} {tuple(tokens.shape)}, not int64 {(rows, num_tokens)}"]
    problems = []
    bad = (tokens < -1) | (tokens >= vocab)
    if bool(bad.any()):
        row, column = (int(i) for i in bad.nonzero()[0])
        problems.append(f"row {row} position {column} holds {int(tokens[row, column])}, outside [0, {vocab})")
    ended = (tokens == -1).cummax(dim=1).values
    resumed = ended & (tokens != -1)
    if bool(resumed.any()):
        row, column = (int(i) for i in resumed.nonzero()[0])
        problems.append(f"row {row} holds token {int(tokens[row, column])} at position {column}, after it ended (-1)")
    return problems


def position_tables(a: np.ndarray, b: np.ndarray, vocab: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each position ``t``, the two arms' counts ``[prefixes, vocab + 1]`` of token ``t`` given the
    tokens before it (cell ``vocab``: the generation ended), over the prefixes either arm reached
    still running.  ``a`` and ``b`` are generations ``[N, L]`` with ``-1`` after an end."""
    a_codes, b_codes = _coded(a, vocab), _coded(b, vocab)
    base = vocab + 1
    tables = []
    for t in range(a.shape[1]):  # over positions, vectorised over generations
        prefix_a, prefix_b = _prefix_code(a_codes, t, base), _prefix_code(b_codes, t, base)
        running_a = (a_codes[:, :t] < vocab).all(axis=1)
        running_b = (b_codes[:, :t] < vocab).all(axis=1)
        groups, inverse = np.unique(np.concatenate([prefix_a[running_a], prefix_b[running_b]]), return_inverse=True)
        split = int(running_a.sum())
        cells = len(groups) * base
        count_a = np.bincount(inverse[:split] * base + a_codes[running_a, t], minlength=cells)
        count_b = np.bincount(inverse[split:] * base + b_codes[running_b, t], minlength=cells)
        tables.append((count_a.reshape(-1, base), count_b.reshape(-1, base)))
    return tables


def length_counts(tokens: np.ndarray) -> np.ndarray:
    """``[L + 1]``: how many generations emitted each number of tokens before they ended."""
    lengths = (np.asarray(tokens) >= 0).sum(axis=1)
    return np.bincount(lengths, minlength=tokens.shape[1] + 1)


def _coded(tokens: np.ndarray, vocab: int) -> np.ndarray:
    """Tokens with ``-1`` (ended) as the symbol ``vocab``."""
    tokens = np.asarray(tokens, dtype=np.int64)
    return np.where(tokens < 0, vocab, tokens)


def _prefix_code(codes: np.ndarray, t: int, base: int) -> np.ndarray:
    return codes[:, :t] @ (base ** np.arange(t - 1, -1, -1, dtype=np.int64)) if t else np.zeros(len(codes), np.int64)
