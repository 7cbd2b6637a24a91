"""The reference engine: the harness's own ``generate()`` on its own language models, speculation on or off.

Real engines are slow to start and need their libraries; the harness's own engine is a few
milliseconds a thousand rows, so the engine family (:mod:`specverify.checks._engine`) can be shown
to pass on a correct engine and to catch a wrong one in seconds.  Its target and draft are order-2
Markov chains over a few tokens (:class:`~specverify._loop.MarkovLM`, built from ``model_seed``);
with speculation on it generates with a speculative loop (by default the reference loop with three
drafts a step), off with the same loop and no drafts: plain autoregressive sampling from the
warped target.  Both honour every sampling parameter the loop does, history included, and a row
ends at a stop token (``-1`` after it).  The zoo's engines (:mod:`specverify.zoo._engines`) give it
a wrong loop, or get the engine around the loop wrong.
"""

from __future__ import annotations

from typing import Any

import torch

from .._loop import MarkovLM
from .._warps.rules import PARAMETERS, SamplingParams
from ._loop_reference import LoopReference

__all__ = ["EngineReference", "engine_reference"]


class EngineReference:
    """An engine (the ``engine`` contract) over ``vocab_size`` tokens, speculating with ``loop``."""

    contract = "engine"
    parameters = tuple(name for name in PARAMETERS if name != "seeds")
    max_batch = 16_384

    def __init__(self, loop: Any = None, *, vocab_size: int = 5, model_seed: int = 0, name: str | None = None) -> None:
        self.loop = loop if loop is not None else LoopReference(k=3)
        self.plain = LoopReference(k=0)  # the same loop with no drafts: speculation off
        self.vocab_size = vocab_size
        self.name = name or "specverify.engine_reference"
        models = torch.Generator().manual_seed(model_seed)
        table = (vocab_size**2, vocab_size)
        self.target = MarkovLM(1.5 * torch.randn(table, generator=models, dtype=torch.float64), context=(0, 1))
        self.draft = MarkovLM(self.target.logits + torch.randn(table, generator=models, dtype=torch.float64), (0, 1))

    def __call__(
        self, prompts: torch.Tensor, num_tokens: int, params: SamplingParams, seed: int, speculative: bool
    ) -> torch.Tensor:
        loop = self.loop if speculative else self.plain
        return loop(self.target, self.draft, prompts, num_tokens, params, torch.Generator().manual_seed(seed))


engine_reference = EngineReference()
