"""Block verification against token-wise verification: exact mean accepted drafts on the same chains.

    python benchmarks/tree_acceptance.py

For order-1 Markov targets (V = 8, Dirichlet rows) and drafts that mix the target with noise
(weight lambda), every draft sequence of length K is enumerated with its probability under the
draft, and each verifier's exact expected number of accepted drafts given the sequence
(``specverify._trees.exact``) is averaged over them: no sampling error.  Sun et al. (2024) prove
block verification never accepts fewer; the table measures by how much it accepts more.
"""

from __future__ import annotations

import itertools

import torch

from specverify._seeds import derive_seed
from specverify._trees.contract import TreeBatch
from specverify._trees.exact import expected_accepted, tree_law

VOCAB = 8


def _dirichlet(g: torch.Generator, concentration: float) -> torch.Tensor:
    gamma = torch._standard_gamma(torch.full((VOCAB, VOCAB), concentration, dtype=torch.float64), generator=g)
    return gamma / gamma.sum(-1, keepdim=True)


def mean_accepted(target: torch.Tensor, draft: torch.Tensor, k: int) -> tuple[float, float]:
    """Exact mean accepted drafts of (token-wise, block) over drafts drawn from the draft chain."""
    drafts = torch.tensor(list(itertools.product(range(VOCAB), repeat=k)))
    previous = torch.cat([torch.zeros(len(drafts), 1, dtype=torch.int64), drafts], dim=1)  # context token 0
    target_probs = target[previous]  # [S, K+1, V]: the law after each prefix
    draft_probs = draft[previous[:, :k]]
    weight = draft_probs.gather(-1, drafts[..., None]).squeeze(-1).prod(dim=1)
    tree = TreeBatch.from_chain(target_probs, draft_probs, drafts)
    token_wise = expected_accepted(tree, tree_law(tree, "specinfer"))
    block = expected_accepted(tree, tree_law(tree, "block-verification"))
    return float((weight * token_wise).sum()), float((weight * block).sum())


def main() -> None:
    print(f"V = {VOCAB}, order-1 Markov target (Dirichlet 0.5 rows), draft = (1 - lambda) target + lambda noise")
    print(f"{'K':>2} {'lambda':>6} {'seeds':>5} {'token-wise':>10} {'block':>8} {'gain':>7} {'min gain':>9}")
    for k in (2, 4):
        for mix in (0.25, 0.5, 0.75):
            rows = []
            for seed in range(5):
                target = _dirichlet(torch.Generator().manual_seed(derive_seed("bench.target", seed)), 0.5)
                noise = _dirichlet(torch.Generator().manual_seed(derive_seed("bench.noise", seed)), 0.5)
                rows.append(mean_accepted(target, (1 - mix) * target + mix * noise, k))
            token_wise = sum(r[0] for r in rows) / len(rows)
            block = sum(r[1] for r in rows) / len(rows)
            least = min(b / t for t, b in rows)
            print(
                f"{k:>2} {mix:>6.2f} {len(rows):>5} {token_wise:>10.4f} {block:>8.4f} {block / token_wise - 1:>+7.2%} "
                f"{least - 1:>+9.2%}"
            )


if __name__ == "__main__":
    main()
