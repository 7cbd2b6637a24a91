"""What differs from one kind of sampler to the next, in one protocol (:class:`Kind`)."""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, ClassVar

from .._contract import name_of
from .._evidence import Warps
from .._layout import StepLayout

__all__ = ["Kind"]


class Kind(abc.ABC):
    """One kind of sampler (chain, logits, tree, loop): everything the harness does differently for it.

    A kind is detected once, when the sampler is loaded (:func:`specverify._kinds.kind_of`), from
    what the sampler declares; the rest of the package asks it, never the declarations:

    * :attr:`layout`: how a case is posed to the sampler, how an output is audited and coded as an
      outcome, and which exact law the outcomes have (:class:`~specverify._layout.StepLayout`);
    * :attr:`battery`: the battery it is put through (``specverify.checks._plan`` maps the name);
    * :attr:`verb`: the worker verb its calls travel with (:mod:`specverify._worker.wire`);
    * :attr:`contract`: what a run's record says of it (``run["contract"]``; ``None``: nothing,
      the chain contract being the default);
    * :attr:`generation`: whether the subject is a whole generation loop (called on models, not
      on step inputs: the loop family's checks drive it).

    Kinds are frozen values: two kinds are equal when they declare the same; they travel from the
    sampler's process to the harness pickled.
    """

    name: ClassVar[str]
    battery: ClassVar[str]
    verb: ClassVar[str]
    contract: ClassVar[str | None] = None
    generation: ClassVar[bool] = False

    @property
    @abc.abstractmethod
    def layout(self) -> StepLayout[Any]:
        """How a case is posed, an output audited and coded, and the outcomes' exact law."""

    def posed(self, sampler: Callable[..., Any]) -> Callable[..., Any]:
        """The sampler as the harness calls it (already posed: itself)."""
        return self.layout.posed(sampler)

    def name_of(self, sampler: Callable[..., Any]) -> str:
        """The name a sampler loaded in this process is shown by (:func:`specverify._contract.name_of`)."""
        return name_of(sampler)

    def describe(self, sampler: dict[str, Any]) -> None:
        """Add what this kind records of the sampler to ``run["sampler"]`` (nothing by default)."""

    @property
    def seeds(self) -> bool:
        """Whether the sampler takes per-request seeds (the ``seeds`` family runs on it)."""
        return False

    def warps(self, example: Any, row: int | None, message: str, warp: Any = None) -> Warps | None:
        """The failing case as the sampler saw it, where it was posed otherwise than as given
        (a logits sampler's warps, posed by its declared ``warp``); ``None`` for a kind given its
        cases as they are."""
        return None
