"""The Triton sampler: the canonical step as one GPU kernel, verified like any third-party sampler.

On a machine with a CUDA device it compiles for the GPU and takes CUDA tensors; without one it runs
through Triton's interpreter on CPU tensors (``TRITON_INTERPRET=1`` is set before Triton is imported,
see :mod:`._triton_kernels`).  The kernel's design (passes over memory, arithmetic, randomness) is
described there and in ``docs/triton.md``.

Randomness:

* ``uniforms=`` given: the canonical injected-uniform convention of :mod:`specverify._contract`,
  token for token the oracle's :func:`~specverify._laws.oracle.canonical_emit` but for
  float ties (a uniform within about ``1e-12``, relative, of a boundary of the canonical partition);
* otherwise: in-kernel Philox keyed by one 64-bit seed drawn from the ``generator`` (so the
  generator advances, consecutive calls differ and alike-seeded generators agree); the acceptance
  tests use one uniform each, the emitted token a one-pass reservoir draw that is exact in law.
"""

from __future__ import annotations

import os

import torch

from .._contract import Capabilities
from ._triton_kernels import CONSISTENT, INTERPRETED, launch_config, verify_kernel

#: The largest vocabulary the sampler declares when it runs through Triton's interpreter.
INTERPRETED_MAX_VOCAB = 1_025

import triton  # noqa: E402,I001  (after _triton_kernels, which sets TRITON_INTERPRET where needed)

if not CONSISTENT or (not INTERPRETED and not torch.cuda.is_available()):
    raise ImportError(
        "the Triton sampler needs Triton's interpreter here (no CUDA device), but triton was imported "
        "before TRITON_INTERPRET=1 was set (or it is set to 0): set TRITON_INTERPRET=1 in the environment "
        f"before anything imports triton (TRITON_INTERPRET is {os.environ.get('TRITON_INTERPRET', 'unset')!r} now)"
    )

__all__ = ["TritonSampler", "triton_sampler"]

#: The kernel's Philox counter holds a token index in 28 bits.
MAX_VOCAB = 1 << 28
MAX_K = 16
#: Probabilities the kernel reads natively; float64 is rounded to float32 on load.
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


class TritonSampler:
    """The canonical step in one Triton kernel; accepts injected uniforms.

    Args:
        block_v, block_b, num_warps, eager_jumps: override :func:`launch_config` (for tuning).
    """

    name = "specverify.triton"

    def __init__(
        self,
        *,
        block_v: int | None = None,
        block_b: int | None = None,
        num_warps: int | None = None,
        eager_jumps: bool | None = None,
    ) -> None:
        overrides = {"BLOCK_V": block_v, "BLOCK_B": block_b, "num_warps": num_warps, "EAGER_JUMPS": eager_jumps}
        self.overrides = {key: value for key, value in overrides.items() if value is not None}
        self.capabilities = Capabilities(
            device="cpu" if INTERPRETED else "cuda",
            dtypes=DTYPES,
            max_k=MAX_K,
            # Triton's interpreter runs the kernel in Python, about 100x slower than the reference:
            # there it declares vocabularies up to 1,025 tokens (the harness reports
            # the larger shapes as left out, with this reason); on a GPU, everything up to MAX_VOCAB
            max_vocab=INTERPRETED_MAX_VOCAB if INTERPRETED else MAX_VOCAB,
            uniforms=True,
        )

    def __call__(
        self,
        target_probs: torch.Tensor,
        draft_probs: torch.Tensor,
        draft_tokens: torch.Tensor,
        generator: torch.Generator | None = None,
        *,
        uniforms: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        _check_shapes(target_probs, draft_probs, draft_tokens, uniforms)
        batch, k = draft_tokens.shape
        vocab = target_probs.shape[-1]
        device = target_probs.device
        if device.type != "cuda" and not INTERPRETED:
            raise ValueError(f"the Triton sampler was compiled for CUDA and got tensors on {device}")
        target = _as_kernel_dtype(target_probs).contiguous()
        draft = _as_kernel_dtype(draft_probs).contiguous()
        drafts = draft_tokens.to(device=device, dtype=torch.int64).contiguous()
        tokens = torch.empty((batch, k + 1), dtype=torch.int64, device=device)
        accepted = torch.empty(batch, dtype=torch.int64, device=device)
        if batch == 0:
            return tokens, accepted
        if uniforms is not None:
            uniforms = uniforms.to(device=device, dtype=torch.float64).contiguous()
            seed = torch.zeros(1, dtype=torch.int64, device=device)
        else:
            # One 64-bit Philox key per call, drawn from (and advancing) the caller's generator.
            seed = torch.randint(
                -(1 << 63),
                (1 << 63) - 1,
                (1,),
                generator=generator,
                dtype=torch.int64,
                device=generator.device if generator is not None else device,
            ).to(device)
        config = {**launch_config(batch, vocab), **self.overrides}
        grid = (triton.cdiv(batch, config["BLOCK_B"]),)
        verify_kernel[grid](
            target,
            draft,
            drafts,
            uniforms if uniforms is not None else seed,
            seed,
            tokens,
            accepted,
            batch,
            k,
            vocab,
            USE_UNIFORMS=uniforms is not None,
            K_POW2=max(2, triton.next_power_of_2(k + 1)),
            BLOCK_B=config["BLOCK_B"],
            BLOCK_V=config["BLOCK_V"],
            EAGER_JUMPS=config["EAGER_JUMPS"],
            num_warps=config["num_warps"],
            enable_fp_fusion=False,  # IEEE products and sums, as the interpreter computes them
        )
        return tokens, accepted


def _as_kernel_dtype(probs: torch.Tensor) -> torch.Tensor:
    return probs if probs.dtype in DTYPES else probs.to(torch.float32)


def _check_shapes(
    target: torch.Tensor, draft: torch.Tensor, drafts: torch.Tensor, uniforms: torch.Tensor | None
) -> None:
    if drafts.dim() != 2:
        raise ValueError(f"draft_tokens must be [B, K], got shape {tuple(drafts.shape)}")
    batch, k = drafts.shape
    vocab = target.shape[-1] if target.dim() == 3 else -1
    if tuple(target.shape) != (batch, k + 1, vocab):
        raise ValueError(f"target_probs must be [B, K+1, V] = [{batch}, {k + 1}, V], got {tuple(target.shape)}")
    if tuple(draft.shape) != (batch, k, vocab):
        raise ValueError(f"draft_probs must be [B, K, V] = [{batch}, {k}, {vocab}], got {tuple(draft.shape)}")
    if k > MAX_K:
        raise ValueError(f"the Triton sampler takes at most K={MAX_K} drafts, got K={k}")
    if not 1 <= vocab <= MAX_VOCAB:
        raise ValueError(f"the Triton sampler takes 1 <= V <= {MAX_VOCAB}, got V={vocab}")
    if uniforms is not None and tuple(uniforms.shape) != (batch, k + 1):
        raise ValueError(f"uniforms must be [B, K+1] = [{batch}, {k + 1}], got {tuple(uniforms.shape)}")


triton_sampler = TritonSampler()
