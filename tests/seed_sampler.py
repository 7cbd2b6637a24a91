"""The seed document's ``speculative_step``, adapted to the sampler contract as a new user adapts it
(one row per call, ``batched=False``): its residual normaliser divides by zero when the target
exceeds the draft only below float resolution, which ``robustness.edge[sub-ulp]`` finds."""

from __future__ import annotations

import torch

import specverify


def _sample(p: torch.Tensor, g: torch.Generator) -> int:
    return int(torch.multinomial(p, 1, generator=g).item())


@specverify.sampler(name="seed-speculative-step", batched=False)
def sampler(target_probs, draft_probs, draft_tokens, generator):
    p_rows, q_rows, candidates = target_probs[0], draft_probs[0], draft_tokens[0].tolist()
    k = len(candidates)
    accepted: list[int] = []
    for i, token in enumerate(candidates):
        p, q = p_rows[i], q_rows[i]
        a = min(1.0, (p[token] / q[token]).item())
        if torch.rand((), generator=generator).item() <= a:
            accepted.append(token)
            continue
        correction = torch.clamp(p - q, min=0)
        correction /= correction.sum()  # the seed's: no guard for a residual of mass 0
        accepted.append(_sample(correction, generator))
        return torch.tensor([accepted + [-1] * (k + 1 - len(accepted))]), torch.tensor([len(accepted) - 1])
    accepted.append(_sample(p_rows[k], generator))
    return torch.tensor([accepted]), torch.tensor([k])
