"""A ten-line adapter for a sampler that verifies on logits with per-request sampling parameters.

    specverify check examples.my_logits_adapter:sampler --budget quick

``verify_sampled`` below stands for your engine's kernel: NumPy arrays in, the target's raw logits,
one temperature and one top-k per request, its own random generator, and its own conventions out
(int32 ids padded with 0, a count of emitted tokens).  The adapter (``sampler``, at the bottom)
translates the harness's tensors and :class:`specverify.SamplingParams` to it.  ``verify_sampled``
is an ordinary, correct verifier, vectorised over requests.
"""

from __future__ import annotations

import numpy as np
import torch

import specverify

# --- the engine (imagine `from myengine import verify_sampled`) ---------------------------------


def verify_sampled(target_logits, draft_probs, draft_ids, temperature, top_k, rng):
    """Warp the target as each request asks (temperature, then top-k; temperature 0 is greedy),
    then accept, replace or add a bonus token.  ``target_logits [B, K+1, V]``, ``draft_probs
    [B, K, V]``, ``draft_ids [B, K]``; returns ``(ids [B, K+1] int32 padded with 0, n_emitted [B])``."""
    batch, width, vocab = target_logits.shape
    k, rows = width - 1, np.arange(batch)
    z = target_logits.astype(np.float64) / np.where(temperature > 0, temperature, 1.0)[:, None, None]
    kth = np.take_along_axis(np.sort(z, axis=-1), (vocab - np.clip(top_k, 1, vocab))[:, None, None], axis=-1)
    z = np.where((top_k[:, None, None] > 0) & (z < kth), -np.inf, z)
    p = np.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    greedy = np.eye(vocab)[target_logits.argmax(-1)]  # all mass on the first largest logit
    p = np.where((temperature == 0)[:, None, None], greedy, p)
    q = draft_probs.astype(np.float64)
    u = rng.random((batch, width))
    p_y = np.take_along_axis(p[:, :k], draft_ids[..., None], -1)[..., 0]
    q_y = np.take_along_axis(q, draft_ids[..., None], -1)[..., 0]
    n = np.cumprod(u[:, :k] * q_y < p_y, axis=1).sum(1)  # accepted drafts
    q_at = np.where((n < k)[:, None], q[rows, np.minimum(n, k - 1)], 0.0)
    last = np.maximum(p[rows, n] - q_at, 0.0)  # the residual (the bonus law after k accepts)
    last = np.where(last.sum(-1, keepdims=True) > 1e-12, last, p[rows, n])
    cdf = np.cumsum(last, -1)
    token = np.minimum((cdf <= (u[:, k] * cdf[:, -1])[:, None]).sum(-1), vocab - 1)  # never a token of mass 0
    ids = np.where(np.arange(k) < n[:, None], draft_ids, 0)
    ids = np.concatenate([ids, np.zeros((batch, 1), dtype=ids.dtype)], axis=1)
    ids[rows, n] = token
    return ids.astype(np.int32), n + 1


# --- the adapter ---------------------------------------------------------------------------------


@specverify.sampler(
    name="myengine.verify_sampled", inputs="logits", params=("temperature", "top_k"), dtypes=(torch.float32,)
)
def sampler(target_logits, draft_probs, draft_tokens, generator, params):
    rng = np.random.default_rng(int(torch.randint(2**62, (), generator=generator)))  # seeded by the harness
    ids, n_emitted = verify_sampled(
        target_logits.numpy(),
        draft_probs.numpy(),
        draft_tokens.numpy(),
        params.temperature.numpy(),
        params.top_k.numpy(),
        rng,
    )
    ids, n_emitted = torch.from_numpy(ids).long(), torch.from_numpy(n_emitted).long()
    tokens = torch.where(torch.arange(ids.shape[1]) < n_emitted[:, None], ids, -1)  # -1 padding
    return tokens, n_emitted - 1  # the contract counts accepted drafts, not emitted tokens
