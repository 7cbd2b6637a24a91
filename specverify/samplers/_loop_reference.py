"""The reference speculative generation loop: draft, verify, bonus, bookkeeping, vectorised over rows.

Every iteration drafts ``k`` tokens per row from the draft model warped by the row's parameters,
scores the ``k + 1`` target positions, and runs the canonical step on the warped target.  Rows
advance by different amounts, so prefixes live in one right-padded buffer and are handed to the
models left-padded (:func:`specverify._loop.left_padded`).  Randomness: a seeded row draws the
draft's noise and the verifier's coins from disjoint parts of its own counter-based stream, so
they are independent and its output depends on its seed alone; unseeded rows use the generator.

Each stage is a method (:meth:`LoopReference.target_law`, :meth:`~LoopReference.draft_law`,
:meth:`~LoopReference.coins`), so a variant that gets one stage wrong is a few lines (the zoo's
loop members).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .._warps.declared import resolve_warp
from .._warps.presets import PRESETS
from .._loop import left_padded
from .._oracle import canonical_emit, inverse_cdf
from .._seeded import seeded_uniforms
from .._warps.rules import PARAMETERS, SamplingParams

__all__ = ["PRESET_LOOPS", "UNDECLARED_LOOPS", "LoopReference", "loop_reference"]

LanguageModel = Callable[[torch.Tensor], torch.Tensor]


class LoopReference:
    """Speculative generation with ``k`` drafts per step (default 3); honours every parameter.

    ``warp`` is the engine convention it warps by and declares (a preset's name or a callable
    ``(logits, params) -> probs``); ``None`` declares nothing and warps as transformers does.
    """

    name = "specverify.loop_reference"
    contract = "loop"
    parameters = PARAMETERS

    def __init__(self, k: int = 3, warp: object = None) -> None:
        self.k = k
        self.warp = warp
        self._law = resolve_warp(warp)

    def __call__(
        self,
        target: LanguageModel,
        draft: LanguageModel,
        prompt: torch.Tensor,
        num_tokens: int,
        params: SamplingParams,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        batch, prompt_length = prompt.shape
        k, device = self.k, prompt.device
        width = prompt_length + num_tokens + k + 1
        buffer = torch.full((batch, width), -1, dtype=torch.int64, device=device)
        buffer[:, :prompt_length] = prompt
        length = torch.full((batch,), prompt_length, dtype=torch.int64, device=device)
        rows = torch.arange(batch, device=device)
        iteration = 0
        while bool((length < prompt_length + num_tokens).any()):  # over steps, vectorised over rows
            active = rows[length < prompt_length + num_tokens]
            row_params = params.select(active)
            coins = self.coins(row_params, active.numel(), iteration, generator, device)
            base, base_length = buffer[active], length[active]
            # left-padded, every row ends at the last column: drafts are appended as columns
            history = left_padded(base, base_length)
            prefixes = torch.cat([history, history.new_empty((active.numel(), k))], dim=1)
            drafts = prefixes[:, history.shape[1] :]
            draft_probs, target_logits = [], []
            for i in range(k + 1):  # over draft positions
                prefix = prefixes[:, : history.shape[1] + i]
                target_logits.append(target(prefix))
                if i < k:
                    sampled_from, reported = self.draft_law(draft(prefix), row_params)
                    draft_probs.append(reported)
                    drafts[:, i] = inverse_cdf(sampled_from, coins[:, i])
            target_probs = self.target_law(torch.stack(target_logits, dim=1), row_params)
            tokens, accepted = canonical_emit(target_probs, torch.stack(draft_probs, dim=1), drafts, coins[:, k : 2 * k + 1])
            emitted = torch.arange(k + 1, device=device) <= accepted.unsqueeze(-1)
            columns = base_length.unsqueeze(-1) + torch.arange(k + 1, device=device)
            buffer[active] = base.scatter(1, columns, torch.where(emitted, tokens, base.gather(1, columns)))
            length[active] = base_length + accepted + 1
            iteration += 1
        return buffer[:, prompt_length : prompt_length + num_tokens]

    def target_law(self, logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
        """``[B, K+1, V]``: the law every position must follow, the warped target."""
        return self._law(logits, params)

    def draft_law(self, logits: torch.Tensor, params: SamplingParams) -> tuple[torch.Tensor, torch.Tensor]:
        """The law a draft is drawn from and the law reported to the verifier as ``q``: one law."""
        law = self._law(logits, params)
        return law, law

    def coins(
        self, params: SamplingParams, rows: int, iteration: int, generator: torch.Generator | None, device: torch.device
    ) -> torch.Tensor:
        """``[B, 2K+1]`` independent uniforms: ``K`` for the drafts, then ``K+1`` for the verifier."""
        count = 2 * self.k + 1
        if params.seeds is not None:
            return seeded_uniforms(params.seeds, count, offset=iteration * count)
        return torch.rand((rows, count), generator=generator, dtype=torch.float64, device=device)


loop_reference = LoopReference()


def _preset_loop(name: str, declared: bool) -> LoopReference:
    made = LoopReference(warp=name if declared else None)
    made._law = resolve_warp(name)
    made.name = f"specverify.loop_reference[{name}{'' if declared else ', undeclared'}]"
    return made


#: The reference loop warping as each engine preset does, declaring it (``loop_reference_vllm``) or
#: not (``loop_reference_vllm_undeclared``; transformers' undeclared is :data:`loop_reference`), each
#: importable by name so a worker runs it.
PRESET_LOOPS = {name: _preset_loop(name, True) for name in PRESETS}
UNDECLARED_LOOPS = {name: _preset_loop(name, False) for name in PRESETS if name != "transformers"}
loop_reference_transformers = PRESET_LOOPS["transformers"]
loop_reference_vllm = PRESET_LOOPS["vllm"]
loop_reference_sglang = PRESET_LOOPS["sglang"]
loop_reference_llama_cpp = PRESET_LOOPS["llama.cpp"]
loop_reference_vllm_undeclared = UNDECLARED_LOOPS["vllm"]
loop_reference_sglang_undeclared = UNDECLARED_LOOPS["sglang"]
loop_reference_llama_cpp_undeclared = UNDECLARED_LOOPS["llama.cpp"]
