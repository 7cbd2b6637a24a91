"""A ten-line adapter: put a sampler with its own calling convention through specverify.

    specverify check examples.my_adapter:sampler --budget quick

``verify_chain`` below stands for your library's verification step.  Its convention differs from
specverify's contract in the usual ways: NumPy instead of torch, logits instead of probabilities,
the draft before the target, its own random generator, int32 ids padded with 0 and a count of
*emitted* tokens.  The adapter (``sampler``, at the bottom) translates both ways and declares what
the function accepts.  Nothing here is special-cased for the harness: ``verify_chain`` is an
ordinary, correct implementation of speculative sampling.
"""

from __future__ import annotations

import numpy as np
import torch

import specverify

# --- the library (imagine `from mylib import verify_chain`) ---------------------------------


def verify_chain(
    draft_logits: np.ndarray, target_logits: np.ndarray, draft_ids: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Speculative sampling on a batch.

    Args:
        draft_logits: ``[B, K, V]`` float32 draft logits.
        target_logits: ``[B, K+1, V]`` float32 target logits (the last row for the bonus token).
        draft_ids: ``[B, K]`` int32 drafted tokens.
        rng: where the uniforms come from.

    Returns:
        ``ids [B, K+1]`` int32 (accepted drafts, then the corrected or bonus token, then 0s) and
        ``n_emitted [B]``, the number of meaningful ids in each row.
    """
    q, p = _softmax(draft_logits), _softmax(target_logits)
    batch, k = draft_ids.shape
    rows = np.arange(batch)
    picked = draft_ids[..., None].astype(np.int64)
    p_draft = np.take_along_axis(p[:, :k], picked, -1)[..., 0]
    q_draft = np.take_along_axis(q, picked, -1)[..., 0]
    accepted = rng.random((batch, k)) * q_draft < p_draft
    n_accepted = np.cumprod(accepted, axis=-1).sum(-1)
    q_padded = np.concatenate([q, np.zeros_like(q[:, :1])], axis=1)  # no draft law for the bonus
    residual = np.maximum(p[rows, n_accepted] - q_padded[rows, n_accepted], 0)
    empty = residual.sum(-1, keepdims=True) <= 0  # p == q up to rounding: sample from p instead
    residual = np.where(empty, p[rows, n_accepted], residual)
    cdf = residual.cumsum(-1)
    needle = rng.random(batch) * cdf[:, -1]
    positive = residual > 0  # the needle can round up to the total: never step past the last positive
    last_positive = positive.shape[-1] - 1 - np.argmax(positive[:, ::-1], axis=-1)
    last = np.minimum((cdf <= needle[:, None]).sum(-1), last_positive)
    ids = np.where(np.arange(k + 1) < n_accepted[:, None], np.pad(draft_ids, ((0, 0), (0, 1))), 0)
    ids[rows, n_accepted] = last
    return ids.astype(np.int32), n_accepted + 1


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(-1, keepdims=True))
    return shifted / shifted.sum(-1, keepdims=True)


# --- the adapter: specverify's contract on one side, verify_chain's convention on the other ---


@specverify.sampler(name="mylib.verify_chain", dtypes=(torch.float32,))  # it computes in float32
def sampler(target_probs, draft_probs, draft_tokens, generator):
    rng = np.random.default_rng(int(torch.randint(2**62, (), generator=generator)))  # seeded by the harness
    ids, n_emitted = verify_chain(
        draft_probs.log().numpy(), target_probs.log().numpy(), draft_tokens.int().numpy(), rng
    )  # log(0) = -inf: a zero probability stays exactly zero after the softmax
    ids, n_emitted = torch.from_numpy(ids).long(), torch.from_numpy(n_emitted).long()
    tokens = torch.where(torch.arange(ids.shape[1]) < n_emitted[:, None], ids, -1)  # -1 padding
    return tokens, n_emitted - 1  # the contract counts accepted drafts, not emitted tokens
