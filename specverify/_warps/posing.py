"""Posing the battery's cases to a logits sampler whose law is its declared warp.

The logits layout poses each case's law ``p`` as logits and parameters whose warp is ``p``
(:func:`specverify._kinds.logits_posing.pose`): decoy tokens with real mass that the row's cuts remove
exactly.  That posing is built for transformers' convention; a sampler that declares another warp
must be posed so that *its* warp gives ``p``, or the battery would judge it by a law it never
promised.  :func:`pose_for` tries, row by row, the posings below and keeps the first whose declared
warp is ``p`` (checked, to :data:`TOLERANCE`):

1. the usual posing (cuts on the law after the temperature: transformers, vLLM, SGLang);
2. the temperature-last posing: cuts set on ``p ** T`` (the temperature-1 law of the logits
   ``T log p``), then divided by ``T`` (llama.cpp);
3. the usual posing with its ``top_k`` cut alone (the same set whatever the temperature's place);
4. no cuts at all: ``T log p`` with ``-inf`` where ``p`` is 0 (every convention's identity).

A sampler that declares no warp is posed so that *every* preset's warp gives ``p`` (the usual
posing where the presets agree, a posing with fewer cuts where they do not): it is judged by
transformers' law, and an engine's own convention is never taken for a fault.

A row no posing gives ``p`` for means the declared warp is not the identity with its cuts off:
the sampler's fault (:func:`~specverify._warps.declared.warp_fault`), reported as such.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import torch

from ..errors import SamplerFault
from .declared import DeclaredWarp, warp_fault
from .presets import PRESETS
from .rules import SamplingParams

__all__ = ["TOLERANCE", "pose_for"]

#: Largest difference between a posing's declared warp and the case's law that still poses it.
TOLERANCE = 1e-9
#: The layout's posing: ``(target_probs, parameters) -> (logits, params)``.
Posing = Callable[[torch.Tensor, Sequence[str]], tuple[torch.Tensor, SamplingParams]]
_CACHE: dict[tuple[object, ...], tuple[torch.Tensor, SamplingParams]] = {}
_CACHE_SIZE = 16
#: Cases larger than this (float64 elements, 16 MiB) are not kept: the cache stays under 256 MiB.
_CACHE_MAX_ELEMENTS = 1 << 21
_OFF = {"top_k": 0, "top_p": 1.0, "min_p": 0.0}
#: An odd 64-bit multiplier (the golden ratio's), as the int64 torch stores it: rows' bits to a hash.
_HASH = 0x9E3779B97F4A7C15 - (1 << 64)


def pose_for(
    target_probs: torch.Tensor,
    parameters: Sequence[str],
    oracle: DeclaredWarp,
    pose: Posing,
    *,
    period: int | None = None,
) -> tuple[torch.Tensor, SamplingParams]:
    """Logits ``[B, K+1, V]`` (float64) and per-row parameters whose *declared* warp is
    ``target_probs`` (each row over its sum); ``pose`` is the layout's usual posing
    (:func:`specverify._kinds.logits_posing.pose`, passed in: the layout builds on this module).

    ``period``: where given, ``pose`` reads a row's index only modulo ``period`` (and otherwise its
    content alone), so a batch that repeats its cases is posed once per distinct case and phase.

    Raises:
        SamplerFault: the declared warp raised, returned no law, or gives no row its case's law even
            with every cut off.
    """
    if oracle.declared and oracle.preset == "transformers":  # the usual posing is transformers' by construction
        return pose(target_probs, parameters)
    if period is not None and target_probs.shape[0] > 2 * period and (found := _cases(target_probs)) is not None:
        distinct, group = found
        batch = target_probs.shape[0]
        if distinct.shape[0] * period < batch:  # a statistical check's batch: a few cases, many rows each
            # row g * period + r: case g at phase r, the row's index modulo period as pose reads it
            # (float64: pose and the judges read the case in float64 first, so the posing is the same)
            layout = distinct.repeat_interleave(period, dim=0).reshape(-1, *target_probs.shape[1:])
            try:
                logits, params = pose_for(layout, parameters, oracle, pose)
            except SamplerFault:
                pass  # posed again below, row by row, so the fault names the batch's own row
            else:
                index = group * period + torch.arange(batch, device=group.device) % period
                return logits[index], params.select(index)
    if target_probs.numel() > _CACHE_MAX_ELEMENTS:  # production-sized cases: posed every time, never kept
        return _posed(target_probs, parameters, oracle, pose)
    key = (
        oracle.name,
        tuple(parameters),
        tuple(target_probs.shape),
        str(target_probs.dtype),
        hash(target_probs.detach().to(torch.float64).cpu().numpy().tobytes()),
    )
    if key not in _CACHE:  # a statistical check calls the sampler on one case many times
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = _posed(target_probs, parameters, oracle, pose)
    logits, params = _CACHE[key]
    return logits.to(target_probs.device).clone(), params.to(target_probs.device)


def _cases(target_probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The distinct rows of ``target_probs`` (float64, flattened) and each row's index among them,
    grouped by a hash of the row's bits and then checked equal to its group's first row (``None``
    on a collision); a tenth of ``torch.unique(dim=0)``'s time, which sorts the rows."""
    batch = target_probs.shape[0]
    flat = target_probs.reshape(batch, -1).to(torch.float64).contiguous()
    weights = torch.arange(flat.shape[1], dtype=torch.int64, device=flat.device) * 2 + 1
    key = (flat.view(torch.int64) * (weights * _HASH)).sum(dim=-1)  # wraps: a hash, checked below
    _, group = torch.unique(key, return_inverse=True)
    rows = torch.arange(batch, device=flat.device)
    first = torch.full((int(group.max()) + 1,), batch, device=flat.device).scatter_reduce(0, group, rows, "amin")
    distinct = flat[first]
    return (distinct, group) if torch.equal(distinct[group], flat) else None


def _posed(
    target_probs: torch.Tensor, parameters: Sequence[str], oracle: DeclaredWarp, pose: Posing
) -> tuple[torch.Tensor, SamplingParams]:
    logits, params = pose(target_probs, parameters)
    p = target_probs.to(torch.float64)
    p = p / p.sum(dim=-1, keepdim=True)
    candidates: list[Callable[[], tuple[torch.Tensor, SamplingParams]]] = [lambda: (logits, params)]
    if "temperature" in parameters and params.temperature is not None:
        temperature = params.temperature
        candidates.append(lambda: _temperature_last(p, parameters, temperature, pose))
    if params.top_k is not None and (params.top_p is not None or params.min_p is not None):
        candidates.append(lambda: _only_top_k(logits, params))
    candidates.append(lambda: _no_cuts(p, logits, params))
    # undeclared: a posing every preset maps to the case's law, so no engine's convention is a finding
    judges = [oracle] if oracle.declared else list(PRESETS.values())
    chosen_logits, chosen = logits.clone(), params
    left = torch.ones(p.shape[0], dtype=torch.bool, device=p.device)
    for make in candidates:  # each posing only for the rows the ones before did not fit
        candidate_logits, candidate = make()
        fits = left.clone()
        for judge in judges:
            fits &= (judge(candidate_logits, candidate) - p).abs().amax(dim=(-1, -2)) <= TOLERANCE
        chosen_logits = torch.where(fits[:, None, None], candidate_logits, chosen_logits)
        chosen = _where(fits, candidate, chosen)
        left &= ~fits
        if not bool(left.any()):
            break
    if bool(left.any()):
        row = int(left.nonzero()[0, 0])
        raise warp_fault(
            f"the declared warp {oracle.name} does not give row {row} its law even with every cut off (temperature "
            "only): it is not the identity where every cut is off"
        )
    return chosen_logits, chosen


def _temperature_last(
    p: torch.Tensor, parameters: Sequence[str], temperature: torch.Tensor, pose: Posing
) -> tuple[torch.Tensor, SamplingParams]:
    """The cuts set on the temperature-1 law ``p ** T`` (renormalised), the temperature divided last."""
    t = torch.where(temperature == 0, 1.0, temperature).to(p.dtype)[:, None, None]
    q = torch.where(p > 0, p.clamp_min(1e-300).log() * t, -torch.inf).softmax(dim=-1)
    logits, cuts = pose(q, [name for name in parameters if name != "temperature"])
    return logits, dataclasses.replace(cuts, temperature=temperature)


def _no_cuts(p: torch.Tensor, logits: torch.Tensor, params: SamplingParams) -> tuple[torch.Tensor, SamplingParams]:
    """The case's law as tempered logits with every cut off (greedy rows as the usual posing has them)."""
    t = params.temperature if params.temperature is not None else torch.ones(p.shape[0], dtype=torch.float64)
    scale = torch.where(t == 0, 1.0, t).to(p.dtype)[:, None, None]
    plain = torch.where(p > 0, p.clamp_min(1e-300).log() * scale, -torch.inf)
    greedy = (t == 0)[:, None, None]
    off = {
        name: torch.full_like(getattr(params, name), _OFF[name]) for name in _OFF if getattr(params, name) is not None
    }
    return torch.where(greedy, logits, plain), dataclasses.replace(params, **off)


def _only_top_k(logits: torch.Tensor, params: SamplingParams) -> tuple[torch.Tensor, SamplingParams]:
    """The usual posing with only its ``top_k`` cut: the same set whichever the temperature's place."""
    off = {
        name: torch.full_like(getattr(params, name), _OFF[name])
        for name in ("top_p", "min_p")
        if getattr(params, name) is not None
    }
    return logits, dataclasses.replace(params, **off)


def _where(rows: torch.Tensor, first: SamplingParams, second: SamplingParams) -> SamplingParams:
    """Per row, ``first``'s parameters where ``rows``, else ``second``'s (the same names set)."""
    values = {}
    for name in first.given:
        values[name] = torch.where(rows, getattr(first, name), getattr(second, name))
    return dataclasses.replace(second, **values)
