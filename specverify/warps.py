"""Engine warps: each engine's own law of logits and sampling parameters, and where they differ.

A logits sampler or a generation loop declares its engine's warp (``warp="vllm"`` on
``specverify.sampler`` or ``specverify.loop``, or its own callable ``(logits, params) ->
probabilities``): the law speculation must preserve.  :data:`PRESETS` are the engines' conventions
as data (:class:`Convention`, each a vectorised warp); :data:`SEPARATING_CASES` the logits and
parameters where they differ, :func:`tv_on_cases` and :func:`differences` how far two warps are
apart there.  Import it as ``from specverify import warps``; it imports torch.
"""

from __future__ import annotations

from ._warps.declared import DEFAULT_PRESET
from ._warps.presets import PRESETS, Convention, WarpFunction, preset
from ._warps.separating import SEPARATING_CASES, Difference, SeparatingCase, differences, separating_chain, tv_on_cases

__all__ = [
    "Convention",
    "DEFAULT_PRESET",
    "Difference",
    "PRESETS",
    "SEPARATING_CASES",
    "SeparatingCase",
    "WarpFunction",
    "differences",
    "preset",
    "separating_chain",
    "tv_on_cases",
]
