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
* :mod:`~specverify._kinds.loop`: :class:`LoopKind`, :class:`LoopLayout`;
* :mod:`~specverify._kinds.engine`: :class:`EngineKind`, :class:`EngineLayout` (an engine's ``generate()``).

Adding a kind is one module here (its :class:`Kind`, its layout and, for a subject called as
itself, how a call travels to its process and is served there: :meth:`Kind.request`,
:meth:`Kind.serve`), one entry in :data:`KINDS`, and its checks (a battery of
``specverify.checks.BATTERIES`` under the kind's :attr:`Kind.battery`): the engine kind was built so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._contract import resolve_sampler
from .._layout import StepLayout
from ..errors import SamplerSpecError
from ._base import Kind
from .chain import ChainKind, ChainLayout
from .engine import EngineInputs, EngineKind, EngineLayout
from .logits import LogitsKind, LogitsLayout
from .loop import LoopInputs, LoopKind, LoopLayout
from .tree import TreeKind, TreeLayout

__all__ = [
    "KINDS",
    "ChainKind",
    "ChainLayout",
    "EngineInputs",
    "EngineKind",
    "EngineLayout",
    "Kind",
    "LogitsKind",
    "LogitsLayout",
    "LoopInputs",
    "LoopKind",
    "LoopLayout",
    "TreeKind",
    "TreeLayout",
    "kind_as_given",
    "kind_named",
    "kind_of",
    "layout_of",
    "load_sampler",
]


#: Every kind, in the order a sampler's declarations are read: the first that the sampler declares
#: is its kind (the chain kind, last, is declared by anything).
KINDS: tuple[type[Kind], ...] = (LoopKind, EngineKind, TreeKind, LogitsKind, ChainKind)


def kind_of(sampler: Any) -> Kind:
    """The kind of a sampler, from what it declares (or of anything that holds its kind already: a
    sampler under test).  The only reading of the declarations in the package."""
    held = getattr(sampler, "kind", None)
    if isinstance(held, Kind):
        return held
    return next(kind for kind in KINDS if kind.declares(sampler)).of(sampler)


def kind_named(name: str) -> type[Kind]:
    """The kind a command names (``specverify loop``: ``"loop"``).

    Raises:
        ValueError: no kind of that name.
    """
    for kind in KINDS:
        if kind.name == name:
            return kind
    raise ValueError(f"kind must be one of {[k.name for k in KINDS]} or None, not {name!r}")


def kind_as_given(sampler: Any, named: str | Kind | None, *, declared: Kind | None = None, spec: Any = None) -> Kind:
    """The kind of a sampler given to the harness, decided once: what it declares (``declared``,
    where its own process read it; else :func:`kind_of`), unless a command names another
    (``named``: a kind's name, or the kind decided already).  A callable given as a kind it does
    not declare is taken for one (with what it declares of it); a sampler loaded by name
    (``spec``) must declare it.

    Raises:
        SamplerSpecError: a sampler loaded by name that declares another kind than the one named.
    """
    found = declared if declared is not None else kind_of(sampler)
    if named is None:
        return found
    wanted = type(named) if isinstance(named, Kind) else kind_named(named)
    if isinstance(found, wanted):
        return found
    if spec is not None:
        raise SamplerSpecError(wanted.undeclared.format(spec=spec, name=wanted.name))
    return named if isinstance(named, Kind) else wanted.of(sampler)


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
