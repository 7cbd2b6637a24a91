"""Where a loop check's generations are made and counted: the units its rows are cut into, the
counts that travel back instead of tokens, and how a loop check reads the run's context
(:class:`LoopContext`, :meth:`LoopContext.of`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any

import numpy as np
import torch

from .._calling.pool import Pool, SerialPool, unit_seed, unit_spans
from .._history.posing import posed_params
from .._kinds import LoopInputs, LoopLayout
from .._loop import MarkovLM
from .._seeds import derive_seed
from .._warps.declared import DeclaredWarp, declared_warp
from .._warps.rules import PARAMETERS, SamplingParams
from ..errors import SamplerFault
from ._base import Context

__all__ = ["LoopContext", "LoopTally", "LoopUnit", "generate", "loop_parameters", "tally_generations"]


def loop_parameters(loop: Any) -> tuple[str, ...]:
    """The sampling parameters a loop declares it honours (attribute ``parameters``; default
    ``("temperature",)``)."""
    declared = tuple(getattr(loop, "parameters", ("temperature",)))
    unknown = set(declared) - set(PARAMETERS)
    if unknown:
        raise ValueError(f"{loop!r} declares unknown sampling parameters {sorted(unknown)}; known: {PARAMETERS}")
    return declared


@dataclasses.dataclass(frozen=True)
class LoopTally:
    """How a unit's generations are counted where the loop runs, so counts travel back, not
    tokens (a law check at ``--tv 0.001`` makes 10^8 generations): whole sequences, by row group
    (row ``start + i`` of the experiment is in group ``(start + i) % groups``), or each position's
    pair of adjacent tokens.  ``law`` is what a conforming loop's counts follow (one row a group
    or a position): the plan's rehearsal draws from it instead of generating."""

    vocab: int
    pairs: bool
    law: np.ndarray
    groups: int = 1
    start: int = 0

    def count(self, out: torch.Tensor) -> np.ndarray:
        """``[groups, vocab**length]`` sequence counts, or ``[length - 1, vocab**2]`` pair counts."""
        rows, length = out.shape
        tokens = out.numpy()
        if self.pairs:
            cells = self.vocab * self.vocab
            index = np.arange(length - 1) * cells + tokens[:, :-1] * self.vocab + tokens[:, 1:]
            return np.bincount(index.reshape(-1), minlength=(length - 1) * cells).reshape(length - 1, cells)
        cells = self.vocab**length
        code = tokens @ (self.vocab ** np.arange(length - 1, -1, -1, dtype=np.int64))
        group = (self.start + np.arange(rows)) % self.groups
        return np.bincount(group * cells + code, minlength=self.groups * cells).reshape(self.groups, cells)


@dataclasses.dataclass(frozen=True)
class LoopUnit:
    """Rows of one generation experiment, their generator seeded ``seed`` (:mod:`specverify._calling.pool`);
    ``tally``: how :func:`tally_generations` counts them (``None``: their tokens come back)."""

    target: MarkovLM
    draft: MarkovLM
    prompt: torch.Tensor
    num_tokens: int
    params: SamplingParams
    seed: int
    tally: LoopTally | None = None


def generate(loop: Any, unit: LoopUnit) -> torch.Tensor:
    """Call the loop on a unit's rows; audit the output's structure."""
    out = loop(
        unit.target, unit.draft, unit.prompt, unit.num_tokens, unit.params, torch.Generator().manual_seed(unit.seed)
    )
    violations = LoopLayout().audit(
        LoopInputs(unit.target, unit.prompt, unit.num_tokens, unit.params), out, first_only=True
    )
    if violations:
        raise SamplerFault(violations[0])
    return out.cpu()


def tally_generations(loop: Any, unit: LoopUnit) -> np.ndarray:
    """Generate a unit's rows and count them by its :class:`LoopTally`."""
    assert unit.tally is not None, "a tallied unit carries its tally"
    return unit.tally.count(generate(loop, unit))


@dataclasses.dataclass
class LoopContext:
    """The run's context as a loop check reads it (:meth:`of`): the loop, the budget's numbers,
    its seed and alpha share, and the workers its generations are spread over (``None``: the
    loop alone)."""

    loop: Callable[..., torch.Tensor]
    tv: float
    power: float
    max_samples: int
    seed: int
    alpha: float
    pool: Pool | None = None
    cap_per_decision: bool = False  # a --tv budget's: max_samples caps each group, not their sum

    @classmethod
    def of(cls, ctx: Context | LoopContext) -> LoopContext:
        """The loop family's view of the context every check is given (itself, where a test
        builds one directly)."""
        if isinstance(ctx, LoopContext):
            return ctx
        budget = ctx.budget
        return cls(
            ctx.sut, budget.tv, budget.power, budget.max_samples, ctx.seed, ctx.alpha, ctx.pool, budget.cap_per_decision
        )

    def seed_for(self, *parts: object) -> int:
        return derive_seed(self.seed, *parts)

    @property
    def oracle(self) -> DeclaredWarp:
        """The warp the loop declares (its engine's own law), or transformers' when it declares none."""
        return declared_warp(self.loop)

    def run(
        self,
        target: MarkovLM,
        draft: MarkovLM,
        prompt: torch.Tensor,
        num_tokens: int,
        params: SamplingParams,
        seed: int,
    ) -> torch.Tensor:
        """Call the loop with only the parameters it declares, its rows cut into units (each
        seeded from ``seed`` and its index) run on the run's workers; audit each output's structure."""
        given = params.only(loop_parameters(self.loop))
        spans = unit_spans(prompt.shape[0])
        units = (
            LoopUnit(
                target,
                draft,
                prompt[a:b],
                num_tokens,
                given if len(spans) == 1 else given.select(slice(a, b)),
                unit_seed(seed, i),
            )
            for i, a, b in spans
        )
        return torch.cat([done.result for done in self._pool.map(generate, units)])

    def tally(
        self,
        target: MarkovLM,
        draft: MarkovLM,
        prompt: torch.Tensor,
        rows: int,
        num_tokens: int,
        groups: list[dict[str, float]],
        seed: int,
        tally: LoopTally,
    ) -> np.ndarray:
        """``rows`` generations from one ``prompt`` row, row ``r`` sampled with ``groups[r % len(groups)]``,
        in units as :meth:`run`'s, each counted by ``tally`` where the loop runs; the counts summed
        (the same for any split over workers).  No tensor of all the rows is ever made."""
        with contextlib.closing(
            self.tally_phases(target, draft, prompt, [(rows, seed)], num_tokens, groups, tally)
        ) as phases:
            return next(phases)

    def tally_phases(
        self,
        target: MarkovLM,
        draft: MarkovLM,
        prompt: torch.Tensor,
        phases: Sequence[tuple[int, int]],
        num_tokens: int,
        groups: list[dict[str, float]],
        tally: LoopTally,
    ) -> Generator[np.ndarray, None, None]:
        """The counts of each phase ``(rows, seed)`` of one experiment in turn, each as :meth:`tally`
        counts it alone, from one stream of units: the workers start the next phase's units while
        this phase's last ones land and the caller looks at its counts, so a phase's end idles no
        worker.  Closing the iterator early drops the units not yet started."""
        names = loop_parameters(self.loop)
        spans = [unit_spans(rows) for rows, _ in phases]

        def units() -> Iterator[LoopUnit]:
            for (_, seed), cut in zip(phases, spans):
                for i, a, b in cut:
                    params = _params(groups, torch.arange(a, b) % len(groups), names)
                    yield LoopUnit(
                        target,
                        draft,
                        prompt.expand(b - a, -1),
                        num_tokens,
                        params,
                        unit_seed(seed, i),
                        dataclasses.replace(tally, start=a),
                    )

        with contextlib.closing(self._pool.map(tally_generations, units())) as landed:
            for cut in spans:
                yield sum(
                    (done.result for done in itertools.islice(landed, len(cut))),
                    np.zeros_like(tally.law, dtype=np.int64),
                )

    @property
    def _pool(self) -> Pool:
        return self.pool if self.pool is not None else SerialPool(self.loop)


def _chain(seed: int, vocab: int, order: int = 1, scale: float = 1.5) -> MarkovLM:
    g = torch.Generator().manual_seed(seed)
    return MarkovLM(torch.randn(vocab**order, vocab, generator=g, dtype=torch.float64) * scale, context=(0,) * order)


def _params(groups: list[dict[str, float]], which: torch.Tensor, names: tuple[str, ...]) -> SamplingParams:
    return posed_params(groups, which, names)


def _needs(groups: list[dict[str, float]]) -> set[str]:
    return {name for group in groups for name in group}
