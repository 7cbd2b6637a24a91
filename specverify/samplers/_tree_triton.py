"""The target-only tree verifier (EAGLE, SGLang with thresholds 1) as one Triton kernel.

The whole step is in the kernel: a program walks its rows' trees and draws their tokens, one row
per program on a GPU, a tile of ``BLOCK_B`` rows under the interpreter (which pays per program and
per operation; see :func:`launch_config`); the vocabulary is read in tiles of ``BLOCK_V``.  The walk is that of
:func:`specverify.samplers._tree_reference.walk` for ``target-only``, in unnormalised terms: at node ``n`` with target
row ``p_n`` of mass ``S``, the children are tried in order, child ``c`` of token ``x`` accepted iff
``u_c * R < p_n(x)``, where ``R`` is ``S`` less the mass of the tokens rejected so far at ``n`` (the reference's
``u_c < p(x)`` on its renormalised state; a token rejected twice weighs 0 the second time).  A
rejection that would leave at most ``V`` units of float64 round-off of ``R`` removes nothing (the
reference's residual fallback).  At the node where no child is accepted, the token is the
smallest whose cumulative mass of ``p_n`` without the removed tokens exceeds ``u_0`` times that
mass (the reference's inverse CDF), or the last token of positive mass if rounding puts the
target past the total.

Passes over memory per row: one read of each path node's target row (its mass), one read of the
stopping node's row (the emitted law's mass) and a read up to the emitted token; the children's
probabilities are single loads.  Arithmetic is float64 throughout (inputs are converted on load),
so it agrees with the reference token for token but for float ties (a uniform within about
``1e-12``, relative, of a boundary).

Randomness: ``uniforms [B, N]`` given, the reference's injected-uniform convention
(``uniforms[:, c]`` node ``c``'s coin, ``uniforms[:, 0]`` the token); otherwise ``[B, N]`` float64
uniforms drawn from the ``generator`` by ``torch.rand`` and passed to the same kernel, exactly as
the reference draws its own.

On a machine with a CUDA device it compiles for the GPU and takes CUDA tensors; without one it
runs through Triton's interpreter on CPU tensors (see :mod:`._triton_kernels`).  The kernel is
:mod:`._tree_triton_kernels`.
"""

from __future__ import annotations

import torch
import triton  # noqa: E402,I001

from .._contract import Capabilities
from .._trees.contract import TreeBatch
from ._tree_triton_kernels import INTERPRETED, launch_config, tree_walk_kernel
from ._triton import INTERPRETED_MAX_VOCAB, MAX_VOCAB  # raises unless Triton was brought up consistently

__all__ = ["TreeTritonSampler", "tree_triton"]

#: Probabilities the kernel reads (each converted to float64 on load).
DTYPES = (torch.float64, torch.float32, torch.bfloat16, torch.float16)


class TreeTritonSampler:
    """The target-only tree verifier in one Triton kernel; accepts injected uniforms.

    Args:
        block_v: override the vocabulary tile of :func:`launch_config` (a power of two; for tuning).
    """

    algorithm = "target-only"
    contract = "tree"
    name = "specverify.tree_triton"

    def __init__(self, *, block_v: int | None = None) -> None:
        self.block_v = block_v
        self.capabilities = Capabilities(
            device="cpu" if INTERPRETED else "cuda",
            dtypes=DTYPES,
            # the interpreter runs the kernel in Python: small vocabularies only (as the chain kernel)
            max_vocab=INTERPRETED_MAX_VOCAB if INTERPRETED else MAX_VOCAB,
            uniforms=True,
        )

    def __call__(
        self, tree: TreeBatch, generator: torch.Generator | None = None, *, uniforms: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        target = tree.target_probs
        device = target.device
        if device.type != "cuda" and not INTERPRETED:
            raise ValueError(f"the tree Triton sampler was compiled for CUDA and got tensors on {device}")
        batch, width, vocab = target.shape
        if not 1 <= vocab <= MAX_VOCAB:
            raise ValueError(f"the tree Triton sampler takes 1 <= V <= {MAX_VOCAB}, got V={vocab}")
        if uniforms is None:
            uniforms = torch.rand(
                (batch, width),
                generator=generator,
                dtype=torch.float64,
                device=generator.device if generator is not None else device,
            )
        elif tuple(uniforms.shape) != (batch, width):
            raise ValueError(f"uniforms has shape {tuple(uniforms.shape)}, expected {(batch, width)} (one per node)")
        uniforms = uniforms.to(device=device, dtype=torch.float64).contiguous()
        if target.dtype not in DTYPES:
            target = target.to(torch.float64)
        target = target.contiguous()
        children = tree.children.to(device).contiguous()
        depth = tree.depth
        path = torch.full((batch, depth + 1), -1, dtype=torch.int64, device=device)
        path[:, 0] = 0
        token = torch.empty(batch, dtype=torch.int64, device=device)
        if batch == 0:
            return path, token
        config = launch_config(batch, vocab)
        if self.block_v is not None:
            config["BLOCK_V"] = self.block_v
        tree_walk_kernel[(triton.cdiv(batch, config["BLOCK_B"]),)](
            target,
            tree.tokens.to(device=device, dtype=torch.int64).contiguous(),
            children,
            uniforms,
            path,
            token,
            batch,
            width,
            vocab,
            children.shape[2],
            depth,
            R_POW2=max(2, triton.next_power_of_2(children.shape[2])),
            BLOCK_B=config["BLOCK_B"],
            BLOCK_V=config["BLOCK_V"],
        )
        return path, token


tree_triton = TreeTritonSampler()
