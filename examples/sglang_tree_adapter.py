"""A ten-line tree adapter: SGLang's tree verifier behind specverify's tree contract.

``tree_speculative_sampling_target_only`` below is a stand-in with sgl-kernel's signature and its
kernel's walk (first child, then siblings, one coin per node, accumulated target mass, the tried
children's mass moved into the ``draft_probs`` scratch, a final coin for the residual), vectorised
over rows in torch so it runs on a CPU.  It uses the fixed acceptance rule of SGLang PR #35798
(``coin < S`` and ``p > 0``).  On a GPU, import the real one from ``sgl_kernel`` instead: the
adapter (``sampler``, at the bottom) does not change.
"""

from __future__ import annotations

import torch

from specverify.trees import TreeBatch, sglang_arrays, to_sglang

# --- the library (imagine `from sgl_kernel import tree_speculative_sampling_target_only`) ----


def tree_speculative_sampling_target_only(
    predicts: torch.Tensor,  # [B * N] int32, written
    accept_index: torch.Tensor,  # [B, D + 1] int32, written
    accept_token_num: torch.Tensor,  # [B] int32, written
    candidates: torch.Tensor,  # [B, N] int64
    retrive_index: torch.Tensor,  # [B, N] int64
    retrive_next_token: torch.Tensor,  # [B, N] int64
    retrive_next_sibling: torch.Tensor,  # [B, N] int64
    uniform_samples: torch.Tensor,  # [B, N] float32
    uniform_samples_for_final_sampling: torch.Tensor,  # [B] float32
    target_probs: torch.Tensor,  # [B, N, V] float32
    draft_probs: torch.Tensor,  # [B, N, V] float32 scratch, zeros on entry
    threshold_single: float = 1.0,
    threshold_acc: float = 1.0,
    deterministic: bool = True,
) -> None:
    batch, _ = candidates.shape
    steps = accept_index.shape[1]
    rows = torch.arange(batch)
    current = torch.zeros(batch, dtype=torch.int64)  # the last accepted node
    last = retrive_index[:, 0].clone()
    coin = uniform_samples[:, 0].clone()
    count = torch.zeros(batch, dtype=torch.int64)
    accept_index[:, 0] = last.to(accept_index.dtype)
    active = torch.ones(batch, dtype=torch.bool)
    for _ in range(1, steps):
        node = torch.where(active, retrive_next_token[rows, current], -1)
        mass = torch.zeros(batch, dtype=target_probs.dtype)
        moved = torch.zeros(batch, dtype=torch.bool)
        while (node >= 0).any():  # siblings, all rows at once
            live = node >= 0
            at = node.clamp_min(0)
            token = candidates[rows, at]
            single = target_probs[rows, current, token]
            mass = torch.where(live, mass + single, mass)
            accept = live & (((coin < mass / max(threshold_acc, 1e-9)) & (single > 0)) | (single >= threshold_single))
            reject = live & ~accept
            draft_probs[rows[reject], current[reject], token[reject]] = single[reject]
            predicts[last[accept]] = token[accept].to(predicts.dtype)
            count += accept.to(torch.int64)
            accept_index[rows[accept], count[accept]] = retrive_index[rows[accept], at[accept]].to(accept_index.dtype)
            last = torch.where(accept, retrive_index[rows, at], last)
            coin = torch.where(accept, uniform_samples[rows, at], coin)
            current = torch.where(accept, at, current)
            moved |= accept
            node = torch.where(live & ~accept, retrive_next_sibling[rows, at], -1)
        active &= moved
    accept_token_num[:] = count.to(accept_token_num.dtype)
    residual = target_probs[rows, current] - torch.where((count < steps - 1)[:, None], draft_probs[rows, current], 0.0)
    cdf = residual.clamp_min(0).cumsum(dim=-1)
    u = (uniform_samples_for_final_sampling * cdf[:, -1])[:, None]
    sampled = (cdf <= u).sum(dim=-1).clamp_max(cdf.shape[-1] - 1)  # first token whose cumulative mass exceeds u
    predicts[last] = sampled.to(predicts.dtype)


# --- the adapter -----------------------------------------------------------------------------


def sampler(tree: TreeBatch, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    layout = to_sglang(tree)
    arrays = sglang_arrays(layout)
    predicts, accept_index, accept_token_num = layout.empty_outputs(torch.int32)
    coins = torch.rand(tree.parents.shape, generator=generator)  # float32, as SGLang draws them
    final = torch.rand(tree.batch, generator=generator)
    probs = arrays.pop("target_probs").float()
    arrays.pop("draft_probs", None)  # the kernel reads no draft law: it gets a zeroed scratch instead
    tree_speculative_sampling_target_only(
        predicts,
        accept_index,
        accept_token_num,
        **arrays,
        uniform_samples=coins,
        uniform_samples_for_final_sampling=final,
        target_probs=probs,
        draft_probs=torch.zeros_like(probs),
    )
    return layout.to_path(predicts, accept_index, accept_token_num)


sampler.algorithm = "target-only"  # type: ignore[attr-defined]
sampler.contract = "tree"  # type: ignore[attr-defined]  # specverify.check runs the trees family on it
sampler.name = "sglang.tree_speculative_sampling_target_only (stand-in)"  # type: ignore[attr-defined]
