"""The zoo's logits-level members: a warp applied to one side only or twice, and per-request seeds
handled wrong.  Registered in :data:`~specverify.zoo._members.MEMBERS` after the step members (the
zoo imports this module before it lists them), in declaration order.
"""

from __future__ import annotations

import torch

from .._contract import Capabilities
from ._core import uniforms
from ._members import member

__all__: list[str] = []


# --- logits-level samplers (issue 18): a warp applied to one side only, or twice ---------------
# Each takes (target_logits, draft_probs, draft_tokens, generator, params) and must preserve
# specverify.laws.warp(target_logits, params); the battery poses its cases as logits and parameters
# (specverify._kinds.logits_posing), with decoy tokens only the row's cuts remove and greedy one-hot
# rows, so each of these emits tokens of target probability 0. Declared at standard with the
# family that catches them first (support), which keeps their CI test to that family: posing a
# whole quick battery as logits costs minutes on a CPU (full sorts at V = 65k for the cuts).
# The logits reference itself (specverify.samplers:logits_reference) is the conformant one.

_WARPS = ("temperature", "top_k", "top_p", "min_p")
_LOGITS = Capabilities(inputs="logits", params=_WARPS, dtypes=(torch.float64, torch.float32))


def _logits_step(logits, d, y, g, params, target_law):
    from .._laws.oracle import canonical_emit
    from .._warps.rules import warp

    u = uniforms(y.shape[0], y.shape[1], g, logits.device)
    return canonical_emit(target_law(logits, params, warp), d, y, u)


@member(
    "non-conformant",
    ("support",),
    "standard",
    "The target verified at temperature 1: the row's temperature reaches only the draft (vLLM PR #10198); a greedy row "
    "samples.",
    _LOGITS,
)
def logits_target_temperature_ignored(t, d, y, g, params):
    return _logits_step(t, d, y, g, params, lambda z, p, warp: warp(z, p.only(n for n in _WARPS if n != "temperature")))


@member(
    "non-conformant",
    ("support",),
    "standard",
    "top_k applied to the draft, not to the target: tokens outside the top k come out (transformers #47932's class).",
    _LOGITS,
)
def logits_target_top_k_skipped(t, d, y, g, params):
    return _logits_step(t, d, y, g, params, lambda z, p, warp: warp(z, p.only(n for n in _WARPS if n != "top_k")))


@member(
    "non-conformant",
    ("support",),
    "standard",
    "min_p skipped at the verified positions (vLLM #42744): tokens below min_p come out.",
    _LOGITS,
)
def logits_target_min_p_skipped(t, d, y, g, params):
    return _logits_step(t, d, y, g, params, lambda z, p, warp: warp(z, p.only(n for n in _WARPS if n != "min_p")))


@member(
    "non-conformant",
    ("support",),
    "standard",
    "Softmax applied to the warped probabilities again (vllm-ascend #6685): every token gets mass, cut ones too.",
    _LOGITS,
)
def logits_softmax_twice(t, d, y, g, params):
    return _logits_step(t, d, y, g, params, lambda z, p, warp: torch.softmax(warp(z, p), dim=-1))


@member(
    "non-conformant",
    ("support",),
    "standard",
    "Temperature 0 taken as 1: a greedy row samples instead of emitting the argmax.",
    Capabilities(inputs="logits", params=("temperature",), dtypes=(torch.float64, torch.float32)),
)
def logits_greedy_sampled(t, d, y, g, params):
    def no_greedy(z, p, warp):
        temperature = torch.where(p.temperature == 0, 1.0, p.temperature)
        return warp(z, type(p)(temperature=temperature))

    return _logits_step(t, d, y, g, params, no_greedy)


# --- per-request seeds at the step level (issue 18): the logits reference with seeding wrong ----
# Each declares seeds; given none (the rest of the battery) it is the logits reference, so only the
# contract family's per-request seed checks (contract.seeds[...]) can tell.

_SEEDED = Capabilities(inputs="logits", params=(*_WARPS, "seeds"), dtypes=(torch.float64, torch.float32))


def _seeded_step(logits, d, y, g, params, seeds_of):
    from .._laws.oracle import canonical_emit
    from .._warps.rules import warp

    if params.seeds is None:
        u = uniforms(y.shape[0], y.shape[1], g, logits.device)
    else:
        u = seeds_of(params.seeds, y.shape[1] + 1, g, logits.device)
    return canonical_emit(warp(logits, params), d, y, u)


@member(
    "non-conformant",
    ("contract",),
    "quick",
    "Per-request seeds accepted and ignored: the batch's generator decides (vLLM #6038).",
    _SEEDED,
)
def seeds_ignored(t, d, y, g, params):
    return _seeded_step(t, d, y, g, params, lambda seeds, n, g, device: uniforms(seeds.shape[0], n - 1, g, device))


@member(
    "non-conformant",
    ("contract",),
    "quick",
    "One seed for the whole batch: the first request's seed draws every row's uniforms (seeds shared or mixed across "
    "requests: vLLM #13196, #9441, TensorRT-LLM #19487).",
    _SEEDED,
)
def seed_shared_across_batch(t, d, y, g, params):
    from ..samplers._uniforms import seeded_uniforms

    return _seeded_step(
        t, d, y, g, params, lambda seeds, n, g, device: seeded_uniforms(seeds[:1].expand(seeds.shape[0]), n).to(device)
    )


@member(
    "non-conformant",
    ("contract",),
    "quick",
    "The seed offset by the row's position in the batch: a request's output depends on where it lands in the batch "
    "(the class of seeds mixed across concurrent requests).",
    _SEEDED,
)
def seed_offset_by_row(t, d, y, g, params):
    from ..samplers._uniforms import seeded_uniforms

    def offset(seeds, n, g, device):
        return seeded_uniforms(seeds + torch.arange(seeds.shape[0], device=seeds.device), n).to(device)

    return _seeded_step(t, d, y, g, params, offset)
