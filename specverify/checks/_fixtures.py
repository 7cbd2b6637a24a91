"""Fixed cases for checks that need no search: built from seeded torch draws, reproducible."""

from __future__ import annotations

import torch

from .._laws.cases import ModelCase
from .._laws.models import ChainModel, TableModel

__all__ = ["random_laws", "random_step_batch", "random_table_model", "seed_chain_case"]

# The seed document's experiment: vocab 4, first-order chains, k = 4.
SEED_TARGET = [[0.55, 0.25, 0.15, 0.05], [0.10, 0.60, 0.20, 0.10], [0.15, 0.15, 0.55, 0.15], [0.25, 0.20, 0.15, 0.40]]
SEED_DRAFT = [[0.50, 0.28, 0.17, 0.05], [0.12, 0.55, 0.23, 0.10], [0.18, 0.14, 0.50, 0.18], [0.28, 0.18, 0.17, 0.37]]


def seed_chain_case(k: int = 4) -> ModelCase:
    """The seed document's order-1 chain model (start token 0)."""
    model = ChainModel(
        torch.tensor(SEED_TARGET, dtype=torch.float64), torch.tensor(SEED_DRAFT, dtype=torch.float64), (0,)
    )
    return ModelCase(model, k, label="seed-chain")


def random_laws(generator: torch.Generator, shape: tuple[int, ...], *, zeros: float = 0.0) -> torch.Tensor:
    """Random probability rows (Dirichlet(1)), a share ``zeros`` of entries set to 0."""
    weights = -torch.log(torch.rand(shape, generator=generator, dtype=torch.float64))
    if zeros:
        weights = weights * (torch.rand(shape, generator=generator, dtype=torch.float64) >= zeros)
        empty = weights.sum(-1, keepdim=True) == 0
        weights = torch.where(empty, torch.ones_like(weights), weights)
    return weights / weights.sum(-1, keepdim=True)


def random_step_batch(
    generator: torch.Generator, batch: int, k: int, vocab: int, *, zeros: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Independent random step inputs per row, drafts drawn from the draft rows."""
    target = random_laws(generator, (batch, k + 1, vocab), zeros=zeros)
    draft = random_laws(generator, (batch, k, vocab), zeros=zeros)
    drafts = torch.multinomial(draft.reshape(-1, vocab), 1, generator=generator).reshape(batch, k)
    return target, draft, drafts


def random_table_model(
    generator: torch.Generator, vocab: int, k: int, *, zeros: float = 0.0, label: str = "random"
) -> ModelCase:
    targets = tuple(random_laws(generator, (vocab**d, vocab), zeros=zeros) for d in range(k + 1))
    drafts = tuple(random_laws(generator, (vocab**d, vocab), zeros=zeros) for d in range(k))
    return ModelCase(TableModel(targets, drafts), k, label=label)
