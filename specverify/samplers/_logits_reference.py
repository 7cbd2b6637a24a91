"""The reference logits-level sampler: warp the target as each row asks, then the canonical step.

``sampler(target_logits [B, K+1, V], draft_probs [B, K, V], draft_tokens [B, K], generator, params)``:
``draft_probs`` is the law the drafts were actually drawn from; ``params`` holds each row's
temperature, top-k, top-p, min-p and, when given, its own seed.  The law every position must follow
is the declared warp of the target's logits (:mod:`specverify._warps.presets`; transformers' by
default), so this sampler is that warp followed by the reference's canonical step, in float64, with
no Python loop over rows.  A seeded row draws its uniforms from its own counter-based stream, so its
output depends on its seed alone.
"""

from __future__ import annotations

import torch

from .._contract import Capabilities
from .._laws.oracle import canonical_emit
from .._warps.declared import resolve_warp
from .._warps.presets import PRESETS
from .._warps.rules import SamplingParams
from ._uniforms import seeded_uniforms

__all__ = ["PRESET_REFERENCES", "UNDECLARED_REFERENCES", "LogitsReferenceSampler", "logits_reference"]


class LogitsReferenceSampler:
    """A warp, then the canonical step; per-row seeds honoured.

    ``warp`` is the engine convention it warps by and declares (a preset's name or a callable
    ``(logits, params) -> probs``); ``None`` declares nothing and warps as transformers does.
    """

    name = "specverify.logits_reference"
    capabilities = Capabilities(
        dtypes=(torch.float64, torch.float32, torch.bfloat16, torch.float16),
        uniforms=True,
        inputs="logits",
        params=("temperature", "top_k", "top_p", "min_p", "seeds"),
    )

    def __init__(self, warp: object = None) -> None:
        self.warp = warp
        self._law = resolve_warp(warp)

    def __call__(
        self,
        target_logits: torch.Tensor,
        draft_probs: torch.Tensor,
        draft_tokens: torch.Tensor,
        generator: torch.Generator | None,
        params: SamplingParams,
        *,
        uniforms: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        batch, k = draft_tokens.shape
        target = self._law(target_logits, params)
        if params.seeds is not None:
            uniforms = seeded_uniforms(params.seeds, k + 1)
        elif uniforms is None:
            uniforms = torch.rand((batch, k + 1), generator=generator, dtype=torch.float64, device=target.device)
        return canonical_emit(target, draft_probs, draft_tokens, uniforms.to(torch.float64))


logits_reference = LogitsReferenceSampler()


def _declared(name: str) -> LogitsReferenceSampler:
    made = LogitsReferenceSampler(warp=name)
    made.name = f"specverify.logits_reference[{name}]"
    return made


def _undeclared(name: str) -> LogitsReferenceSampler:
    """Warps as preset ``name`` and declares nothing: an engine's correct sampler as a user who never
    heard of ``warp=`` hands it over (judged by transformers' law, its own convention no fault)."""
    made = LogitsReferenceSampler()
    made._law = resolve_warp(name)
    made.name = f"specverify.logits_reference[{name}, undeclared]"
    return made


#: The reference warping as each engine preset does, and declaring it (importable by name, so a
#: worker runs it: ``specverify.samplers._logits_reference:logits_reference_llama_cpp``).
PRESET_REFERENCES = {name: _declared(name) for name in PRESETS}
#: The same, declaring nothing (``..._undeclared``; transformers' is :data:`logits_reference` itself).
UNDECLARED_REFERENCES = {name: _undeclared(name) for name in PRESETS if name != "transformers"}
logits_reference_transformers = PRESET_REFERENCES["transformers"]
logits_reference_vllm = PRESET_REFERENCES["vllm"]
logits_reference_sglang = PRESET_REFERENCES["sglang"]
logits_reference_llama_cpp = PRESET_REFERENCES["llama.cpp"]
logits_reference_vllm_undeclared = UNDECLARED_REFERENCES["vllm"]
logits_reference_sglang_undeclared = UNDECLARED_REFERENCES["sglang"]
logits_reference_llama_cpp_undeclared = UNDECLARED_REFERENCES["llama.cpp"]
