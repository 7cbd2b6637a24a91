"""Engines' history processors as presets: the formulas, the tokens counted and the order, per engine.

A loop that declares a warp preset (``warp="sglang"``) is judged by that engine's history processors
too; an undeclared loop, or one declaring a callable, by vLLM's
(:func:`~specverify._history.history_logits`).  Read from the research note's table (engines' code,
late 2026); what it is sure of, and what it is not:

* **vLLM** (V1): the masks, logit bias and the min-tokens mask, then repetition over prompt and
  generated tokens as a set (``z > 0`` divided by ``rho``, else multiplied), then ``-f * count -
  p * [count > 0]`` over the generated tokens.  Sure.
* **SGLang** (``penaltylib``): the additive terms first (``-f * count - p * [count > 0]`` and
  min-new-tokens' ``-inf`` on the stop tokens), then repetition on their result (``z < 0``
  multiplied by ``rho``, else divided), then logit bias, every count over the *generated* tokens
  only.  Sure of the order and the formulas (with repetition 2, presence 1 and a seen logit 1:
  vLLM gives ``1/2 - 1 = -0.5``, SGLang ``(1 - 1)/2 = 0``); the older ``penalizers/`` layout also
  counted the prompt for repetition, not modelled.  SGLang has no window and no bad words (a
  custom logits processor): not declared by its loops, the masks kept first where posed.
* **llama.cpp** (``llama-sampling.cpp``): logit bias first, then over the last ``penalty_last_n``
  tokens accepted into the sampler (default 64; ``penalty_window`` here): ``z <= 0`` multiplied by
  ``rho``, else divided, then ``-c * freq - presence`` for a count ``c > 0``.  Sure of the formula
  and the window; *not* sure whether the prompt's tokens are in the window (the server pushes the
  cached prompt into it in some versions): this preset counts them, the server's way.  llama.cpp
  has no min-tokens and no bad words (not declared by its loops); its grammar is applied first
  here (``grammar_first``; its default resamples after an invalid sample, not modelled).

The grammar's and the bad words' masks come first in every preset (a ``-inf`` mask commutes with
the penalties and the bias, which keep ``-inf`` at ``-inf``).
"""

from __future__ import annotations

import dataclasses

import torch

from .._warps.rules import SamplingParams
from .conventions import HistoryProcessors
from .masks import bad_words_mask, grammar_mask
from .processors import _counts, generated_length, history_logits, is_stop

__all__ = [
    "HISTORY_PRESETS",
    "HISTORY_SEPARATING",
    "PRESET_PARAMETERS",
    "HistoryCase",
    "history_differences",
    "history_preset",
]

#: llama.cpp's default ``penalty_last_n``.
LLAMA_CPP_WINDOW = 64


def _masked(z: torch.Tensor, history: torch.Tensor, prompt_length: int, params: SamplingParams) -> torch.Tensor:
    if params.grammar is not None:
        z = torch.where(grammar_mask(history, prompt_length, params.grammar).to(z.device), -torch.inf, z)
    if params.bad_words is not None:
        words = bad_words_mask(history, prompt_length, params.bad_words, z.shape[-1])
        z = torch.where(words.to(z.device), -torch.inf, z)
    return z


def sglang_history_logits(
    logits: torch.Tensor, history: torch.Tensor, prompt_length: int, params: SamplingParams
) -> torch.Tensor:
    """SGLang's processors (module docstring): additive terms, then repetition, then logit bias,
    every count over the generated tokens only."""
    z = _masked(logits.to(torch.float64), history, prompt_length, params)
    rows, vocab = z.shape
    _, generated = _counts(history, prompt_length, vocab, torch.zeros(rows, dtype=torch.int64))
    if params.frequency_penalty is not None:
        z = z - params.frequency_penalty.to(z.device).unsqueeze(-1) * generated
    if params.presence_penalty is not None:
        z = z - params.presence_penalty.to(z.device).unsqueeze(-1) * (generated > 0)
    if params.min_tokens is not None and params.stop_tokens is not None:
        short = generated_length(history, prompt_length).to(z.device) < params.min_tokens.to(z.device)
        token = torch.arange(vocab, device=z.device).expand(rows, -1)
        z = torch.where(short.unsqueeze(-1) & is_stop(token, params.stop_tokens), -torch.inf, z)
    if params.repetition_penalty is not None:
        r = params.repetition_penalty.to(z.device).unsqueeze(-1)
        z = torch.where(generated > 0, torch.where(z < 0, z * r, z / r), z)
    if params.logit_bias is not None:
        z = z + params.logit_bias.to(z.device)
    return z


def llama_cpp_history_logits(
    logits: torch.Tensor, history: torch.Tensor, prompt_length: int, params: SamplingParams
) -> torch.Tensor:
    """llama.cpp's processors (module docstring): vLLM's formula and order (bias, then repetition,
    then frequency and presence), every penalty over the last ``penalty_window`` tokens of the
    prompt and the generated ones (64 where the request sets none)."""
    own = params.penalty_window
    window = torch.full((logits.shape[0],), LLAMA_CPP_WINDOW, dtype=torch.int64)
    if own is not None:
        window = torch.where(own > 0, own, window.to(own.device))
    return history_logits(logits, history, prompt_length, dataclasses.replace(params, penalty_window=window))


#: Each engine preset's history processors (``(logits, history, prompt_length, params) -> logits``).
HISTORY_PRESETS: dict[str, HistoryProcessors] = {
    "vllm": history_logits,
    "sglang": sglang_history_logits,
    "llama.cpp": llama_cpp_history_logits,
}

_WARPS = ("temperature", "top_k", "top_p", "min_p", "seeds")
#: The parameters each preset's engine has (its loops declare these, and are posed only these).
PRESET_PARAMETERS: dict[str, tuple[str, ...]] = {
    "sglang": (
        *_WARPS,
        "repetition_penalty",
        "presence_penalty",
        "frequency_penalty",
        "min_tokens",
        "stop_tokens",
        "logit_bias",
        "grammar",
    ),
    "llama.cpp": (
        *_WARPS,
        "repetition_penalty",
        "presence_penalty",
        "frequency_penalty",
        "penalty_window",
        "stop_tokens",
        "logit_bias",
        "grammar",
    ),
}


def history_preset(name: str | None) -> HistoryProcessors:
    """The history processors a loop declaring warp preset ``name`` is judged by (vLLM's where
    the preset has none of its own, or nothing was declared)."""
    return HISTORY_PRESETS.get(name or "", history_logits)


@dataclasses.dataclass(frozen=True)
class HistoryCase:
    """One logits row after a history (``prompt`` then ``generated`` tokens) under one request's
    history parameters: where two engines' processors differ."""

    name: str
    logits: tuple[float, ...]
    prompt: tuple[int, ...]
    generated: tuple[int, ...]
    params: tuple[tuple[str, float], ...]

    def law(self, processors: HistoryProcessors) -> torch.Tensor:
        """``[V]``: the softmax of the row after ``processors`` (no warp: the processors' difference alone)."""
        history = torch.tensor([[*self.prompt, *self.generated]])
        params = SamplingParams(**{name: torch.tensor([value], dtype=torch.float64) for name, value in self.params})
        z = processors(torch.tensor([self.logits], dtype=torch.float64), history, len(self.prompt), params)
        return torch.softmax(z, dim=-1)[0]


#: Cases that separate every pair of presets (tests/test_history_conventions.py checks it); each
#: is posed by a ``loop.history`` group (the prompt holds tokens; repetition with presence).
HISTORY_SEPARATING: tuple[HistoryCase, ...] = (
    HistoryCase("repetition counts the prompt", (1.0, 0.5, -1.0), (1,), (2,), (("repetition_penalty", 2.0),)),
    HistoryCase("frequency counts the prompt", (1.0, 0.5, -1.0), (1,), (2,), (("frequency_penalty", 1.0),)),
    HistoryCase(
        "presence before or after repetition",
        (1.0, 0.5, -1.0),
        (),
        (0,),
        (("repetition_penalty", 2.0), ("presence_penalty", 1.0)),
    ),
)


def history_differences(
    processors: HistoryProcessors, *, tolerance: float = 1e-12
) -> dict[str, tuple[float, str | None]]:
    """``processors`` against every preset on :data:`HISTORY_SEPARATING`: the largest TV and the
    first case that separates them (``None``: the same law on every case)."""
    found = {}
    for name, preset in HISTORY_PRESETS.items():
        tvs = [0.5 * float((case.law(processors) - case.law(preset)).abs().sum()) for case in HISTORY_SEPARATING]
        first = next((case.name for case, tv in zip(HISTORY_SEPARATING, tvs, strict=True) if tv > tolerance), None)
        found[name] = (max(tvs), first)
    return found
