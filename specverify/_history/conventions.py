"""Engines' conventions for which tokens the history parameters count: the prompt or not.

The harness states the history law in one convention, vLLM's (:data:`~specverify._history.CONVENTION`,
:func:`~specverify._history.history_logits`): repetition over the prompt and the generated tokens as
a set, frequency and presence over the generated tokens only, bad words matched against the
generated tokens only.  Other engines count differently (the research note's table), and a loop
that declares a preset but counts as another engine does is not a speculation bug: its law is
that engine's exact law.  Each convention here is that law, ``(logits, history, prompt_length,
params) -> logits`` as :func:`~specverify._history.history_logits`, so a check that finds a loop's
counts off the declared law can ask whether they fit another convention exactly (a *convention
finding*, as for warps: never a verdict on speculation).  Only what the note is sure of:

* ``output-only``: every penalty counts the generated tokens only (SGLang's current penaltylib;
  vLLM counts the prompt for repetition);
* ``prompt-and-output``: every penalty counts the prompt too (TensorRT-LLM's ``seed_prompt`` with
  ``prompt_ignore_length`` 0; transformers' repetition penalty over ``input_ids``);
* ``bad-words-in-prompt``: bad words matched across the prompt's tail too (transformers'
  ``NoBadWordsLogitsProcessor`` reads ``input_ids``).

A group that sets ``penalty_window`` itself keeps it: the window is then the request's, not the
convention's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from .._warps.rules import SamplingParams
from .masks import bad_words_mask
from .processors import CONVENTION, history_logits

__all__ = ["HISTORY_CONVENTIONS", "HistoryConvention", "HistoryProcessors"]

#: ``(logits, history, prompt_length, params) -> logits``: a convention's history processors.
HistoryProcessors = Callable[[torch.Tensor, torch.Tensor, int, SamplingParams], torch.Tensor]

#: A window longer than any history: every prompt and generated token counted.
_EVERY_TOKEN = 1 << 30


@dataclasses.dataclass(frozen=True)
class HistoryConvention:
    """One engine's rule for the tokens the history parameters count, and its processors."""

    name: str
    text: str
    processors: HistoryProcessors


def _windowed(window: int) -> HistoryProcessors:
    """Every penalty over ``window`` (``0``: the generated tokens; huge: prompt and generated ones)
    where the request sets no window of its own."""

    def processors(logits: torch.Tensor, history: torch.Tensor, prompt_length: int, params: SamplingParams):
        own = params.penalty_window
        given = torch.full((logits.shape[0],), window, dtype=torch.int64)
        window_of = given if own is None else torch.where(own == -1, given.to(own.device), own)
        return history_logits(logits, history, prompt_length, dataclasses.replace(params, penalty_window=window_of))

    return processors


def _bad_words_in_prompt(
    logits: torch.Tensor, history: torch.Tensor, prompt_length: int, params: SamplingParams
) -> torch.Tensor:
    """vLLM's processors, the bad words matched against the prompt's tail too (a ``-inf`` mask
    commutes with the bias and the penalties that follow it)."""
    z = history_logits(logits, history, prompt_length, dataclasses.replace(params, bad_words=None))
    if params.bad_words is None:
        return z
    return torch.where(bad_words_mask(history, 0, params.bad_words, z.shape[-1]).to(z.device), -torch.inf, z)


#: The declared convention first, then the others a loop's law is compared with.
HISTORY_CONVENTIONS: dict[str, HistoryConvention] = {
    CONVENTION: HistoryConvention(
        CONVENTION,
        "vLLM's: repetition over prompt and generated tokens, frequency, presence and bad words over the "
        "generated ones",
        history_logits,
    ),
    "output-only": HistoryConvention(
        "output-only", "SGLang's penaltylib: every penalty counts the generated tokens only", _windowed(0)
    ),
    "prompt-and-output": HistoryConvention(
        "prompt-and-output", "TensorRT-LLM's: every penalty counts the prompt's tokens too", _windowed(_EVERY_TOKEN)
    ),
    "bad-words-in-prompt": HistoryConvention(
        "bad-words-in-prompt", "transformers': bad words matched across the prompt too", _bad_words_in_prompt
    ),
}
