"""The Triton kernel of the canonical verification step, and how Triton is brought up.

With no CUDA device the kernel runs through Triton's interpreter, which Triton only selects when
``TRITON_INTERPRET=1`` is in the environment when a kernel is decorated; this module sets it before
importing Triton on such machines, and :data:`INTERPRETED` says which way the kernel was built.

One program handles a tile of ``BLOCK_B`` rows and walks the vocabulary in blocks of ``BLOCK_V``
tokens.  On a GPU the sampler launches one row per program (a 128k vocabulary saturates a program);
the interpreter costs per program and per operation, so there a program takes a tile of many rows.

Passes over memory, per row (``j`` is the position of the first rejection):

1. for ``i = 0, 1, ...`` while every draft so far was accepted: the masses ``S_p``, ``S_q`` of
   ``p_i`` and ``q_i`` (one read of each), then the accept test on the draft token's two entries.
   Rows after the first rejection are never read.
2. the emitted token, from the residual ``[p_j S_q - q_j S_p]_+`` (or from ``p_K`` for the bonus):

   * injected uniforms (the canonical convention): its mass (one read), then the smallest token
     whose cumulative mass exceeds ``u_K`` times that mass (a read that stops at the token);
   * in-kernel Philox: one read.  A weighted reservoir with exponential jumps keeps a choice and a
     threshold ``T``; the next token to replace the choice is the first whose cumulative mass
     exceeds ``T``, and the new threshold is that cumulative mass over a fresh uniform in (0, 1].
     Token ``t`` ends up chosen with probability ``w_t / W`` (``prod_s (1 - w_s / C_s)``
     telescopes), it needs no total in advance, and it draws about ``ln V`` uniforms per row, not
     one per token.

Arithmetic: per token, float32 (the masses are float32 sums compensated with TwoSum, so they are
exact to about ``1e-14`` whatever ``V``); per row, float64: the accept test
``u q(y) S_p < p(y) S_q``, the residual, and the cumulative masses of pass 2.  A float32 cumulative
sum at ``V = 256k`` would misplace each token's interval by up to an ulp of the running total, a
law error of order ``V * 6e-8``; in float64 it is ``V * 1e-16``.

Residual fallback (as the reference's): if the residual's normalised mass is at most ``V`` units of
float64 round-off, the rejection was a rounding artefact of ``p = q`` and the token is drawn from
``p_j``.  No division by a mass that can be zero, never NaN, never a token of weight 0.
"""

from __future__ import annotations

import os

import torch

__all__ = ["CONSISTENT", "INTERPRETED", "launch_config", "verify_kernel"]


if "TRITON_INTERPRET" not in os.environ and not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

import triton  # noqa: E402  (after TRITON_INTERPRET, which Triton reads when kernels are decorated)
import triton.language as tl  # noqa: E402

#: float64 unit round-off times the vocabulary is the reference's noise level for a residual.
_EPS64 = tl.constexpr(2.220446049250313e-16)
#: Philox counters: the row in the high 32 bits, then a stream (bits 28-31: accept tests, reservoir
#: jumps, the fallback draw) and a position or token index (bits 0-27).
_STREAM_ACCEPT = tl.constexpr(0)
_STREAM_JUMP = tl.constexpr(1)
_STREAM_FALLBACK = tl.constexpr(2)


@triton.jit
def _uniform53(seed, offset):
    """A float64 uniform on [0, 1) with 53 random bits, from Philox at ``offset``."""
    a, b, _, _ = tl.randint4x(seed, offset)
    hi = (a.to(tl.uint32, bitcast=True) >> 5).to(tl.float64)
    lo = (b.to(tl.uint32, bitcast=True) >> 6).to(tl.float64)
    return (hi * 67108864.0 + lo) * 1.1102230246251565e-16


@triton.jit
def _masses(p_base, q_base, live, V, BLOCK_B: tl.constexpr, BLOCK_V: tl.constexpr):
    """``(S_p, S_q)`` of one position for each row of the tile, float64, one read of each row.

    Each lane keeps a float32 sum compensated by Knuth's TwoSum (written out: a helper call costs
    the interpreter a re-patch of ``triton.language``), and the lanes are added in float64.
    """
    cols = tl.arange(0, BLOCK_V)
    p_hi = tl.zeros([BLOCK_B, BLOCK_V], tl.float32)
    p_lo = tl.zeros([BLOCK_B, BLOCK_V], tl.float32)
    q_hi = tl.zeros([BLOCK_B, BLOCK_V], tl.float32)
    q_lo = tl.zeros([BLOCK_B, BLOCK_V], tl.float32)
    for v0 in range(0, V, BLOCK_V):
        idx = v0 + cols
        mask = live[:, None] & (idx < V)[None, :]
        p = tl.load(p_base[:, None] + idx[None, :], mask=mask, other=0.0).to(tl.float32)
        q = tl.load(q_base[:, None] + idx[None, :], mask=mask, other=0.0).to(tl.float32)
        p_sum = p_hi + p
        p_back = p_sum - p_hi
        p_lo += (p_hi - (p_sum - p_back)) + (p - p_back)
        p_hi = p_sum
        q_sum = q_hi + q
        q_back = q_sum - q_hi
        q_lo += (q_hi - (q_sum - q_back)) + (q - q_back)
        q_hi = q_sum
    s_p = tl.sum(p_hi.to(tl.float64) + p_lo.to(tl.float64), axis=1)
    s_q = tl.sum(q_hi.to(tl.float64) + q_lo.to(tl.float64), axis=1)
    return s_p, s_q


@triton.jit
def _weights(p_base, q_base, idx, mask, rejected, s_p, s_q, from_p):
    """Unnormalised weights of the emitted token's law on one block, float64.

    The residual ``[p S_q - q S_p]_+`` is ``S_p S_q`` times ``[p / S_p - q / S_q]_+``; bonus rows
    pass ``S_p = 0, S_q = 1`` and read no ``q``, so their weights are ``p``.  Rows in
    ``from_p`` (the fallback) weigh by ``p`` alone.
    """
    p = tl.load(p_base[:, None] + idx[None, :], mask=mask, other=0.0).to(tl.float32).to(tl.float64)
    q_mask = mask & rejected[:, None]
    q = tl.load(q_base[:, None] + idx[None, :], mask=q_mask, other=0.0).to(tl.float32).to(tl.float64)
    residual = tl.maximum(p * s_q[:, None] - q * s_p[:, None], 0.0)
    return tl.where(from_p[:, None], p, residual)


@triton.jit
def _residual_mass(p_base, q_base, live, rejected, s_p, s_q, V, BLOCK_B: tl.constexpr, BLOCK_V: tl.constexpr):
    """Total weight of the residual (the bonus row's mass for bonus rows), one read."""
    cols = tl.arange(0, BLOCK_V)
    never = tl.zeros([BLOCK_B], tl.int32) != 0
    total = tl.zeros([BLOCK_B, BLOCK_V], tl.float64)
    for v0 in range(0, V, BLOCK_V):
        idx = v0 + cols
        mask = live[:, None] & (idx < V)[None, :]
        total += _weights(p_base, q_base, idx, mask, rejected, s_p, s_q, never)
    return tl.sum(total, axis=1)


@triton.jit
def _inverse_cdf(
    p_base, q_base, live, rejected, s_p, s_q, from_p, target, V, BLOCK_B: tl.constexpr, BLOCK_V: tl.constexpr
):
    """The smallest token whose cumulative weight exceeds ``target``, reading up to it.

    If rounding puts ``target`` at or past the total, the last token of positive weight (as the
    reference); ``-1`` only for a row of no weight at all.
    """
    cols = tl.arange(0, BLOCK_V)
    carry = tl.zeros([BLOCK_B], tl.float64)
    found = tl.zeros([BLOCK_B], tl.int32) + V
    last = tl.zeros([BLOCK_B], tl.int32) - 1
    searching = live
    v0 = 0
    while (v0 < V) & (tl.sum(searching.to(tl.int32)) > 0):
        idx = v0 + cols
        mask = searching[:, None] & (idx < V)[None, :]
        w = _weights(p_base, q_base, idx, mask, rejected, s_p, s_q, from_p)
        cumulative = carry[:, None] + tl.cumsum(w, axis=1)
        hit = mask & (cumulative > target[:, None])
        found = tl.minimum(found, tl.min(tl.where(hit, idx[None, :], V), axis=1))
        last = tl.maximum(last, tl.max(tl.where(mask & (w > 0.0), idx[None, :], -1), axis=1))
        carry = tl.max(cumulative, axis=1)
        searching = searching & (found == V)
        v0 += BLOCK_V
    return tl.where(found < V, found, last)


@triton.jit
def _reservoir(
    p_base,
    q_base,
    live,
    rejected,
    s_p,
    s_q,
    seed,
    rows64,
    V,
    BLOCK_B: tl.constexpr,
    BLOCK_V: tl.constexpr,
    EAGER_JUMPS: tl.constexpr,
):
    """One weighted draw by reservoir with exponential jumps, one read; returns (token, total).

    The jump at token ``t`` uses the uniform at Philox counter ``(row, jump stream, t)``: each
    token's uniform is looked at only if the token is chosen, and only once, so the draws are
    independent.  ``EAGER_JUMPS`` draws a whole block's uniforms at once (one vectorised call, what
    the interpreter wants) instead of one per jump (what a GPU wants); the outputs are identical.
    """
    cols = tl.arange(0, BLOCK_V)
    never = tl.zeros([BLOCK_B], tl.int32) != 0
    carry = tl.zeros([BLOCK_B], tl.float64)
    threshold = tl.zeros([BLOCK_B], tl.float64)
    chosen = tl.zeros([BLOCK_B], tl.int32) - 1
    for v0 in range(0, V, BLOCK_V):
        idx = v0 + cols
        mask = live[:, None] & (idx < V)[None, :]
        w = _weights(p_base, q_base, idx, mask, rejected, s_p, s_q, never)
        cumulative = carry[:, None] + tl.cumsum(w, axis=1)
        if EAGER_JUMPS:  # the next threshold if the jump lands on each token
            uniforms = _uniform53(seed, (rows64[:, None] << 32) | (_STREAM_JUMP << 28) | idx[None, :])
            next_thresholds = cumulative / (1.0 - uniforms)  # 1 - u in (0, 1]
        first = tl.min(tl.where(mask & (cumulative > threshold[:, None]), cols[None, :], BLOCK_V), axis=1)
        while tl.min(first, axis=0) < BLOCK_V:
            jumped = first < BLOCK_V
            if EAGER_JUMPS:
                landed = tl.sum(tl.where(cols[None, :] == first[:, None], next_thresholds, 0.0), axis=1)
            else:
                u = _uniform53(seed, (rows64 << 32) | (_STREAM_JUMP << 28) | (v0 + first))
                reached = tl.sum(tl.where(cols[None, :] == first[:, None], cumulative, 0.0), axis=1)
                landed = reached / (1.0 - u)
            threshold = tl.where(jumped, landed, threshold)
            chosen = tl.where(jumped, v0 + first, chosen)
            first = tl.min(tl.where(mask & (cumulative > threshold[:, None]), cols[None, :], BLOCK_V), axis=1)
        carry = tl.max(cumulative, axis=1)
    return chosen, carry


@triton.jit
def _accept_drafts(
    target_rows,
    draft_rows,
    drafts_ptr,
    rows64,
    in_batch,
    positions,
    accept_uniforms,
    K,
    V,
    BLOCK_B: tl.constexpr,
    BLOCK_V: tl.constexpr,
):
    """Pass 1 of :func:`verify_kernel`: the accepted count of each row, and the masses S_p, S_q of
    the position it rejected at (a row that accepts every draft keeps S_p = 0, S_q = 1)."""
    alive = in_batch
    accepted = tl.zeros([BLOCK_B], tl.int32)
    rejected_s_p = tl.zeros([BLOCK_B], tl.float64)
    rejected_s_q = tl.zeros([BLOCK_B], tl.float64) + 1.0
    for i in range(0, K):
        if tl.sum(alive.to(tl.int32)) > 0:
            p_base = target_rows + i * V
            q_base = draft_rows + i * V
            s_p, s_q = _masses(p_base, q_base, alive, V, BLOCK_B, BLOCK_V)
            y = tl.load(drafts_ptr + rows64 * K + i, mask=alive, other=-1)
            y_valid = alive & (y >= 0) & (y < V)
            p_y = tl.load(p_base + y, mask=y_valid, other=0.0).to(tl.float32).to(tl.float64)
            q_y = tl.load(q_base + y, mask=y_valid, other=0.0).to(tl.float32).to(tl.float64)
            u = tl.sum(tl.where(positions[None, :] == i, accept_uniforms, 0.0), axis=1)
            accept = alive & (u * q_y * s_p < p_y * s_q)
            reject = alive & ~accept
            rejected_s_p = tl.where(reject, s_p, rejected_s_p)
            rejected_s_q = tl.where(reject, s_q, rejected_s_q)
            accepted += accept.to(tl.int32)
            alive = accept
    return accepted, rejected_s_p, rejected_s_q


@triton.jit
def verify_kernel(
    target_ptr,  # [B, K+1, V], contiguous
    draft_ptr,  # [B, K, V], contiguous
    drafts_ptr,  # [B, K] int64
    uniforms_ptr,  # [B, K+1] float64 (USE_UNIFORMS) or unused
    seed_ptr,  # [1] int64 (Philox key) or unused
    tokens_ptr,  # [B, K+1] int64, out
    accepted_ptr,  # [B] int64, out
    B,
    K,
    V,
    USE_UNIFORMS: tl.constexpr,
    EAGER_JUMPS: tl.constexpr,
    K_POW2: tl.constexpr,
    BLOCK_B: tl.constexpr,
    BLOCK_V: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    in_batch = rows < B
    rows64 = rows.to(tl.int64)
    target_rows = target_ptr + rows64 * (K + 1) * V
    draft_rows = draft_ptr + rows64 * K * V
    # Every uniform of the accept tests, one vectorised draw (or load) per row.
    positions = tl.arange(0, K_POW2)
    if USE_UNIFORMS:
        seed = 0
        accept_uniforms = tl.load(
            uniforms_ptr + rows64[:, None] * (K + 1) + positions[None, :],
            mask=in_batch[:, None] & (positions < K)[None, :],
            other=0.0,
        )
    else:
        seed = tl.load(seed_ptr)
        accept_uniforms = _uniform53(seed, (rows64[:, None] << 32) | (_STREAM_ACCEPT << 28) | positions[None, :])

    # Pass 1: accept while every earlier draft was accepted.
    accepted, rejected_s_p, rejected_s_q = _accept_drafts(
        target_rows, draft_rows, drafts_ptr, rows64, in_batch, positions, accept_uniforms, K, V, BLOCK_B, BLOCK_V
    )

    # Pass 2: the emitted token at position `accepted`, from the residual or the bonus row.
    rejected = in_batch & (accepted < K)
    p_base = target_rows + accepted.to(tl.int64) * V
    q_base = draft_rows + accepted.to(tl.int64) * V
    noise = V * _EPS64 * rejected_s_p * rejected_s_q
    if USE_UNIFORMS:
        mass = _residual_mass(p_base, q_base, in_batch, rejected, rejected_s_p, rejected_s_q, V, BLOCK_B, BLOCK_V)
        from_p = in_batch & (mass <= noise)
        total = tl.where(from_p, rejected_s_p, mass)
        u_last = tl.load(uniforms_ptr + rows64 * (K + 1) + K, mask=in_batch, other=0.0)
        token = _inverse_cdf(
            p_base, q_base, in_batch, rejected, rejected_s_p, rejected_s_q, from_p, u_last * total, V, BLOCK_B, BLOCK_V
        )
    else:
        token, mass = _reservoir(
            p_base,
            q_base,
            in_batch,
            rejected,
            rejected_s_p,
            rejected_s_q,
            seed,
            rows64,
            V,
            BLOCK_B,
            BLOCK_V,
            EAGER_JUMPS,
        )
        from_p = in_batch & (mass <= noise)
        if tl.sum(from_p.to(tl.int32)) > 0:
            u_last = _uniform53(seed, (rows64 << 32) | (_STREAM_FALLBACK << 28))
            fallback = _inverse_cdf(
                p_base,
                q_base,
                from_p,
                rejected,
                rejected_s_p,
                rejected_s_q,
                from_p,
                u_last * rejected_s_p,
                V,
                BLOCK_B,
                BLOCK_V,
            )
            token = tl.where(from_p, fallback, token)
    token = tl.maximum(token, 0)  # only a row whose law has no mass at all (invalid input) gets here

    # Output: accepted drafts, the emitted token, then -1.
    drafted = tl.load(
        drafts_ptr + rows64[:, None] * K + positions[None, :],
        mask=in_batch[:, None] & (positions < K)[None, :],
        other=-1,
    )
    count = accepted[:, None]
    emitted = tl.where(positions[None, :] == count, token[:, None].to(tl.int64), -1)
    out = tl.where(positions[None, :] < count, drafted, emitted)
    tl.store(
        tokens_ptr + rows64[:, None] * (K + 1) + positions[None, :],
        out,
        mask=in_batch[:, None] & (positions <= K)[None, :],
    )
    tl.store(accepted_ptr + rows64, accepted.to(tl.int64), mask=in_batch)


def _interpreted(kernel: object) -> bool:
    return type(kernel).__name__ == "InterpretedFunction"


#: True when the kernel runs through Triton's interpreter (on CPU tensors).
INTERPRETED = _interpreted(verify_kernel)
#: Triton's own jit functions (``tl.sum``, ``tl.randint4x``) were decorated when triton was first
#: imported; the interpreter cannot call them unless they were interpreted too.
CONSISTENT = INTERPRETED == _interpreted(tl.randint4x)


def launch_config(batch: int, vocab: int, *, interpreted: bool | None = None) -> dict[str, int]:
    """Rows per program, vocabulary block and warps for a problem size.

    The interpreter pays per program and per operation, so it gets tiles of up to 256k elements
    (many rows per program at small ``V``); a GPU gets one row per program once a row fills a
    block, and a 2048-token block (8 float64 lanes per thread at 8 warps).
    """
    if interpreted is None:
        interpreted = INTERPRETED
    block_v = min(triton.next_power_of_2(vocab), 1024 if interpreted else 2048)
    tile = 1 << 18 if interpreted else 2048
    block_b = max(1, min(triton.next_power_of_2(batch), tile // block_v))
    return {
        "BLOCK_B": block_b,
        "BLOCK_V": block_v,
        "EAGER_JUMPS": interpreted,
        "num_warps": 4 if block_b * block_v < 2048 else 8,
    }
