"""The Triton kernel of the target-only tree verifier (the sampler is :mod:`._tree_triton`).

Importing this module never raises: it is what a compile-only build for a GPU imports (see
tests/trees/test_tree_triton.py); :mod:`._tree_triton` checks the interpreter was set in time.
"""

from __future__ import annotations

import triton  # noqa: E402,I001  (after _triton_kernels, which sets TRITON_INTERPRET where needed)
import triton.language as tl  # noqa: E402

from ._triton_kernels import INTERPRETED

__all__ = ["launch_config", "tree_walk_kernel"]

#: float64 unit round-off times the vocabulary is the reference's noise level for a residual.
_EPS64 = tl.constexpr(2.220446049250313e-16)


@triton.jit
def _mass(target_ptr, offset, live, V, BLOCK_B: tl.constexpr, BLOCK_V: tl.constexpr):
    """The float64 sum of each live row's target row at ``offset``, one read."""
    cols = tl.arange(0, BLOCK_V)
    acc = tl.zeros([BLOCK_B, BLOCK_V], tl.float64)
    for v0 in range(0, V, BLOCK_V):
        idx = v0 + cols
        mask = live[:, None] & (idx < V)[None, :]
        acc += tl.load(target_ptr + offset[:, None] + idx[None, :], mask=mask, other=0.0).to(tl.float64)
    return tl.sum(acc, axis=1)


@triton.jit
def _weights(target_ptr, offset, idx, mask, removed, R, R_POW2: tl.constexpr):
    """``p_n`` on one tile with each row's removed tokens (``removed [rows, R]``, -1 for none) at 0."""
    ranks = tl.arange(0, R_POW2)
    p = tl.load(target_ptr + offset[:, None] + idx[None, :], mask=mask, other=0.0).to(tl.float64)
    for r in range(0, R):
        gone = tl.sum(tl.where(ranks[None, :] == r, removed, 0), axis=1)
        p = tl.where(idx[None, :] == gone[:, None], 0.0, p)
    return p


@triton.jit
def tree_walk_kernel(
    target_ptr,
    tokens_ptr,
    children_ptr,
    uniforms_ptr,
    path_ptr,
    token_ptr,
    B,
    N,
    V,
    R,
    D,
    R_POW2: tl.constexpr,
    BLOCK_B: tl.constexpr,
    BLOCK_V: tl.constexpr,
):
    """A tile of ``BLOCK_B`` rows: the walk (writes ``path[:, 1:]``, pre-filled with -1), then the token."""
    rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    live = rows < B
    rows64 = rows.to(tl.int64)
    ranks = tl.arange(0, R_POW2)
    cols = tl.arange(0, BLOCK_V)
    never = tl.zeros([BLOCK_B], tl.int32) != 0
    current = tl.zeros([BLOCK_B], tl.int64)
    offset = rows64 * N * V
    remaining = _mass(target_ptr, offset, live, V, BLOCK_B, BLOCK_V)
    removed = tl.zeros([BLOCK_B, R_POW2], tl.int64) - 1
    active = live
    depth = 0
    while (depth < D) & (tl.sum(active.to(tl.int32)) > 0):
        kids = tl.load(
            children_ptr + ((rows64 * N + current) * R)[:, None] + ranks[None, :],
            mask=active[:, None] & (ranks < R)[None, :],
            other=-1,
        )
        moved = never
        following = current
        for r in range(0, R):  # siblings in try order
            child = tl.sum(tl.where(ranks[None, :] == r, kids, 0), axis=1)
            trying = active & ~moved & (child >= 0)
            node = tl.maximum(child, 0)
            x = tl.load(tokens_ptr + rows64 * N + node, mask=trying, other=0)
            x = tl.minimum(tl.maximum(x, 0), V - 1)
            p_x = tl.load(target_ptr + offset + x, mask=trying, other=0.0).to(tl.float64)
            again = tl.sum((removed == x[:, None]).to(tl.int32), axis=1) > 0  # a token rejected before weighs 0
            p_x = tl.where(again, 0.0, p_x)
            u = tl.load(uniforms_ptr + rows64 * N + node, mask=trying, other=1.0)
            accept = trying & (u * remaining < p_x)
            after = remaining - p_x
            drop = trying & ~accept & (after > V * _EPS64 * remaining)  # else the reference's fallback: keep p
            removed = tl.where((ranks[None, :] == r) & drop[:, None], x[:, None], removed)
            remaining = tl.where(drop, after, remaining)
            following = tl.where(accept, child, following)
            moved = moved | accept
        current = following
        tl.store(path_ptr + rows64 * (D + 1) + depth + 1, current, mask=moved)
        offset = (rows64 * N + current) * V
        remaining = tl.where(moved, _mass(target_ptr, offset, moved, V, BLOCK_B, BLOCK_V), remaining)
        removed = tl.where(moved[:, None], -1, removed)
        active = moved
        depth += 1

    # The token: inverse CDF of p_n without the removed tokens, at u_0 times its mass.
    acc = tl.zeros([BLOCK_B, BLOCK_V], tl.float64)
    for v0 in range(0, V, BLOCK_V):
        idx = v0 + cols
        acc += _weights(target_ptr, offset, idx, live[:, None] & (idx < V)[None, :], removed, R, R_POW2)
    goal = tl.load(uniforms_ptr + rows64 * N, mask=live, other=0.0) * tl.sum(acc, axis=1)
    carry = tl.zeros([BLOCK_B], tl.float64)
    found = tl.zeros([BLOCK_B], tl.int32) + V
    last = tl.zeros([BLOCK_B], tl.int32) - 1
    searching = live
    v0 = 0
    while (v0 < V) & (tl.sum(searching.to(tl.int32)) > 0):
        idx = v0 + cols
        mask = searching[:, None] & (idx < V)[None, :]
        w = _weights(target_ptr, offset, idx, mask, removed, R, R_POW2)
        cumulative = carry[:, None] + tl.cumsum(w, axis=1)
        hit = mask & (cumulative > goal[:, None])
        found = tl.minimum(found, tl.min(tl.where(hit, idx[None, :], V), axis=1))
        last = tl.maximum(last, tl.max(tl.where(mask & (w > 0.0), idx[None, :], -1), axis=1))
        carry = tl.max(cumulative, axis=1)
        searching = searching & (found == V)
        v0 += BLOCK_V
    token = tl.where(found < V, found, last)
    tl.store(token_ptr + rows64, tl.maximum(token, 0).to(tl.int64), mask=live)  # -1 only for a row of no mass


def launch_config(batch: int, vocab: int, *, interpreted: bool | None = None) -> dict[str, int]:
    """Rows per program and vocabulary tile: one row per program on a GPU; the interpreter pays
    per program and per operation, so there a program takes a tile of up to 16k elements."""
    if interpreted is None:
        interpreted = INTERPRETED
    block_v = min(triton.next_power_of_2(vocab), 1024 if interpreted else 2048)
    block_b = max(1, min(triton.next_power_of_2(batch), (1 << 14) // block_v)) if interpreted else 1
    return {"BLOCK_B": block_b, "BLOCK_V": block_v}
