"""The built-in adapters, and whether each can run on this machine.

Readiness is judged without importing any adapter's library (``importlib.util.find_spec`` and
``torch.cuda.is_available``), so ``specverify adapters`` is fast and safe on any machine; loading a
spec performs the full checks (signature, optional modes) and says what is wrong in one line.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util

import torch

__all__ = ["ADAPTERS", "Adapter", "Readiness", "print_adapters", "readiness"]


@dataclasses.dataclass(frozen=True)
class Adapter:
    """One built-in adapter spec.

    Attributes:
        spec: what to pass to ``specverify check``.
        library: the import name of the library it wraps.
        distribution: the name to install it under (for versions and install hints).
        wraps: the library function, and the mode it is called in.
        claim: what the library claims: ``lossless``, or ``lossy by design`` for a relaxed mode.
        needs_gpu: the library runs only on an NVIDIA GPU.
    """

    spec: str
    library: str
    distribution: str
    wraps: str
    claim: str
    needs_gpu: bool


ADAPTERS: tuple[Adapter, ...] = (
    Adapter(
        "specverify.adapters.transformers:sampler",
        "transformers",
        "transformers",
        "transformers.generation.utils._speculative_sampling",
        "lossless",
        needs_gpu=False,
    ),
    Adapter(
        "specverify.adapters.transformers:ensemble",
        "transformers",
        "transformers",
        "the same, assistant_ensemble_weight=0.5",
        "lossy by design",
        needs_gpu=False,
    ),
    Adapter(
        "specverify.adapters.vllm:sampler",
        "vllm",
        "vllm",
        "vllm.v1.sample.rejection_sampler.rejection_sample",
        "lossless",
        needs_gpu=True,
    ),
    Adapter(
        "specverify.adapters.vllm:synthetic",
        "vllm",
        "vllm",
        "the same, synthetic_mode with conditional rate 0.8",
        "lossy by design",
        needs_gpu=True,
    ),
    Adapter(
        "specverify.adapters.vllm:logits",
        "vllm",
        "vllm",
        "apply_sampling_constraints + rejection_sample (temperature, top_k, top_p per row)",
        "lossless",
        needs_gpu=True,
    ),
    Adapter(
        "specverify.adapters.flashinfer:sampler",
        "flashinfer",
        "flashinfer-python",
        "flashinfer.sampling.chain_speculative_sampling",
        "lossless",
        needs_gpu=True,
    ),
    Adapter(
        "specverify.adapters.sglang:sampler",
        "sgl_kernel",
        "sgl-kernel",
        "sgl_kernel.tree_speculative_sampling_target_only (one chain, thresholds 1)",
        "lossless",
        needs_gpu=True,
    ),
    Adapter(
        "specverify.adapters.sglang:relaxed",
        "sgl_kernel",
        "sgl-kernel",
        "the same, threshold_single=0.8, threshold_acc=0.5",
        "lossy by design",
        needs_gpu=True,
    ),
)


@dataclasses.dataclass(frozen=True)
class Readiness:
    """Whether an adapter can run here; ``reason`` says why not (or what it will run on)."""

    ready: bool
    reason: str
    version: str | None


def readiness(adapter: Adapter) -> Readiness:
    """Library installed? GPU present, if it needs one?  Imports nothing."""
    version = _version(adapter.distribution)
    if importlib.util.find_spec(adapter.library) is None:
        return Readiness(False, f"{adapter.library} is not installed (pip install {adapter.distribution})", None)
    if adapter.needs_gpu and not torch.cuda.is_available():
        return Readiness(False, "needs an NVIDIA GPU; torch.cuda.is_available() is False", version)
    where = f"GPU: {torch.cuda.get_device_name()}" if adapter.needs_gpu else "CPU or GPU"
    return Readiness(True, where, version)


def print_adapters() -> int:
    """``specverify adapters``: each built-in adapter, what it wraps, and whether it can run here."""
    states = [(adapter, readiness(adapter)) for adapter in ADAPTERS]
    ready = sum(state.ready for _, state in states)
    print(f"{len(ADAPTERS)} built-in adapters, {ready} can run here\n")
    for adapter, state in states:
        library = f"{adapter.library} {state.version}" if state.version else adapter.library
        print(f"{'yes' if state.ready else 'no':<4} {adapter.spec}  ({adapter.claim})")
        print(f"     wraps {adapter.wraps}")
        print(f"     {library}: {state.reason}" if state.ready else f"     {state.reason}")
    print("\nrun one with: specverify check SPEC --budget quick")
    return 0


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
