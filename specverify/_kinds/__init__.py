"""The kinds of sampler, and the one place a sampler's kind is decided.

A sampler declares what it is: ``contract = "tree"`` (a tree sampler, with its ``algorithm``),
``contract = "loop"`` (a generation loop, with its ``parameters``), ``Capabilities(inputs="logits")``
(a logits-level sampler, with its ``params``), or nothing (the chain contract).  :func:`kind_of`
reads those declarations, once, when the sampler is loaded, into a :class:`Kind`; everything that
differs by kind (how a case is posed, how an output is audited and coded, which exact law applies,
which battery runs, which worker verb serves it) is then asked of that object:

* :mod:`~specverify._kinds.chain`: :class:`ChainKind`, :class:`ChainLayout`;
* :mod:`~specverify._kinds.logits`: :class:`LogitsKind`, :class:`LogitsLayout`;
* :mod:`~specverify._kinds.tree`: :class:`TreeKind`, :class:`TreeLayout`;
* :mod:`~specverify._kinds.loop`: :class:`LoopKind`, :class:`LoopLayout`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._contract import capabilities_of, resolve_sampler
from .._layout import StepLayout
from ._base import Kind
from .chain import ChainKind, ChainLayout
from .logits import LogitsKind, LogitsLayout
from .loop import LoopInputs, LoopKind, LoopLayout
from .tree import TreeKind, TreeLayout

__all__ = [
    "ChainKind",
    "ChainLayout",
    "Kind",
    "LogitsKind",
    "LogitsLayout",
    "LoopInputs",
    "LoopKind",
    "LoopLayout",
    "TreeKind",
    "TreeLayout",
    "kind_of",
    "layout_of",
    "load_sampler",
]


def kind_of(sampler: Any) -> Kind:
    """The kind of a sampler, from what it declares (or of anything that holds its kind already: a
    sampler under test).  The only reading of the declarations in the package."""
    held = getattr(sampler, "kind", None)
    if isinstance(held, Kind):
        return held
    contract = getattr(sampler, "contract", None)
    if contract == LoopKind.declared:
        return LoopKind(tuple(getattr(sampler, "parameters", ("temperature",))))
    if contract == TreeKind.declared:
        return TreeKind(getattr(sampler, "algorithm", None))
    capabilities = capabilities_of(sampler)
    if capabilities.inputs == LogitsKind.declared:
        return LogitsKind(capabilities.params)
    return ChainKind()


def layout_of(sampler: Any) -> StepLayout[Any]:
    """The layout of a sampler's kind (:attr:`Kind.layout`)."""
    return kind_of(sampler).layout


def load_sampler(spec: str) -> Callable[..., Any]:
    """Resolve ``"package.module:attribute"`` to a sampler (:func:`specverify._contract.resolve_sampler`),
    posed as the harness calls it (:meth:`Kind.posed`: a logits sampler on probabilities).

    Raises:
        SamplerSpecError: with a one-line message, whatever failed.
    """
    sampler = resolve_sampler(spec)
    return kind_of(sampler).posed(sampler)
