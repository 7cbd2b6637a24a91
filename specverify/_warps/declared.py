"""The warp a sampler declares: the oracle its exact, target and loop laws come from.

A logits sampler or a generation loop states its engine's own non-speculative warp, like its
``name`` and ``capabilities``, as a ``warp`` attribute (``specverify.sampler(warp=...)``,
``specverify.loop(warp=...)``): a preset's name (:data:`specverify._warps.presets.PRESETS`) or a callable
``(logits, params) -> probabilities``.  Speculation must preserve that law, whatever it is; a
sampler that declares nothing is judged by transformers' convention, and its run says so.

A declared callable is the sampler's own code: when it raises or returns rows that are not
probabilities, that is the sampler's fault (:func:`warp_fault`, a failing check), never the
harness's.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import torch

from .._record.evidence import DeclaredWarpRecord
from ..errors import SamplerFault, Violation
from .findings import DEFAULT_PRESET
from .presets import PRESETS, WarpFunction, preset
from .rules import SamplingParams

__all__ = [
    "DEFAULT_PRESET",
    "DeclaredWarp",
    "declared_warp",
    "from_reference",
    "resolve_warp",
    "warp_fault",
    "warp_reference",
]

#: How far a declared warp's row may sum from 1 and still be a law.
SUM_TOLERANCE = 1e-6


def warp_fault(message: str) -> SamplerFault:
    """The declared warp raised or returned something that is not a law: the sampler's fault
    (evidence against it, rule ``"warp"``), never the harness's."""
    return SamplerFault(Violation("warp", message))


@dataclasses.dataclass(frozen=True)
class DeclaredWarp:
    """The warp a run judges by: its name, whether the sampler declared it, and the function."""

    name: str
    declared: bool
    function: WarpFunction
    preset: str | None = None

    def __call__(self, logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
        """The declared warp's law, checked: a :class:`~specverify.errors.SamplerFault` (rule ``warp``) where it is not
        one."""
        if self.preset is not None:
            return self.function(logits, params)
        try:
            law = self.function(logits, params)
        except Exception as exc:  # the sampler's own code: anything it raises is evidence
            text = str(exc).strip().splitlines()
            raise warp_fault(
                f"the declared warp {self.name} raised {type(exc).__name__}: {text[0] if text else '(no message)'}"
            ) from exc
        if not isinstance(law, torch.Tensor) or tuple(law.shape) != tuple(logits.shape):
            shape = tuple(law.shape) if isinstance(law, torch.Tensor) else type(law).__name__
            raise warp_fault(
                f"the declared warp {self.name} returned {shape}, expected probabilities of shape {tuple(logits.shape)}"
            )
        law = law.to(torch.float64)
        bad = ~torch.isfinite(law).all(-1) | (law < 0).any(-1) | ((law.sum(-1) - 1).abs() > SUM_TOLERANCE)
        if bool(bad.any()):
            where = tuple(int(i) for i in bad.nonzero()[0])
            raise warp_fault(
                f"the declared warp {self.name} returned a row that is not probabilities at {where}: "
                f"{law[where].tolist()}"
            )
        return law

    def describe(self) -> DeclaredWarpRecord:
        """What a run records of the warp it judged by."""
        return {"name": self.name, "declared": self.declared, "preset": self.preset}

    @property
    def statement(self) -> str:
        """One line for the output: which law the sampler was judged by."""
        if self.declared:
            return (
                f"judged by its declared warp {self.name!r}"
                if self.preset
                else f"judged by its declared warp {self.name}"
            )
        return (
            f"judged by the {DEFAULT_PRESET} preset's warp (no warp declared: declare warp= one of "
            f"{', '.join(PRESETS)} or a callable)"
        )


def resolve_warp(value: Any) -> DeclaredWarp:
    """A declared ``warp`` value as a :class:`DeclaredWarp`; ``None`` is the undeclared default.

    Raises:
        ValueError: an unknown preset name, or a value that is neither a name nor a callable.
    """
    if value is None:
        return DeclaredWarp(DEFAULT_PRESET, False, PRESETS[DEFAULT_PRESET], DEFAULT_PRESET)
    if isinstance(value, DeclaredWarp):
        return value
    if isinstance(value, str):
        return DeclaredWarp(value, True, preset(value), value)
    if callable(value):
        name = getattr(value, "__qualname__", None) or type(value).__qualname__
        return DeclaredWarp(f"{getattr(value, '__module__', '?')}.{name}", True, value)
    raise ValueError(
        f"warp= takes a preset name ({', '.join(map(repr, PRESETS))}) or a callable (logits, params) -> probabilities, "
        f"not a {type(value).__name__}"
    )


def declared_warp(sampler: Any) -> DeclaredWarp:
    """The warp ``sampler`` declares (its ``warp`` attribute), or the undeclared default."""
    return resolve_warp(getattr(sampler, "warp", None))


def warp_reference(sampler: Any, *, strict: bool = True) -> str | tuple[str, str] | None:
    """How a worker process tells the harness its sampler's warp: a preset's name, a callable's
    ``(module, qualified name)``, or ``None`` (undeclared).

    Raises:
        ValueError: (``strict``) the warp is a callable the harness cannot import by name (a lambda
            or a local function): it cannot judge by it from another process.  Not ``strict``
            (where the harness only shows it), such a warp is ``None``.
    """
    value = getattr(sampler, "warp", None)
    if isinstance(value, DeclaredWarp):  # a posed sampler carries its sampler's, resolved
        value = (value.preset if value.declared else None) if value.preset is not None else value.function
    if value is None or isinstance(value, str):
        if isinstance(value, str):
            preset(value)
        return value
    resolved = resolve_warp(value)
    module, name = getattr(value, "__module__", None), getattr(value, "__qualname__", "")
    if not module or "<" in name or _imported(module, name) is not value:
        if not strict:
            return None
        raise ValueError(
            f"the declared warp {resolved.name} is not importable by name, so an isolated run cannot judge by it: make "
            "it a module-level function, or run in-process"
        )
    return (module, name)


def from_reference(reference: str | tuple[str, str] | list[str] | None) -> DeclaredWarp:
    """The :class:`DeclaredWarp` a worker's :func:`warp_reference` names."""
    if reference is None or isinstance(reference, str):
        return resolve_warp(reference)
    module, name = reference
    value = _imported(module, name)
    if value is None:
        raise ValueError(f"the declared warp {module}.{name} cannot be imported in the harness's process")
    return resolve_warp(value)


def _imported(module: str, name: str) -> Any:
    try:
        value: Any = importlib.import_module(module)
        for part in name.split("."):
            value = getattr(value, part)
    except Exception:  # noqa: BLE001 - not importable by name, for whatever reason
        return None
    return value
