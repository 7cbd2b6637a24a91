"""The logits kind: the chain contract posed to a logits-level sampler (``Capabilities(inputs="logits")``).

Each case is posed as logits and per-row sampling parameters whose warp is the case's law
(:mod:`specverify._kinds.logits_posing`); outputs, outcomes and the exact law are the chain's, and so
are the battery and the worker verb.  A failure shows the warped and the raw laws side by side.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

from .._contract import capabilities_of
from .._record.evidence import Warps
from .._record.info import RunInfo
from .._warps.separating import warp_record
from .chain import ChainKind, ChainLayout
from .logits_posing import PosedSampler, warps_evidence

__all__ = ["LogitsKind", "LogitsLayout"]


@dataclasses.dataclass(frozen=True)
class LogitsLayout(ChainLayout):
    """The chain posed to a logits-level sampler: each row as logits and values of the sampling
    ``parameters`` named, whose warp is the row's law (:func:`specverify._kinds.logits_posing.pose`).

    Outputs, outcomes and laws are the chain's: the law to preserve is the case's, whatever the
    posing, so a sampler that mishandles a warp emits outcomes the chain's law forbids or weighs
    otherwise.
    """

    name: ClassVar[str] = "logits"
    parameters: tuple[str, ...] = ("temperature",)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parameters", tuple(self.parameters))  # any sequence of names

    def posed(self, sampler: Callable[..., Any]) -> Callable[..., Any]:
        return sampler if isinstance(sampler, PosedSampler) else PosedSampler(sampler, self.parameters)


@dataclasses.dataclass(frozen=True)
class LogitsKind(ChainKind):
    """A logits-level sampler honouring the sampling ``params`` it declares."""

    name: ClassVar[str] = "logits"
    #: The value of ``Capabilities.inputs`` that declares this kind.
    declared: ClassVar[str] = "logits"
    signature: ClassVar[str] = (
        "sampler(target_logits, draft_probs, draft_tokens, generator, params) -> (tokens, num_accepted)"
    )
    contract_doc: ClassVar[str] = "docs/loops.md"
    called_as: ClassVar[str] = "a logits sampler"
    params: tuple[str, ...] = ("temperature",)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(self.params))

    @classmethod
    def declares(cls, sampler: Any) -> bool:
        return capabilities_of(sampler).inputs == cls.declared

    @classmethod
    def of(cls, sampler: Any) -> LogitsKind:
        return cls(capabilities_of(sampler).params)

    def describe(self, record: RunInfo, subject: Any) -> None:
        """As the chain's, with the warp its cases were posed by and how it differs from each other
        preset (informative)."""
        super().describe(record, subject)
        if getattr(subject, "warp", None) is not None:
            record.extra["warp"] = warp_record(subject.warp)

    @property
    def layout(self) -> LogitsLayout:
        return LogitsLayout(self.params)

    @property
    def seeds(self) -> bool:
        return "seeds" in self.params

    def warps(self, example: Any, row: int | None, message: str, warp: Any = None) -> Warps | None:
        return warps_evidence(example, self.params, row, message, warp)
