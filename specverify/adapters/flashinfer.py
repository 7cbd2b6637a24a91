"""FlashInfer's fused chain speculative sampling kernel, on a GPU.

Spec ``specverify.adapters.flashinfer:sampler``: ``flashinfer.sampling.chain_speculative_sampling``,
claimed lossless.

FlashInfer's kernel calls the *draft* law ``p`` and the *target* law ``q`` (the reverse of the
papers and of this harness) and accepts a draft iff ``u * p_draft < q_target``.  Its Python
arguments are named ``draft_probs`` and ``target_probs``, so the adapter passes every argument by
keyword and the swap of letters cannot swap the laws.  Argument mapping:

* ``draft_probs [B, K, V]`` -> ``draft_probs`` float32; ``target_probs [B, K+1, V]`` ->
  ``target_probs`` float32 (same layout, bonus row last); ``draft_tokens`` -> ``draft_token_ids``
  int32;
* randomness: versions since early 2025 take ``generator=`` (in-kernel Philox seeded and offset
  from it), and the contract's generator is passed through; older versions take explicit
  ``uniform_samples [B, K+1]``, which the adapter draws in float32 from the contract's generator.
  FlashInfer's use of those uniforms differs from the canonical convention (the residual after a
  rejection at position ``j`` uses ``u[j + 1]``, not ``u[K]``), so the adapter does not offer
  injected uniforms;
* output ``(ids [B, K+1] int32, accepted, emitted)``: ids -> int64 with their ``-1`` padding;
  ``num_accepted`` is FlashInfer's emitted-draft count, which the harness audits against the ids.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..errors import AdapterUnavailable
from ._common import contract_output, cuda_device, float32_kernel_capabilities, import_library, parameter_names

__all__ = ["FlashInferSampler", "sampler"]

_INSTALL = "pip install flashinfer-python"


class FlashInferSampler:
    """``chain_speculative_sampling`` behind the sampler contract.

    Args:
        chain_speculative_sampling: the library function.
        device: where it runs (a CUDA device; tests pass ``cpu`` with a stand-in function).
        version: shown in the sampler's name.
    """

    def __init__(
        self, chain_speculative_sampling: Callable[..., Any], *, device: torch.device | str, version: str = "?"
    ) -> None:
        names = parameter_names(chain_speculative_sampling)
        if not {"draft_probs", "draft_token_ids", "target_probs"} <= set(names):
            raise AdapterUnavailable(f"FlashInfer {version}: chain_speculative_sampling takes {names}")
        if "generator" in names:
            self._randomness = "generator"
        elif "uniform_samples" in names:
            self._randomness = "uniform_samples"
        else:
            raise AdapterUnavailable(
                f"FlashInfer {version}: chain_speculative_sampling takes neither generator= "
                f"nor uniform_samples= ({names})"
            )
        self._chain_speculative_sampling = chain_speculative_sampling
        self.name = f"FlashInfer {version} chain_speculative_sampling"
        self.capabilities = float32_kernel_capabilities(device)

    @classmethod
    def load(cls, *, device: torch.device | str | None = None) -> FlashInferSampler:
        """Import FlashInfer's sampling module; ``device`` defaults to the current GPU (required)."""
        module = import_library("flashinfer.sampling", adapter="FlashInfer", install=_INSTALL)
        device = device if device is not None else cuda_device(adapter="FlashInfer")
        version = getattr(import_library("flashinfer", adapter="FlashInfer", install=_INSTALL), "__version__", "?")
        return cls(module.chain_speculative_sampling, device=device, version=version)

    def __call__(
        self,
        target_probs: torch.Tensor,
        draft_probs: torch.Tensor,
        draft_tokens: torch.Tensor,
        generator: torch.Generator | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        batch, k = draft_tokens.shape
        randomness: dict[str, Any]
        if self._randomness == "generator":
            randomness = {"generator": generator}
        else:
            uniforms = torch.rand((batch, k + 1), generator=generator, dtype=torch.float32, device=target_probs.device)
            randomness = {"uniform_samples": uniforms}
        output = self._chain_speculative_sampling(
            draft_probs=draft_probs.to(torch.float32).contiguous(),
            draft_token_ids=draft_tokens.to(torch.int32).contiguous(),
            target_probs=target_probs.to(torch.float32).contiguous(),
            deterministic=True,
            **randomness,
        )
        if isinstance(output, tuple):  # (ids, accepted_token_num, emitted_draft_token_num)
            return contract_output(output[0], output[2])
        return contract_output(output)


def sampler() -> FlashInferSampler:
    """FlashInfer on the current GPU; :class:`AdapterUnavailable` without FlashInfer or a GPU."""
    return FlashInferSampler.load()
