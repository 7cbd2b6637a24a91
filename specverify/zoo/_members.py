"""The zoo's members: known bugs, correct-but-different samplers, suboptimal and lossy ones.

Each member is a few lines over :mod:`specverify.zoo._core` and declares its fate.  Names follow the
bug, not the engine; the story cites the engine issue it reproduces.
"""

from __future__ import annotations

import threading

import torch

from .._contract import Capabilities
from .._laws.oracle import inverse_cdf, normalise
from ..samplers._reference import reference
from ._core import (
    ZooSampler,
    assemble,
    canonical_with,
    draft_ratio_terms,
    final_distribution,
    first_rejection,
    uniforms,
)

__all__ = ["MEMBERS"]

MEMBERS: dict[str, ZooSampler] = {}


def member(
    verdict: str,
    caught_by: tuple[str, ...],
    budget: str,
    story: str,
    capabilities: Capabilities = Capabilities(),
    *,
    float_edge: bool = False,
    at_tv: tuple[float, str] | None = None,
):
    """Register the decorated function as a zoo member named after it (underscores to dashes)."""

    def register(fn):
        name = fn.__name__.replace("_", "-")
        MEMBERS[name] = ZooSampler(
            name, fn, verdict, caught_by, budget, story, capabilities, float_edge=float_edge, at_tv=at_tv
        )
        return fn

    return register


# --- correct, different ---------------------------------------------------------------------


@member("conformant", (), "quick", "The reference sampler itself (canonical, float64, inverse CDF).")
def reference_sampler(t, d, y, g):
    return reference(t, d, y, g)


@member(
    "conformant",
    (),
    "quick",
    "Residual drawn by an exponential race, argmax(r / Exp(1)), as vLLM V1 does: exact in law.",
)
def exponential_race(t, d, y, g):
    def race(dist, u):
        exp = -torch.log1p(-torch.rand(dist.shape, generator=g, dtype=torch.float64, device=dist.device))
        return torch.where(dist > 0, dist / exp, -1.0).argmax(dim=-1)

    return canonical_with(t, d, y, g, draw=race)


@member(
    "conformant",
    (),
    "quick",
    "The whole step in float32, as GPU kernels run it: rounding far below any budget.",
    Capabilities(dtypes=(torch.float32,)),
)
def float32_arithmetic(t, d, y, g):
    batch, k = y.shape
    p = t.float() / t.float().sum(-1, keepdim=True)
    q = d.float() / d.float().sum(-1, keepdim=True)
    u = torch.rand((batch, k + 1), generator=g, dtype=torch.float32)
    p_y = p[:, :k].gather(-1, y[..., None])[..., 0]
    q_y = q.gather(-1, y[..., None])[..., 0]
    n = first_rejection(u[:, :k] * q_y < p_y)
    dist = final_distribution(p.double(), q.double(), n).float()
    return assemble(y, n, inverse_cdf(dist, u[:, k]))


@member("conformant", (), "quick", "Accepts on u <= p/q instead of u < p/q: differs only on a set of measure zero.")
def non_strict_comparison(t, d, y, g):
    return canonical_with(t, d, y, g, accept=lambda u, py, qy: (u * qy <= py) & (py > 0))


@member(
    "conformant",
    (),
    "quick",
    "A per-row Python loop over a scalar implementation in Python floats: slow, exact. Declares max_vocab=4,097: "
    "beyond it a Python loop over every probability of every row is too slow to check on a CPU.",
    Capabilities(max_vocab=4_097),
)
def per_row_loop(t, d, y, g):
    batch, k = y.shape
    u = torch.rand((batch, k + 1), generator=g, dtype=torch.float64).tolist()
    rows = [
        _scalar_step(pr, qr, yr, ur) for pr, qr, yr, ur in zip(t.double().tolist(), d.double().tolist(), y.tolist(), u)
    ]
    n = torch.tensor([r[0] for r in rows], dtype=torch.int64)
    return assemble(y, n, torch.tensor([r[1] for r in rows], dtype=torch.int64))


@member(
    "conformant",
    (),
    "quick",
    "Declares batched=False: the harness calls it one row at a time (and max_vocab=4,097, so its many one-row calls "
    "stay affordable).",
    Capabilities(batched=False, max_vocab=4_097),
)
def one_row_per_call(t, d, y, g):
    assert y.shape[0] == 1, "one row per call"
    drafts = y[0].tolist()
    u = torch.rand(len(drafts) + 1, generator=g, dtype=torch.float64).tolist()
    accepted, last = _scalar_step(t[0].double().tolist(), d[0].double().tolist(), drafts, u)
    tokens = drafts[:accepted] + [last] + [-1] * (len(drafts) - accepted)
    return torch.tensor([tokens]), torch.tensor([accepted])


def _scalar_step(p_rows: list, q_rows: list, drafts: list, u: list) -> tuple[int, int]:
    """One row of the canonical step in plain Python: ``(accepted, last token)``."""
    k = len(drafts)
    accepted = 0
    for i in range(k):
        p, q, token = p_rows[i], q_rows[i], drafts[i]
        if u[i] * q[token] * sum(p) < p[token] * sum(q):  # u * q/Sq < p/Sp without dividing
            accepted += 1
        else:
            break
    p_total = sum(p_rows[accepted])
    p = [x / p_total for x in p_rows[accepted]]
    dist = p
    if accepted < k:
        q_total = sum(q_rows[accepted])
        residual = [max(a - b / q_total, 0.0) for a, b in zip(p, q_rows[accepted])]
        if sum(residual) > len(p) * 2.220446049250313e-16:
            dist = residual
    needle, running = u[k] * sum(dist), 0.0
    last = max(i for i, x in enumerate(dist) if x > 0)
    for token, mass in enumerate(dist):
        running += mass
        if running > needle and mass > 0:
            return accepted, token
    return accepted, last


# --- lossless, suboptimal -------------------------------------------------------------------


@member(
    "lossless-suboptimal",
    ("efficiency",),
    "quick",
    "llama.cpp style: sample the target at each position and accept while it equals the draft. Lossless, accepts less.",
)
def sample_and_compare(t, d, y, g):
    batch, k = y.shape
    p = normalise(t)
    u = uniforms(batch, k, g, p.device)
    samples = inverse_cdf(p, u)  # one target sample per position (the bonus position included)
    n = first_rejection(samples[:, :k] == y)
    return assemble(y, n, samples.gather(1, n[:, None])[:, 0])


@member(
    "lossless-suboptimal",
    ("efficiency",),
    "quick",
    "Accepts with half the canonical probability and corrects the residual to match: lossless, fewer drafts.",
)
def half_acceptance(t, d, y, g):
    def final(p, q, n):
        rows = torch.arange(p.shape[0])
        k = q.shape[1]
        q_pad = torch.cat([q, torch.zeros_like(q[:, :1])], dim=1)
        pj, qj = p[rows, n], q_pad[rows, n]
        keep = 0.5 * torch.minimum(pj, qj)  # mass already delivered by acceptance
        return torch.where((n < k)[:, None], pj - keep, pj)

    return canonical_with(t, d, y, g, accept=lambda u, py, qy: 2 * u * qy < torch.minimum(py, qy), final=final)


@member(
    "lossless-suboptimal",
    ("efficiency",),
    "quick",
    "Never uses the last draft: verifies K-1 drafts and samples the K-th position from the target. Lossless, no bonus "
    "token.",
)
def no_bonus_token(t, d, y, g):
    batch, k = y.shape
    if k == 1:
        token = inverse_cdf(normalise(t[:, 0]), torch.rand(batch, generator=g, dtype=torch.float64))
        return assemble(y, torch.zeros(batch, dtype=torch.int64), token)
    tokens, n = reference(t[:, :k], d[:, : k - 1], y[:, : k - 1], g)
    return torch.cat([tokens, torch.full_like(tokens[:, :1], -1)], dim=1), n


# --- lossy by design ------------------------------------------------------------------------


@member(
    "lossy",
    ("fit", "exact"),
    "quick",
    "Relaxed acceptance (SGLang thresholds below 1): accepts when u < min(1, p/q) / 0.8. Lossy by design.",
)
def relaxed_acceptance(t, d, y, g):
    return canonical_with(t, d, y, g, accept=lambda u, py, qy: 0.8 * u * qy < py)


@member(
    "non-conformant",
    ("support", "fit"),
    "quick",
    "transformers' assistant_ensemble_weight = 0.5: verifies against (p + q) / 2. Lossy by design, and it emits drafts "
    "the target forbids (p = 0, q > 0).",
)
def ensemble_verification(t, d, y, g):
    mix = 0.5 * normalise(t)
    mix[:, : y.shape[1]] += 0.5 * normalise(d)
    return canonical_with(mix, d, y, g)


@member(
    "lossy",
    ("fit", "exact"),
    "quick",
    "Medusa-style typical acceptance: accept a draft whose target probability exceeds 0.3. Lossy by design.",
)
def typical_acceptance(t, d, y, g):
    return canonical_with(t, d, y, g, accept=lambda u, py, qy: py > 0.3)


# --- known bugs: the law --------------------------------------------------------------------


@member(
    "lossy",
    ("fit", "exact"),
    "quick",
    "Draws the replacement from the target p instead of the residual [p - q]+: the rejected token can come back (a "
    "stochastic-acceptance variant some ports shipped).",
)
def replacement_from_target(t, d, y, g):
    def final(p, q, n):
        return p[torch.arange(p.shape[0]), n]

    return canonical_with(t, d, y, g, final=final)


@member(
    "non-conformant",
    ("contract", "support", "fit"),
    "quick",
    "flashinfer #425: the residual is computed from position 0 whatever the rejection position, so it can emit a token "
    "the target forbids there.",
)
def residual_from_row_zero(t, d, y, g):
    def final(p, q, n):
        k = q.shape[1]
        zero = torch.zeros_like(n)
        return torch.where((n < k)[:, None], final_distribution(p, q, zero), p[:, -1])

    return canonical_with(t, d, y, g, final=final)


@member(
    "lossy",
    ("fit", "exact"),
    "quick",
    "flashinfer #424: the uniform of the failed accept test is reused to draw the replacement.",
)
def reused_uniform(t, d, y, g):
    batch, k = y.shape
    u = uniforms(batch, k, g, t.device)
    p, q, p_y, q_y = draft_ratio_terms(t, d, y)
    n = first_rejection(u[:, :k] * q_y < p_y)
    rejected = n < k
    reuse = u.gather(1, n.clamp(max=k - 1)[:, None])[:, 0]
    u_last = torch.where(rejected, reuse, u[:, k])
    return assemble(y, n, inverse_cdf(final_distribution(p, q, n), u_last))


@member(
    "lossy",
    ("fit", "exact", "efficiency"),
    "quick",
    "vllm-ascend #13730: the kernel hard-codes u = 0, so every draft the target allows is accepted.",
)
def uniform_hardcoded_zero(t, d, y, g):
    batch, k = y.shape
    u = uniforms(batch, k, g, t.device)
    u[:, :k] = 0.0
    return canonical_with(t, d, y, g, u=u)


@member(
    "lossy",
    ("fit", "exact"),
    "quick",
    "vllm #10198: the target probabilities get a second temperature (p**2, renormalised) the draft did not.",
)
def temperature_applied_twice(t, d, y, g):
    p = normalise(t) ** 2
    return canonical_with(p, d, y, g)


@member(
    "lossy",
    ("fit", "exact"),
    "quick",
    "Positions >= 2 only: the acceptance ratio there uses the previous position's draft law (an off-by-one in the "
    "kernel's stride).",
)
def position_two_off_by_one(t, d, y, g):
    batch, k = y.shape
    shifted = d.clone()
    if k > 2:
        shifted[:, 2:] = d[:, 1:-1]
    u = uniforms(batch, k, g, t.device)
    _, _, p_y, q_y = draft_ratio_terms(t, shifted, y)
    n = first_rejection(u[:, :k] * q_y < p_y)
    p, q = normalise(t), normalise(d)
    return assemble(y, n, inverse_cdf(final_distribution(p, q, n), u[:, k]))


@member(
    "lossy",
    ("fit",),
    "quick",
    "Heterogeneous batches only: the accept ratio's draft probability is read from row 0 (a shared-memory index bug); "
    "identical rows hide it.",
)
def batch_row_zero_ratio(t, d, y, g):
    def accept(u, p_y, q_y):
        return u * q_y[:1].expand_as(q_y) < p_y

    return canonical_with(t, d, y, g, accept=accept)


@member(
    "lossy",
    ("fit", "exact"),
    "quick",
    "Uniforms rounded to bfloat16 (8 bits) before the accept test: a bias of TV about 1e-3, and a u rounded up to 1.0 "
    "rejects a draft the canonical step always accepts (an outcome of exact probability 0), which the quick budget "
    "already sees.",
)
def coarse_uniforms(t, d, y, g):
    batch, k = y.shape
    u = uniforms(batch, k, g, t.device)
    u[:, :k] = u[:, :k].to(torch.bfloat16).to(torch.float64)
    return canonical_with(t, d, y, g, u=u)


@member(
    "lossy",
    ("fit",),
    "standard",
    "deepseek-ai/DeepSpec #31 style: the accept ratio is computed from bfloat16 probabilities.",
)
def bf16_ratio(t, d, y, g):
    def accept(u, py, qy):
        return u * qy.to(torch.bfloat16).double() < py.to(torch.bfloat16).double()

    return canonical_with(t, d, y, g, accept=accept)


# --- known bugs: the contract ---------------------------------------------------------------


@member(
    "non-conformant",
    ("support",),
    "quick",
    "vllm #23803 / sglang #35771: a low-precision uniform can be exactly 0 and u <= p/q then accepts a draft of target "
    "probability 0.",
)
def zero_uniform_accepts_impossible(t, d, y, g):
    batch, k = y.shape
    u = torch.rand((batch, k + 1), generator=g, dtype=torch.float64)
    u[:, :k] = torch.floor(u[:, :k] * 64) / 64  # 6-bit uniforms: exactly 0 one time in 64
    return canonical_with(t, d, y, g, u=u, accept=lambda a, py, qy: a * qy <= py)


@member(
    "non-conformant",
    ("contract",),
    "quick",
    "vllm #6038: ignores the generator and draws from the global RNG; seeds do nothing.",
)
def ignores_generator(t, d, y, g):
    return reference(t, d, y, None)


@member(
    "non-conformant",
    ("contract",),
    "quick",
    "Reseeds a private generator with a constant on every call: identical outputs whatever the seed.",
)
def fixed_seed(t, d, y, g):
    return reference(t, d, y, torch.Generator().manual_seed(1234))


@member(
    "non-conformant",
    ("contract",),
    "quick",
    "sglang #12512: scratch uniforms allocated once and reused by every later call.",
)
def reuses_scratch_across_calls(t, d, y, g, _cache={}):  # noqa: B006 - the cache is the bug
    batch, k = y.shape
    key = (batch, k)
    if key not in _cache:
        _cache[key] = uniforms(batch, k, g, t.device)
    return canonical_with(t, d, y, g, u=_cache[key])


@member(
    "non-conformant",
    ("contract",),
    "quick",
    "vllm-ascend #2881: normalises target_probs in place, writing to the caller's tensor.",
)
def writes_inputs_in_place(t, d, y, g):
    t /= t.sum(-1, keepdim=True)
    return reference(t, d, y, g)


@member(
    "non-conformant",
    ("contract",),
    "quick",
    "Returns int32 tokens, as vLLM and FlashInfer kernels do, where the contract says int64.",
)
def int32_outputs(t, d, y, g):
    tokens, n = reference(t, d, y, g)
    return tokens.to(torch.int32), n


@member("non-conformant", ("contract",), "quick", "Pads with 0 instead of -1 after the last emitted token.")
def pads_with_zero(t, d, y, g):
    tokens, n = reference(t, d, y, g)
    return tokens.clamp_min(0), n


@member("non-conformant", ("contract",), "quick", "vllm #2658: counts every accepted draft, not the accepted prefix.")
def counts_non_prefix_accepts(t, d, y, g):
    batch, k = y.shape
    u = uniforms(batch, k, g, t.device)
    p, q, p_y, q_y = draft_ratio_terms(t, d, y)
    accepted = u[:, :k] * q_y < p_y
    tokens, n = assemble(
        y, first_rejection(accepted), inverse_cdf(final_distribution(p, q, first_rejection(accepted)), u[:, k])
    )
    return tokens, accepted.sum(-1)


@member(
    "non-conformant",
    ("robustness", "contract"),
    "quick",
    "jaymody/speculative-sampling #5, transformers: no zero guard and no normalisation; a residual of mass 0 gives NaN "
    "and torch.multinomial raises.",
)
def nan_residual(t, d, y, g):
    def final(p, q, n):
        rows = torch.arange(p.shape[0])
        q_pad = torch.cat([q, torch.zeros_like(q[:, :1])], dim=1)
        residual = (p[rows, n] - q_pad[rows, n]).clamp_min(0)
        return residual / residual.sum(-1, keepdim=True)

    def draw(dist, u):
        return torch.multinomial(dist, 1, generator=g)[:, 0]

    return canonical_with(t, d, y, g, final=final, draw=draw, normalised=False)


@member(
    "non-conformant",
    ("robustness", "contract"),
    "quick",
    "vLLM GHSA-8wr5-jm2h-8r4f: a residual with no live entry returns the vocabulary size as the token id; reachable "
    "only on inputs that do not sum to 1 (low precision).",
)
def out_of_range_on_empty_residual(t, d, y, g):
    def final(p, q, n):
        rows = torch.arange(p.shape[0])
        q_pad = torch.cat([q, torch.zeros_like(q[:, :1])], dim=1)
        return (p[rows, n] - q_pad[rows, n]).clamp_min(0)

    def draw(dist, u):
        cdf = dist.cumsum(-1)
        return torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(-1), right=True)[:, 0]

    return canonical_with(t, d, y, g, final=final, draw=draw, normalised=False)


@member("non-conformant", ("contract",), "quick", "Raises on K = 1 (an unhandled shape).")
def raises_on_single_draft(t, d, y, g):
    if y.shape[1] == 1:
        raise ValueError("kernel compiled for K >= 2")
    return reference(t, d, y, g)


@member(
    "non-conformant",
    ("robustness",),
    "quick",
    "Hangs on vocabularies above 16k (a deadlock in a multi-block reduction).",
)
def hangs_on_large_vocab(t, d, y, g):
    if t.shape[-1] > 16_384:
        threading.Event().wait(600)
    return reference(t, d, y, g)


# --- issue 15: verdicts that never claim more than the evidence shows ----------------------------
# Each is lossy (or exact) only where an older battery had no target-law evidence.


def _fixed_token_at_four_drafts(t, d, y, g):
    """The reference, but with K = 4 drafts half the rows accept nothing and emit the target's
    most likely first token: the law breaks at K = 4 only."""
    tokens, n = reference(t, d, y, g)
    batch, k = y.shape
    if k != 4:
        return tokens, n
    fixed = torch.rand(batch, generator=g, dtype=torch.float64, device=t.device) < 0.5
    top = t[:, 0].argmax(dim=-1)
    n = torch.where(fixed, torch.zeros_like(n), n)
    return assemble(y, n, torch.where(fixed, top, tokens.gather(1, n[:, None])[:, 0]))


@member(
    "lossy",
    ("fit",),
    "quick",
    "Lossy at K = 4 only: half its rows there accept nothing and emit the target's most likely token. Fewer accepted "
    "drafts, and a conditional law unlike the canonical one, must not pass for lossless-suboptimal.",
)
def lossy_at_four_drafts(t, d, y, g):
    return _fixed_token_at_four_drafts(t, d, y, g)


@member(
    "lossy",
    ("fit",),
    "quick",
    "Declares canonical=False (so no check of the canonical law runs) and is lossy at K = 4 only: the target's law at "
    "every shape must catch it.",
    Capabilities(canonical=False),
)
def non_canonical_lossy_at_four_drafts(t, d, y, g):
    return _fixed_token_at_four_drafts(t, d, y, g)


def _no_renormalisation(t, d, y, g):
    """The canonical step on the rows as given, never divided by their sums (as engine kernels)."""
    return canonical_with(t, d, y, g, normalised=False)


@member(
    "conformant",
    (),
    "quick",
    "Does not renormalise its inputs, as engine kernels do not: exact on rows normalised as well as their dtype "
    "allows, which is what engines pass it.",
)
def no_input_renormalisation(t, d, y, g):
    return _no_renormalisation(t, d, y, g)


@member(
    "non-conformant",
    ("fit",),
    "quick",
    "Declares unnormalised=True but does not renormalise: on rows far from normalised it gets the finding of its own, "
    "'does not renormalise its inputs', not lossy.",
    Capabilities(unnormalised=True),
)
def declares_unnormalised_but_does_not_renormalise(t, d, y, g):
    return _no_renormalisation(t, d, y, g)
