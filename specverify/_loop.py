"""Whole speculative generation loops: the contract, the harness's language models, the exact law.

A generation loop is the system under test end to end: drafting, verification, the bonus token and
the prefix bookkeeping between steps::

    tokens = loop(target, draft, prompt, num_tokens, params, generator)   # [B, num_tokens] int64

``target`` and ``draft`` are language models: callables ``prefix [B, L] int64 -> logits [B, V]``,
where every row of ``prefix`` is a prompt followed by the tokens so far, *left-padded* with ``-1``
so that rows of different lengths share one tensor (the last column is every row's last token).
``params`` are the rows' :class:`~specverify._warps.rules.SamplingParams` (their ``seeds`` the per-request
seeds, for loops that declare them).  Whatever the loop does inside, the law of its output must be
the target's *warped autoregressive law*: token ``t`` follows ``warp(target(prompt + tokens[:t]))``.
That is where drafter/verifier randomness coupling, warps applied to one side only and prefix
bookkeeping bugs show, and it is computed here exactly (:func:`generation_law`).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import torch

from ._warps.rules import DEFAULT_ORDER, PARAMETERS, SamplingParams, warp

__all__ = ["MarkovLM", "generation_law", "left_padded", "loop"]


def loop(
    fn: Any = None, *, name: str | None = None, parameters: tuple[str, ...] = ("temperature",), warp: Any = None
) -> Any:
    """Declare a callable a generation loop (see the module docstring), in one line.

    ``parameters`` names the sampling parameters it honours (``"seeds"`` for per-request seeds); the
    harness gives it only those, and skips, with the reason, the checks that need others.  ``warp``
    is the engine's own warp, a preset's name or a callable ``(logits, params) -> probabilities``:
    the law its generations must follow (:mod:`specverify._warps.declared`; default transformers').
    """
    unknown = set(parameters) - set(PARAMETERS)
    if unknown:
        raise ValueError(f"unknown sampling parameters {sorted(unknown)}; known: {PARAMETERS}")
    if warp is not None:
        from ._warps.declared import resolve_warp

        resolve_warp(warp)  # an unknown preset fails where it is declared

    def declare(f: Any) -> Any:
        f.contract = "loop"
        f.parameters = tuple(parameters)
        if warp is not None:
            f.warp = warp
        if name is not None:
            f.name = name
        return f

    return declare(fn) if fn is not None else declare


def left_padded(rows: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``[B, max(lengths)]``: the first ``lengths[b]`` tokens of each row of ``rows``, moved to the
    right end, ``-1`` before them (vectorised, no loop over rows)."""
    width = int(lengths.max()) if lengths.numel() else 0
    column = torch.arange(width, device=rows.device)
    source = column - (width - lengths.unsqueeze(-1))  # where column j of row b comes from
    taken = rows.gather(1, source.clamp_min(0).clamp_max(max(rows.shape[1] - 1, 0)))
    return torch.where(source >= 0, taken, -1)


@dataclasses.dataclass(frozen=True, eq=False)
class MarkovLM:
    """An order-``m`` Markov chain given by its logits: the harness's language model.

    ``logits [V**m, V]`` (row: base-V code of the last ``m`` tokens, oldest first); where a prefix
    is shorter than ``m`` it is completed on the left by ``context``.  ``-inf`` logits are tokens of
    probability 0.  Calls are counted, so a test can see how a loop uses its models.
    """

    logits: torch.Tensor
    context: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        rows, vocab = self.logits.shape
        if vocab**self.order != rows:
            raise ValueError(f"a [{rows}, {vocab}] table is not an order-m chain over {vocab} tokens")
        if len(self.context) < self.order:
            raise ValueError(f"an order-{self.order} chain needs at least {self.order} context tokens")
        object.__setattr__(self, "calls", [0])
        object.__setattr__(self, "on_call", None)  # the worker's heartbeat, when the loop runs in one

    @property
    def order(self) -> int:
        rows, vocab = self.logits.shape
        return next(m for m in itertools.count() if vocab**m >= rows)

    @property
    def vocab_size(self) -> int:
        return int(self.logits.shape[-1])

    def __call__(self, prefix: torch.Tensor) -> torch.Tensor:
        self.calls[0] += 1  # type: ignore[attr-defined]
        if self.on_call is not None:  # type: ignore[attr-defined]
            self.on_call()  # type: ignore[attr-defined]
        m, vocab = self.order, self.vocab_size
        code = torch.zeros(prefix.shape[0], dtype=torch.int64, device=prefix.device)
        if m:
            last = prefix[:, -m:] if prefix.shape[1] >= m else prefix
            if last.shape[1] < m or not bool((last >= 0).all()):  # a row shorter than m: the context completes it
                context = torch.tensor(self.context[-m:], dtype=torch.int64, device=prefix.device)
                last = _last_tokens(torch.cat([context.expand(prefix.shape[0], -1), prefix], dim=1), m)
            for column in range(m):  # over the order, vectorised over rows
                code = code * vocab + last[:, column]
        return self.logits.to(prefix.device)[code]


def _last_tokens(history: torch.Tensor, m: int) -> torch.Tensor:
    """The last ``m`` non-padding tokens of each left-padded row (padding sits before the context
    in ``cat([context, prefix])`` only when the prefix is padded, so drop the ``-1`` entries)."""
    if bool((history[:, -m:] >= 0).all()):  # no padding among the last m: the common case
        return history[:, -m:]
    valid = history >= 0
    # stable sort moves padding to the front, keeping the order of real tokens
    order = torch.sort(valid.to(torch.int8), dim=1, stable=True).indices
    packed = history.gather(1, order)
    return packed[:, -m:]


def generation_law(
    target: MarkovLM,
    prompt: torch.Tensor,
    num_tokens: int,
    params: SamplingParams,
    order: tuple[str, ...] = DEFAULT_ORDER,
    law: Any = None,
) -> torch.Tensor:
    """``[V**num_tokens]`` exact law of one row's generated tokens (base-V index, first token most
    significant): the target's warped autoregressive law after ``prompt [L]`` under the row's
    ``params`` (one row).  ``law`` is the warp to use, ``(logits, params) -> probs`` (a declared
    warp), else :func:`~specverify._warps.rules.warp` in ``order``.  Enumerates every sequence: small
    ``V**num_tokens`` only."""
    vocab = target.vocab_size
    sequences = torch.cartesian_prod(*[torch.arange(vocab)] * num_tokens).reshape(-1, num_tokens)
    count = sequences.shape[0]
    rows = params.select(torch.zeros(count, dtype=torch.int64))
    joint = torch.ones(count, dtype=torch.float64)
    for t in range(num_tokens):  # over positions, vectorised over sequences
        prefix = torch.cat([prompt.expand(count, -1), sequences[:, :t]], dim=1)
        probs = warp(target(prefix), rows, order) if law is None else law(target(prefix), rows)
        joint = joint * probs.gather(-1, sequences[:, t : t + 1]).squeeze(-1)
    return joint
