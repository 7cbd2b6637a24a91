"""The reference speculative generation loop: draft, verify, bonus, bookkeeping, vectorised over rows.

Every iteration is one speculative step per row (:meth:`LoopReference.step`): up to ``k`` drafts
from the draft model warped by the row's parameters, each verified against the warped target as it
is drafted, the corrected token at the first rejection or the bonus after ``k`` accepts.  A row
stops drafting at its first rejection (the canonical step would discard the later drafts), so the
models and warps run on the rows still verifying.  Rows advance by different amounts, so prefixes
live in one right-padded buffer and are handed to the models left-padded
(:func:`specverify._loop.left_padded`).  Randomness: a seeded row draws the
draft's noise and the verifier's coins from disjoint parts of its own counter-based stream, so
they are independent and its output depends on its seed alone; unseeded rows use the generator.

Each stage is a method (:meth:`LoopReference.target_law`, :meth:`~LoopReference.draft_law`,
:meth:`~LoopReference.coins`), so a variant that gets one stage wrong is a few lines (the zoo's
loop members).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .._loop import left_padded
from .._oracle import accepts, emitting_law, inverse_cdf
from .._seeded import seeded_uniforms
from .._warps.declared import resolve_warp
from .._warps.presets import PRESETS
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
        end, iteration = prompt_length + num_tokens, 0
        while bool((length < end).any()):  # over steps, vectorised over rows
            active = (length < end).nonzero().squeeze(-1)
            everyone = active.numel() == batch  # then the whole buffer, with no copy of it
            row_params = params if everyone else params.select(active)
            row_length = length if everyone else length[active]
            coins = self.coins(row_params, active.numel(), iteration, generator, device)
            # left-padded, every row ends at the last column: drafts are appended as columns
            history = left_padded(buffer if everyone else buffer[active], row_length)
            tokens, accepted = self.step(target, draft, history, row_params, coins)
            # past its length a row is -1, as tokens are past the emitted ones: write the k + 1 columns
            columns = row_length.unsqueeze(-1) + torch.arange(k + 1, device=device)
            buffer[active.unsqueeze(-1), columns] = tokens
            length[active] = row_length + accepted + 1
            iteration += 1
        return buffer[:, prompt_length : prompt_length + num_tokens]

    def step(
        self,
        target: LanguageModel,
        draft: LanguageModel,
        history: torch.Tensor,
        params: SamplingParams,
        coins: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One speculative step of every row of ``history [B, L]`` (left-padded): ``[B, K+1]``
        tokens (the accepted drafts, then the corrected or bonus token, ``-1`` after) and the
        number of drafts accepted.

        Drafting and verification go position by position: a row leaves at its first rejection,
        so the models and the warps see only the rows still verifying.  Its law, and its tokens
        for the same coins, are those of drafting all ``k`` before verifying
        (:func:`~specverify._oracle.canonical_emit`): the drafts after a rejection never reach the
        output.  Coins: ``[:, i]`` draws draft ``i``, ``[:, k + i]`` accepts it, ``[:, 2k]`` draws
        the last token; the arithmetic is the oracle's (its module docstring).
        """
        k, device = self.k, history.device
        batch, width = history.shape
        prefixes = torch.cat([history, history.new_empty((batch, k))], dim=1)
        tokens = torch.full((batch, k + 1), -1, dtype=torch.int64, device=device)
        accepted = torch.full((batch,), k, dtype=torch.int64, device=device)
        rows = torch.arange(
            batch, device=device
        )  # the rows still verifying: prefixes, params and coins hold only theirs
        for i in range(k + 1):  # over draft positions, vectorised over the rows still verifying
            prefix = prefixes[:, : width + i]
            p = self.target_law(target(prefix), params, i)
            p_sum = p.sum(dim=-1, dtype=torch.float64)
            if i == k:  # every draft accepted: the bonus token, from p (the residual against no draft)
                tokens[rows, k] = inverse_cdf(emitting_law(p, p_sum), coins[:, 2 * k])
                break
            sampled_from, q = self.draft_law(draft(prefix), params)
            drafted = inverse_cdf(sampled_from, coins[:, i])
            q_sum = q.sum(dim=-1, dtype=torch.float64)
            keep = accepts(coins[:, k + i], drafted, p, p_sum, q, q_sum)
            out = (~keep).nonzero().squeeze(-1)
            emitted = drafted.clone()
            if out.numel():  # these rows emit a token from the residual [p - q]_+ and stop
                last = emitting_law(p[out], p_sum[out], q[out], q_sum[out])
                emitted[out] = inverse_cdf(last, coins[out, 2 * k])
                accepted[rows[out]] = i
            tokens[rows, i] = emitted
            if out.numel() == rows.numel():
                break
            if out.numel():
                kept = keep.nonzero().squeeze(-1)
                rows, prefixes, coins, params, drafted = (
                    rows[kept],
                    prefixes[kept],
                    coins[kept],
                    params.select(kept),
                    drafted[kept],
                )
            prefixes[:, width + i] = drafted
        return tokens, accepted

    def target_law(self, logits: torch.Tensor, params: SamplingParams, position: int) -> torch.Tensor:
        """``[B, V]``: the law the token at draft ``position`` must follow (``k``: the bonus), the warped target."""
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
