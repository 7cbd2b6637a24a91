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

from .._history import is_stop
from .._history.presets import PRESET_PARAMETERS, history_preset
from .._laws.oracle import accepts, emitting_law, inverse_cdf
from .._loop import left_padded
from .._warps.declared import resolve_warp
from .._warps.presets import PRESETS
from .._warps.rules import HISTORY_PARAMETERS, PARAMETERS, SamplingParams
from ._uniforms import seeded_uniforms

__all__ = ["PRESET_LOOPS", "UNDECLARED_LOOPS", "LoopReference", "loop_reference"]

LanguageModel = Callable[[torch.Tensor], torch.Tensor]


class LoopReference:
    """Speculative generation with ``k`` drafts per step (default 3); honours every parameter.

    ``warp`` is the engine convention it warps by and declares (a preset's name or a callable
    ``(logits, params) -> probs``); ``None`` declares nothing and warps as transformers does.  A
    preset with history processors of its own (:mod:`specverify._history.presets`) is honoured
    there too, and the loop declares that engine's parameters only.
    """

    name = "specverify.loop_reference"
    contract = "loop"
    parameters = PARAMETERS

    def __init__(self, k: int = 3, warp: object = None) -> None:
        self.k = k
        self.warp = warp
        self._law = resolve_warp(warp)
        self._history = history_preset(warp if isinstance(warp, str) else None)
        if isinstance(warp, str) and warp in PRESET_PARAMETERS:
            self.parameters = PRESET_PARAMETERS[warp]

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
        # the tokens the history parameters count (the state): the emitted ones, where the loop is right
        remembers = any(getattr(params, name) is not None for name in HISTORY_PARAMETERS)
        # room for every step's record (at most 2k + 1 tokens: drafts and emitted ones); none where nothing remembers
        state_width = prompt_length + (num_tokens + 1) * (2 * k + 2) if remembers else prompt_length
        state = torch.full((batch, state_width), -1, dtype=torch.int64, device=device)
        state[:, :prompt_length] = prompt
        state_length = length.clone()
        end, iteration = prompt_length + num_tokens, 0
        while bool((length < end).any()):  # over steps, vectorised over rows
            active = (length < end).nonzero().squeeze(-1)
            everyone = active.numel() == batch  # then the whole buffer, with no copy of it
            row_params = params if everyone else params.select(active)
            row_length = length if everyone else length[active]
            coins = self.coins(row_params, active.numel(), iteration, generator, device)
            # left-padded, every row ends at the last column: drafts are appended as columns
            history = left_padded(buffer if everyone else buffer[active], row_length)
            seen = left_padded(state[active], state_length[active]) if remembers else None
            tokens, accepted, drafts = self.step(target, draft, history, row_params, coins, seen, prompt_length)
            if row_params.stop_tokens is not None:  # a stop token ends its row: -1 after it
                stop = is_stop(tokens, row_params.stop_tokens)
                after = (torch.cumsum(stop.to(torch.int64), dim=1) - stop.to(torch.int64)) > 0
                tokens = torch.where(after, -1, tokens)
            # past its length a row is -1, as tokens are past the emitted ones: write the k + 1 columns
            columns = row_length.unsqueeze(-1) + torch.arange(k + 1, device=device)
            buffer[active.unsqueeze(-1), columns] = tokens
            length[active] = row_length + accepted + 1
            if row_params.stop_tokens is not None:
                length[active[stop.any(-1)]] = end
            if remembers:
                recorded = _packed(self.record(tokens, accepted, drafts))
                at = state_length[active].unsqueeze(-1) + torch.arange(recorded.shape[1], device=device)
                state[active.unsqueeze(-1), at] = recorded
                state_length[active] += (recorded >= 0).sum(-1)
            iteration += 1
        return buffer[:, prompt_length : prompt_length + num_tokens]

    def step(
        self,
        target: LanguageModel,
        draft: LanguageModel,
        history: torch.Tensor,
        params: SamplingParams,
        coins: torch.Tensor,
        seen: torch.Tensor | None = None,
        prompt_length: int = 0,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One speculative step of every row of ``history [B, L]`` (left-padded): ``[B, K+1]``
        tokens (the accepted drafts, then the corrected or bonus token, ``-1`` after), the number
        of drafts accepted, and the drafts ``[B, K]`` (``-1`` past the first rejected one).

        Drafting and verification go position by position: a row leaves at its first rejection,
        so the models and the warps see only the rows still verifying.  Its law, and its tokens
        for the same coins, are those of drafting all ``k`` before verifying
        (:func:`~specverify._laws.oracle.canonical_emit`): the drafts after a rejection never reach the
        output.  Coins: ``[:, i]`` draws draft ``i``, ``[:, k + i]`` accepts it, ``[:, 2k]`` draws
        the last token; the arithmetic is the oracle's (its module docstring).  ``seen [B, S]``
        (left-padded, ``prompt_length`` prompt tokens first) is the state the history parameters
        count, ``None`` where none is given: row ``i`` sees it and drafts ``1..i-1``
        (:meth:`row_state`), through :meth:`processed`.
        """
        k, device = self.k, history.device
        batch, width = history.shape
        prefixes = torch.cat([history, history.new_empty((batch, k))], dim=1)
        tokens = torch.full((batch, k + 1), -1, dtype=torch.int64, device=device)
        drafts = torch.full((batch, k), -1, dtype=torch.int64, device=device)
        accepted = torch.full((batch,), k, dtype=torch.int64, device=device)
        rows = torch.arange(
            batch, device=device
        )  # the rows still verifying: prefixes, params and coins hold only theirs
        for i in range(k + 1):  # over draft positions, vectorised over the rows still verifying
            prefix = prefixes[:, : width + i]
            state = None if seen is None else self.row_state(seen, prefixes[:, width : width + i], i)
            p = self.target_law(self.processed(target(prefix), state, prompt_length, params, i), params, i)
            p_sum = p.sum(dim=-1, dtype=torch.float64)
            if i == k:  # every draft accepted: the bonus token, from p (the residual against no draft)
                tokens[rows, k] = inverse_cdf(emitting_law(p, p_sum), coins[:, 2 * k])
                break
            draft_logits = draft(prefix)
            if state is not None:
                draft_logits = self.draft_processed(draft_logits, state, prompt_length, params, i)
            sampled_from, q = self.draft_law(draft_logits, params)
            drafted = inverse_cdf(sampled_from, coins[:, i])
            drafts[rows, i] = drafted
            q_sum = q.sum(dim=-1, dtype=torch.float64)
            keep = accepts(coins[:, k + i], drafted, p, p_sum, q, q_sum)
            cut = None if state is None else self.cut(drafted, state, prompt_length, params)
            if cut is not None:  # a cut draft is not verified: its row is drawn from p, and the step ends
                keep = keep & ~cut
            out = (~keep).nonzero().squeeze(-1)
            emitted = drafted.clone()
            if out.numel():  # these rows emit a token from the residual [p - q]_+ and stop
                last = emitting_law(p[out], p_sum[out], q[out], q_sum[out], None if cut is None else ~cut[out])
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
                seen = None if seen is None else seen[kept]
            prefixes[:, width + i] = drafted
        return tokens, accepted, drafts

    # --- the history parameters' state: what a variant gets wrong ----------------------------

    def processed(
        self,
        logits: torch.Tensor,
        state: torch.Tensor | None,
        prompt_length: int,
        params: SamplingParams,
        position: int,
    ) -> torch.Tensor:
        """The target's logits at draft ``position`` after the history processors of ``state``
        (:func:`~specverify._history.history_logits`, or the declared preset's); ``None``: no
        history parameter given."""
        return logits if state is None else self._history(logits, state, prompt_length, params)

    def draft_processed(
        self, logits: torch.Tensor, state: torch.Tensor, prompt_length: int, params: SamplingParams, position: int
    ) -> torch.Tensor:
        """The drafter's logits at draft ``position`` after the same history processors as the target's
        (a drafter that ignores some draws from another ``q``: still exact, the verifier corrects it)."""
        return self._history(logits, state, prompt_length, params)

    def cut(
        self, drafted: torch.Tensor, state: torch.Tensor, prompt_length: int, params: SamplingParams
    ) -> torch.Tensor | None:
        """``[B]`` bool: the rows whose draft is cut before verification (their row drawn from ``p``
        as a bonus, the step ending there); ``None``: no draft is cut, every one is verified."""
        return None

    def row_state(self, seen: torch.Tensor, drafts: torch.Tensor, position: int) -> torch.Tensor:
        """The state draft row ``position`` is processed with: the committed state and the drafts before it."""
        return torch.cat([seen, drafts], dim=1)

    def record(self, tokens: torch.Tensor, accepted: torch.Tensor, drafts: torch.Tensor) -> torch.Tensor:
        """What a step adds to the state: the tokens it emitted (``-1`` after them); at most ``2k + 1`` a step."""
        return tokens

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


def _packed(tokens: torch.Tensor) -> torch.Tensor:
    """Each row's tokens (``>= 0``) moved to its front, in order, ``-1`` after them."""
    order = torch.sort((tokens < 0).to(torch.int8), dim=1, stable=True).indices
    return tokens.gather(1, order)


loop_reference = LoopReference()


def _preset_loop(name: str, declared: bool) -> LoopReference:
    made = LoopReference(warp=name if declared else None)
    made._law = resolve_warp(name)  # undeclared: this warp, vLLM's history processors (the default's)
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
