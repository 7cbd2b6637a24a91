"""How often a law finding happens: the probability of the event a case conditions on.

A check that forces the drafts tests the law *given* them.  In a run of the sampler the drafts are
drawn from the draft law, so a difference of TV ``t`` given drafts ``d`` moves the law the user's
requests see (the emitted law, the drafts drawn) by at most ``P(d) * t``: the unconditional law is
the mixture over drafts, and TV is convex (``TV(sum_d P(d) L_d, sum_d P(d) L*_d) <= sum_d P(d)
TV(L_d, L*_d)``).  ``P(d)`` is computed exactly from the case's own draft rows (each draft's
probability under its normalised row, multiplied in log space, so 1e-20 ** 16 does not underflow).

Below :data:`RESOLUTION` such a difference is a *float-edge finding* (status ``float-edge``): real,
reported, and never a verdict by itself; the sub-ulp edge cases are the example (a first draft of
probability 2e-20 whose residual vanishes in float).  A support violation is never sized away: the
calling layer reports a token of target probability 0 as a fault, whatever its frequency.
"""

from __future__ import annotations

import math

import torch

from .._cases import StepCase
from .._evidence import EventSize

__all__ = ["RESOLUTION", "draft_event", "event_size", "sized_status", "sizes_text"]

#: The smallest unconditional TV a law finding must reach to decide a verdict: far below what any
#: budget or ``--tv`` can detect (thorough's shape TV is 3e-3; no test of emitted tokens resolves
#: 1e-9 with fewer than ~1e18 samples), far above the float64 events of the sub-ulp cases (1e-20).
RESOLUTION = 1e-9


def draft_event(case: StepCase) -> tuple[float, str]:
    """``(log10 P(drafts), words)``: the probability of the case's forced drafts under its own
    draft rows (each row normalised, float64), and the event in words."""
    q = case.draft_probs.to(torch.float64)
    picked = q.gather(1, case.draft_tokens.to(torch.int64)[:, None])[:, 0]
    if bool((picked <= 0).any()):
        return -math.inf, f"drafts {case.draft_tokens.tolist()} (a draft of draft probability 0)"
    log10 = math.fsum((torch.log10(picked) - torch.log10(q.sum(-1))).tolist())
    first = float(picked[0] / q[0].sum())
    return log10, f"drafts {case.draft_tokens.tolist()} (the first of draft probability {first:.2g})"


def event_size(case: StepCase, tv_given: float, tv_high: float) -> EventSize:
    """Both sizes of a difference seen given ``case``'s drafts: the TV given them (``tv_given``,
    an estimate or exact) and the bound on the emitted law's TV, ``P(drafts) * tv_high`` (the
    upper end of that TV's interval, at most 1; the TV itself where it is exact)."""
    log10_p, words = draft_event(case)
    high = min(1.0, max(tv_high, 0.0))
    log10_bound = log10_p + math.log10(high) if high > 0 else -math.inf
    return EventSize(
        event=words,
        probability=10.0**log10_p,
        log10_probability=log10_p,
        tv_given=tv_given,
        tv_bound=10.0**log10_bound,
        log10_tv_bound=log10_bound,
        resolution=RESOLUTION,
    )


def sized_status(size: EventSize) -> str:
    """``"float-edge"`` where the emitted law moves by less than the resolution, else ``"fail"``."""
    return "float-edge" if size["log10_tv_bound"] < math.log10(size["resolution"]) else "fail"


def sizes_text(size: EventSize) -> str:
    """The two sizes in words, as the message and the report state them."""
    bound, probability = _power(size["log10_tv_bound"]), _power(size["log10_probability"])
    text = f"TV {size['tv_given']:.3g} given {size['event']}, an event of probability {probability}; the emitted law moves by at most {bound}"
    if size["tv_bound"] < size["resolution"]:
        text += f", below the resolution {size['resolution']:g}: a float-edge finding, not a verdict"
    return text


def _power(log10: float) -> str:
    """``10 ** log10`` in words, also where it underflows a float (``1e-330``) or is 0."""
    if log10 == -math.inf:
        return "0"
    return f"{10.0**log10:.2g}" if log10 > -300 else f"1e{math.floor(log10)}"
