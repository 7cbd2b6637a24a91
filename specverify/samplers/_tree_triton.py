"""The target-only tree verifier (EAGLE, SGLang with thresholds 1) as one Triton kernel.

One program per row walks the row's tree and draws its token; the vocabulary is read in tiles of
``BLOCK_V``.  The walk is that of :func:`specverify.samplers._tree_reference.walk` for
``target-only``, in unnormalised terms: at node ``n`` with target row ``p_n`` of mass ``S``, the
children are tried in order, child ``c`` of token ``x`` accepted iff ``u_c * R < p_n(x)``, where
``R`` is ``S`` less the mass of the tokens rejected so far at ``n`` (the reference's
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
runs through Triton's interpreter on CPU tensors (see :mod:`._triton_kernels`).
"""

from __future__ import annotations

import torch

from .._contract import Capabilities
from .._tree import TreeBatch
from ._triton import INTERPRETED_MAX_VOCAB, MAX_VOCAB
from ._triton_kernels import INTERPRETED

import triton  # noqa: E402,I001  (after _triton, which checks TRITON_INTERPRET was set in time)
import triton.language as tl  # noqa: E402

__all__ = ["TreeTritonSampler", "tree_triton", "tree_walk_kernel"]

#: float64 unit round-off times the vocabulary is the reference's noise level for a residual.
_EPS64 = tl.constexpr(2.220446049250313e-16)
#: Probabilities the kernel reads (each converted to float64 on load).
DTYPES = (torch.float64, torch.float32, torch.bfloat16, torch.float16)


@triton.jit
def _mass(base, V, BLOCK_V: tl.constexpr):
    """The float64 sum of one target row, one read."""
    cols = tl.arange(0, BLOCK_V)
    acc = tl.zeros([BLOCK_V], tl.float64)
    for v0 in range(0, V, BLOCK_V):
        idx = v0 + cols
        acc += tl.load(base + idx, mask=idx < V, other=0.0).to(tl.float64)
    return tl.sum(acc, axis=0)


@triton.jit
def _weights(base, idx, V, removed):
    """``p_n`` on one tile with the removed tokens (``removed``, -1 for none) set to 0."""
    p = tl.load(base + idx, mask=idx < V, other=0.0).to(tl.float64)
    gone = tl.sum((idx[:, None] == removed[None, :]).to(tl.int32), axis=1) > 0
    return tl.where(gone, 0.0, p)


@triton.jit
def tree_walk_kernel(
    target_ptr, tokens_ptr, children_ptr, uniforms_ptr, path_ptr, token_ptr,
    N, V, R, D,
    R_POW2: tl.constexpr,
    BLOCK_V: tl.constexpr,
):
    """One row: the walk (writes ``path[row, 1:]``, pre-filled with -1) and the emitted token."""
    row = tl.program_id(0).to(tl.int64)
    ranks = tl.arange(0, R_POW2)
    cols = tl.arange(0, BLOCK_V)
    current = row * 0
    base = target_ptr + (row * N) * V
    remaining = _mass(base, V, BLOCK_V)
    removed = tl.zeros([R_POW2], tl.int64) - 1
    depth = 0
    active = 1
    while (depth < D) & (active > 0):
        kids = tl.load(children_ptr + (row * N + current) * R + ranks, mask=ranks < R, other=-1)
        moved = 0
        nxt = current
        for r in range(0, R):
            child = tl.sum(tl.where(ranks == r, kids, 0), axis=0)
            trying = (moved == 0) & (child >= 0)
            node = tl.maximum(child, 0)
            x = tl.load(tokens_ptr + row * N + node)
            x = tl.minimum(tl.maximum(x, 0), V - 1)
            p_x = tl.load(base + x).to(tl.float64)
            p_x = tl.where(tl.sum((removed == x).to(tl.int32), axis=0) > 0, 0.0, p_x)
            u = tl.load(uniforms_ptr + row * N + node)
            accept = trying & (u * remaining < p_x)
            after = remaining - p_x
            drop = trying & ~accept & (after > V * _EPS64 * remaining)
            removed = tl.where((ranks == r) & drop, x, removed)
            remaining = tl.where(drop, after, remaining)
            nxt = tl.where(accept, child, nxt)
            moved = tl.where(accept, 1, moved)
        if moved > 0:
            current = nxt
            tl.store(path_ptr + row * (D + 1) + depth + 1, current)
            base = target_ptr + (row * N + current) * V
            remaining = _mass(base, V, BLOCK_V)
            removed = tl.zeros([R_POW2], tl.int64) - 1
        active = moved
        depth += 1

    # The token: inverse CDF of p_n without the removed tokens, at u_0 times its mass.
    acc = tl.zeros([BLOCK_V], tl.float64)
    for v0 in range(0, V, BLOCK_V):
        acc += _weights(base, v0 + cols, V, removed)
    goal = tl.load(uniforms_ptr + row * N) * tl.sum(acc, axis=0)
    carry = goal * 0.0
    found = V
    last = -1
    v0 = 0
    while (v0 < V) & (found == V):
        idx = v0 + cols
        w = _weights(base, idx, V, removed)
        cumulative = carry + tl.cumsum(w, axis=0)
        hit = (idx < V) & (cumulative > goal)
        found = tl.minimum(found, tl.min(tl.where(hit, idx, V), axis=0))
        last = tl.maximum(last, tl.max(tl.where((idx < V) & (w > 0.0), idx, -1), axis=0))
        carry = tl.max(cumulative, axis=0)
        v0 += BLOCK_V
    token = tl.where(found < V, found, last)
    tl.store(token_ptr + row, tl.maximum(token, 0).to(tl.int64))  # -1 only for a row of no mass (invalid input)


class TreeTritonSampler:
    """The target-only tree verifier in one Triton kernel; accepts injected uniforms.

    Args:
        block_v: the vocabulary tile (a power of two; default ``min(next_pow2(V), 1024)``).
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
                (batch, width), generator=generator, dtype=torch.float64,
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
        block_v = self.block_v or min(triton.next_power_of_2(vocab), 1024)
        tree_walk_kernel[(batch,)](
            target, tree.tokens.to(device=device, dtype=torch.int64).contiguous(), children, uniforms, path, token,
            width, vocab, children.shape[2], depth,
            R_POW2=max(2, triton.next_power_of_2(children.shape[2])),
            BLOCK_V=block_v,
        )
        return path, token


tree_triton = TreeTritonSampler()
