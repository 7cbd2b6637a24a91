"""vLLM V1's rejection sampler (``vllm/v1/sample/rejection_sampler.py``), on a GPU.

Specs:

* ``specverify.adapters.vllm:sampler``: ``rejection_sample`` for random (non-greedy) requests,
  claimed lossless;
* ``specverify.adapters.vllm:synthetic``: the same with ``synthetic_mode`` (every draft accepted
  with a fixed conditional rate, 0.8, whatever the laws: vLLM's benchmarking mode, lossy by design;
  only in versions that have it);
* ``specverify.adapters.vllm:logits``: the logits-level contract (``inputs="logits"``,
  ``params=("temperature", "top_k", "top_p")``): per-row temperature, top-k and top-p go into the
  sampling metadata, vLLM's own ``apply_sampling_constraints`` warps the verified positions' logits
  (as ``RejectionSampler.forward`` does) and ``rejection_sample`` verifies them, greedy rows
  (temperature 0) through its greedy kernel.  Versions after #32852 only (``target_logits``).
  It declares ``warp="vllm"`` (:mod:`specverify._warps.presets`): its laws are vLLM's own, which agree
  with transformers' for the parameters it takes.  Penalties, ``min_p`` and logit bias are outside
  ``rejection_sample``'s reach and not declared.

**vLLM's own bonus path is not run.**  vLLM draws the bonus token with its main ``Sampler``
(before verification, with per-request generators where a request is seeded), outside both
functions this adapter calls; the adapter draws it itself, with ``torch.multinomial`` and the
contract's generator, from the ``"vllm"`` preset's warp of the last position.  So the bonus
token's law is the harness's statement of vLLM's warp, not vLLM's code: a bug in vLLM's bonus
sampling (such as #42744, min-p applied to the bonus and not at verified positions) is out of this
adapter's reach, and a run of it says nothing about that path.

Argument mapping (the contract on the left, vLLM on the right):

* ``draft_tokens [B, K]`` -> ``draft_token_ids [B*K]`` int32, the ragged flattened layout with
  ``num_draft_tokens = [K] * B``, ``cu_num_draft_tokens`` int32 (cumulative counts) and
  ``max_spec_len = K``;
* ``draft_probs [B, K, V]`` -> ``draft_probs [B*K, V]`` float32;
* ``target_probs[:, :K]`` -> ``target_probs [B*K, V]`` float32 in versions before vLLM #32852,
  ``target_logits`` (``log p``, ``-inf`` for zeros) after it: the function's own parameter name
  tells which;
* ``target_probs[:, K]`` -> ``bonus_token_ids [B, 1]`` int32: vLLM draws the bonus token outside
  the rejection sampler with its ordinary sampler, so the adapter draws it from that row with
  ``torch.multinomial`` and the contract's generator;
* ``sampling_metadata``: temperature 1 for every row (all random, none greedy) and no per-request
  generators, so vLLM draws its uniforms and exponentials from the device's global generator, which
  the adapter seeds from the contract's generator and restores afterwards;
* output ``[B, K+1]`` int32 with ``-1`` placeholders -> int64; ``num_accepted`` = emitted - 1.

The ``sampling_metadata`` is a namespace with the attributes ``rejection_sample`` reads, not a full
``SamplingMetadata`` (whose constructor changes with every release).
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from typing import Any

import torch

from ..errors import AdapterUnavailable
from ._common import (
    contract_output,
    cuda_device,
    float32_kernel_capabilities,
    import_library,
    logits_from_probs,
    parameter_names,
    seed_from,
    seeded_global_rng,
)

__all__ = ["VLLMLogitsSampler", "VLLMSampler", "logits", "sampler", "synthetic"]

_MODULE = "vllm.v1.sample.rejection_sampler"
_INSTALL = "pip install vllm"
#: ``rejection_sample``'s leading parameters, before and after vLLM #32852.
_LAYOUTS = {
    "target_probs": [
        "draft_token_ids",
        "num_draft_tokens",
        "max_spec_len",
        "cu_num_draft_tokens",
        "draft_probs",
        "target_probs",
        "bonus_token_ids",
        "sampling_metadata",
    ]
}
_LAYOUTS["target_logits"] = [*_LAYOUTS["target_probs"][:5], "target_logits", *_LAYOUTS["target_probs"][6:]]


class VLLMSampler:
    """``rejection_sample`` behind the sampler contract.

    Args:
        rejection_sample: the library function.
        device: where it runs (a CUDA device; tests pass ``cpu`` with a stand-in function).
        max_spec_len: the library's ``MAX_SPEC_LEN``, the largest K it accepts.
        synthetic_rate: conditional acceptance rate of ``synthetic_mode``, or ``None`` (exact mode).
        version: shown in the sampler's name.
    """

    def __init__(
        self,
        rejection_sample: Callable[..., Any],
        *,
        device: torch.device | str,
        max_spec_len: int,
        synthetic_rate: float | None = None,
        version: str = "?",
    ) -> None:
        names = parameter_names(rejection_sample)
        layout = next((key for key, expected in _LAYOUTS.items() if names[:8] == expected), None)
        if layout is None:
            raise AdapterUnavailable(
                f"vLLM {version}: rejection_sample takes {names}, this adapter knows "
                f"{_LAYOUTS['target_probs']} or {_LAYOUTS['target_logits']}"
            )
        if synthetic_rate is not None and "synthetic_mode" not in names:
            raise AdapterUnavailable(f"vLLM {version}: rejection_sample has no synthetic_mode")
        self._rejection_sample = rejection_sample
        self._takes_logits = layout == "target_logits"
        self._synthetic_rate = synthetic_rate
        mode = "" if synthetic_rate is None else f" (synthetic_mode, rate {synthetic_rate:g})"
        self.name = f"vLLM {version} rejection_sample{mode}"
        self.capabilities = float32_kernel_capabilities(device, max_k=max_spec_len)

    @classmethod
    def load(cls, *, synthetic_rate: float | None = None, device: torch.device | str | None = None) -> VLLMSampler:
        """Import vLLM's rejection sampler; ``device`` defaults to the current GPU (required)."""
        module = import_library(_MODULE, adapter="vLLM", install=_INSTALL)
        device = device if device is not None else cuda_device(adapter="vLLM")
        version = getattr(import_library("vllm", adapter="vLLM", install=_INSTALL), "__version__", "?")
        return cls(
            module.rejection_sample,
            device=device,
            max_spec_len=int(getattr(module, "MAX_SPEC_LEN", 32)),
            synthetic_rate=synthetic_rate,
            version=version,
        )

    def __call__(
        self,
        target_probs: torch.Tensor,
        draft_probs: torch.Tensor,
        draft_tokens: torch.Tensor,
        generator: torch.Generator | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        batch, k = draft_tokens.shape
        vocab = target_probs.shape[-1]
        device = target_probs.device
        bonus = torch.multinomial(target_probs[:, k].to(torch.float32), 1, generator=generator).to(torch.int32)
        verified = target_probs[:, :k].reshape(batch * k, vocab)
        verified = logits_from_probs(verified) if self._takes_logits else verified.to(torch.float32)
        counts = torch.full((batch,), k, dtype=torch.int32, device=device)
        metadata = types.SimpleNamespace(
            all_greedy=False,
            all_random=True,
            temperature=torch.ones(batch, dtype=torch.float32, device=device),
            generators={},
            top_k=None,
            top_p=None,
        )
        extra: dict[str, Any] = {}
        if self._synthetic_rate is not None:
            extra = {
                "synthetic_mode": True,
                "synthetic_conditional_rates": torch.full(
                    (k,), self._synthetic_rate, dtype=torch.float32, device=device
                ),
            }
        with seeded_global_rng(device, seed_from(generator)):
            output = self._rejection_sample(
                draft_tokens.reshape(-1).to(torch.int32).contiguous(),
                [k] * batch,
                k,
                counts.cumsum(0, dtype=torch.int32),
                draft_probs.reshape(batch * k, vocab).to(torch.float32).contiguous(),
                verified.contiguous(),
                bonus.contiguous(),
                metadata,
                **extra,
            )
        return contract_output(output)


class VLLMLogitsSampler:
    """``apply_sampling_constraints`` then ``rejection_sample`` behind the logits-level contract.

    Args:
        rejection_sample: the library function (the ``target_logits`` layout).
        apply_sampling_constraints: the library's warp of the verified positions' logits.
        device: where it runs (a CUDA device; tests pass ``cpu`` with stand-in functions).
        max_spec_len: the library's ``MAX_SPEC_LEN``.
        version: shown in the sampler's name.
    """

    def __init__(
        self,
        rejection_sample: Callable[..., Any],
        apply_sampling_constraints: Callable[..., Any],
        *,
        device: torch.device | str,
        max_spec_len: int,
        version: str = "?",
    ) -> None:
        if parameter_names(rejection_sample)[:8] != _LAYOUTS["target_logits"]:
            raise AdapterUnavailable(
                f"vLLM {version}: rejection_sample takes probabilities (before #32852): no logits path"
            )
        self._rejection_sample = rejection_sample
        self._constrain = apply_sampling_constraints
        self.name = f"vLLM {version} apply_sampling_constraints + rejection_sample"
        self.warp = "vllm"  # its engine's own law is the oracle (specverify._warps.declared)
        base = float32_kernel_capabilities(device, max_k=max_spec_len)
        self.capabilities = dataclasses.replace(base, inputs="logits", params=("temperature", "top_k", "top_p"))

    @classmethod
    def load(cls, *, device: torch.device | str | None = None) -> VLLMLogitsSampler:
        """Import vLLM's rejection sampler module; ``device`` defaults to the current GPU."""
        module = import_library(_MODULE, adapter="vLLM", install=_INSTALL)
        version = getattr(import_library("vllm", adapter="vLLM", install=_INSTALL), "__version__", "?")
        if not hasattr(module, "apply_sampling_constraints"):
            raise AdapterUnavailable(f"vLLM {version}: {_MODULE} has no apply_sampling_constraints")
        device = device if device is not None else cuda_device(adapter="vLLM")
        return cls(
            module.rejection_sample,
            module.apply_sampling_constraints,
            device=device,
            max_spec_len=int(getattr(module, "MAX_SPEC_LEN", 32)),
            version=version,
        )

    def __call__(
        self,
        target_logits: torch.Tensor,
        draft_probs: torch.Tensor,
        draft_tokens: torch.Tensor,
        generator: torch.Generator | None,
        params: Any,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        from .._warps.presets import PRESETS

        batch, k = draft_tokens.shape
        vocab = target_logits.shape[-1]
        device = target_logits.device
        temperature = params.temperature if params.temperature is not None else torch.ones(batch, dtype=torch.float64)
        greedy = temperature == 0
        metadata = types.SimpleNamespace(
            all_greedy=bool(greedy.all()),
            all_random=not bool(greedy.any()),
            temperature=temperature.to(device=device, dtype=torch.float32),
            generators={},
            # vLLM's "off": top_k = vocabulary size, top_p = 1 (the contract's: top_k = 0)
            top_k=None
            if params.top_k is None
            else torch.where((params.top_k == 0) | (params.top_k > vocab), vocab, params.top_k).to(
                device=device, dtype=torch.int32
            ),
            top_p=None if params.top_p is None else params.top_p.to(device=device, dtype=torch.float32),
        )
        counts = torch.full((batch,), k, dtype=torch.int32, device=device)
        cumulative = counts.cumsum(0, dtype=torch.int32)
        verified = self._constrain(
            target_logits[:, :k].reshape(batch * k, vocab).to(torch.float32).contiguous(), cumulative, metadata
        )
        bonus_law = PRESETS["vllm"](
            target_logits[:, k], params.only(("temperature", "top_k", "top_p"))
        )  # not vLLM's own bonus path
        bonus = torch.multinomial(bonus_law.to(torch.float32), 1, generator=generator).to(torch.int32)
        with seeded_global_rng(device, seed_from(generator)):
            output = self._rejection_sample(
                draft_tokens.reshape(-1).to(torch.int32).contiguous(),
                [k] * batch,
                k,
                cumulative,
                draft_probs.reshape(batch * k, vocab).to(torch.float32).contiguous(),
                verified.contiguous(),
                bonus.contiguous(),
                metadata,
            )
        return contract_output(output)


def logits() -> VLLMLogitsSampler:
    """vLLM's logits path (temperature, top-k, top-p) on the current GPU."""
    return VLLMLogitsSampler.load()


def sampler() -> VLLMSampler:
    """vLLM's exact mode on the current GPU; :class:`AdapterUnavailable` without vLLM or a GPU."""
    return VLLMSampler.load()


def synthetic() -> VLLMSampler:
    """vLLM's synthetic acceptance mode (rate 0.8): lossy by design, so its loss is measured."""
    return VLLMSampler.load(synthetic_rate=0.8)
