"""Cases that separate engines' warps, and how far two warps are apart on them.

Away from ties and boundaries most presets agree; these cases sit where they do not: ties at the
``k``-th logit, mass exactly at the ``top_p`` boundary, temperature with ``top_p`` (temperature
first or last), ``min_p`` with ``top_k`` (which cut sees which law).  Each is one logits row and one
set of parameters, exact in binary floating point where a boundary matters (uniform rows of 4
tokens have masses 0.25, 0.5, 0.75 exactly).  :func:`differences` measures a warp against every
preset on them: the TV and the first case that separates the two, the finding "this warp differs
from preset X", which is informative and never a verdict on speculation.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import torch

from .._loop import MarkovLM
from .._record.evidence import WarpDifference
from ..errors import SamplerFault
from .presets import PRESETS, WarpFunction
from .rules import SamplingParams

if TYPE_CHECKING:
    from .declared import DeclaredWarp

__all__ = [
    "SEPARATING_CASES",
    "SEPARATING_GROUPS",
    "Difference",
    "SeparatingCase",
    "differences",
    "separating_chain",
    "tv_on_cases",
    "warp_record",
]


@dataclasses.dataclass(frozen=True)
class SeparatingCase:
    """One logits row and its parameters, and what about it separates conventions."""

    name: str
    logits: tuple[float, ...]
    params: tuple[tuple[str, float], ...]

    def tensors(self) -> tuple[torch.Tensor, SamplingParams]:
        """``logits [1, V]`` and one row of parameters."""
        columns = {
            name: torch.tensor([value], dtype=torch.int64 if name == "top_k" else torch.float64)
            for name, value in self.params
        }
        return torch.tensor([self.logits], dtype=torch.float64), SamplingParams(**columns)

    @property
    def text(self) -> str:
        values = ", ".join(f"{name}={value:g}" for name, value in self.params)
        return f"{self.name}: logits {list(self.logits)}, {values}"


#: The rows of the loop family's separating chain (order 1 over 4 tokens): ties, exact boundaries.
CHAIN_ROWS: tuple[tuple[float, ...], ...] = (
    (0.0, 0.0, 0.0, 0.0),
    (2.0, 1.0, 0.0, -1.0),
    (1.0, 0.0, 0.0, -1.0),
    (0.5, 0.5, -0.5, -2.0),
)
#: Parameter groups of the loop family's ``law[separating]`` check, one for each kind of difference.
SEPARATING_GROUPS: list[dict[str, float]] = [
    {"top_k": 2},
    {"top_p": 0.5},
    {"temperature": 1.6, "top_p": 0.8},
    {"temperature": 0.7, "top_k": 3, "min_p": 0.3},
    {"top_p": 0.9, "min_p": 0.1},
]

SEPARATING_CASES: tuple[SeparatingCase, ...] = (
    SeparatingCase("ties at the k-th logit", CHAIN_ROWS[0], (("top_k", 2),)),
    SeparatingCase("ties at the k-th logit, after others", CHAIN_ROWS[2], (("top_k", 2),)),
    SeparatingCase("mass exactly at the top-p boundary", CHAIN_ROWS[0], (("top_p", 0.5),)),
    SeparatingCase("temperature with top-p", CHAIN_ROWS[1], (("temperature", 1.6), ("top_p", 0.8))),
    SeparatingCase(
        "min-p with top-k and temperature", CHAIN_ROWS[1], (("temperature", 0.7), ("top_k", 3), ("min_p", 0.3))
    ),
    SeparatingCase("min-p before or after top-p", CHAIN_ROWS[1], (("top_p", 0.9), ("min_p", 0.1))),
    SeparatingCase("top-p on the mass left by top-k", CHAIN_ROWS[1], (("top_k", 2), ("top_p", 0.7))),
)


def separating_chain() -> MarkovLM:
    """The order-1 chain over 4 tokens whose rows are :data:`CHAIN_ROWS`."""
    return MarkovLM(torch.tensor(CHAIN_ROWS, dtype=torch.float64), context=(0,))


def tv_on_cases(first: WarpFunction, second: WarpFunction) -> list[float]:
    """The TV between two warps' laws on each separating case."""
    tvs = []
    for case in SEPARATING_CASES:
        logits, params = case.tensors()
        tvs.append(0.5 * float((first(logits, params) - second(logits, params)).abs().sum()))
    return tvs


@dataclasses.dataclass(frozen=True)
class Difference:
    """How far a warp is from one preset: the largest TV and the first case that separates them."""

    preset: str
    tv: float
    case: str | None

    def to_json(self) -> WarpDifference:
        return {"preset": self.preset, "tv": self.tv, "case": self.case}

    @property
    def text(self) -> str:
        if self.case is None:
            return f"the same law as preset {self.preset!r} on every separating case"
        return f"differs from preset {self.preset!r} by TV {self.tv:.3g} (first at {self.case})"


def differences(warp: WarpFunction, *, tolerance: float = 1e-9) -> list[Difference]:
    """``warp`` against every preset, on the separating cases."""
    found = []
    for name, convention in PRESETS.items():
        tvs = tv_on_cases(warp, convention)
        first = next((i for i, tv in enumerate(tvs) if tv > tolerance), None)
        found.append(Difference(name, max(tvs), None if first is None else SEPARATING_CASES[first].text))
    return found


def warp_record(oracle: DeclaredWarp) -> dict[str, Any]:
    """What a run records of the warp it judged by: which it is, and how it differs from each
    other preset on the separating cases (a declared callable that raises there: ``fault``)."""
    try:
        found: list[Any] | None = [d.to_json() for d in differences(oracle) if d.preset != oracle.preset]
    except SamplerFault as fault:  # the checks that called the warp report it as the sampler's fault
        return {**oracle.describe(), "differences": None, "fault": str(fault)}
    return {**oracle.describe(), "differences": found}
