"""How often a law finding happens: the probability of the event a case conditions on.

A check that forces the drafts tests the law *given* them.  In a run of the sampler the drafts are
drawn from the draft law, so the law the user's requests see (the emitted law) is the mixture over
drafts, and a difference confined to an event ``E`` of the drafts moves it by at most ``P(E)``
times the TV given ``E``, so by at most ``P(E)`` (TV is convex, and at most 1).  The event of a case is the class of its
rarest draft: a draft at that position of draft probability at most the forced one's (the sub-ulp tails: 1,023
tokens of 2e-20, ``P(E)`` 2e-17).  It holds the forced drafts, so it is never smaller than their
own probability, and where the forced drafts are ordinary (a structured case: the rarest one holds
a few tenths of its row) ``P(E)`` is of order 1 and the finding decides as it always did.
``P(E)`` is summed exactly from the case's own normalised draft rows (float64; logarithms kept, so
a bound below the smallest float is still stated).

Below :data:`RESOLUTION` such a difference is a *float-edge finding* (status ``float-edge``): real,
reported, and never a verdict by itself.  A support violation is never sized away: the calling
layer reports a token of target probability 0 as a fault, whatever its frequency.
"""

from __future__ import annotations

import math

import torch

from .._laws.cases import StepCase
from .._record.evidence import EventSize

__all__ = ["RESOLUTION", "draft_event", "event_size", "sized_status", "sizes_text"]

#: The smallest unconditional TV a law finding must reach to decide a verdict: far below what any
#: budget or ``--tv`` can detect (thorough's shape TV is 3e-3; no test of emitted tokens resolves
#: 1e-9 with fewer than ~1e18 samples), far above the float64 events of the sub-ulp cases (1e-20).
RESOLUTION = 1e-9


def draft_event(case: StepCase) -> tuple[float, str]:
    """``(log10 P(E), words)``: ``E`` = a draft at the position of the case's rarest forced draft
    of draft probability at most that one's, under the case's own draft rows (normalised, float64)."""
    q = case.draft_probs.to(torch.float64)
    q = q / q.sum(-1, keepdim=True)
    picked = q.gather(1, case.draft_tokens.to(torch.int64)[:, None])  # [K, 1]
    classes = torch.where(q <= picked, q, 0.0).sum(-1)  # [K] each position's class of drafts as rare
    position = int(classes.argmin())
    mass, token = float(classes[position]), int(case.draft_tokens[position])
    words = (
        f"a draft at position {position} as rare as token {token} (draft probability {float(picked[position, 0]):.2g})"
    )
    return (math.log10(mass) if mass > 0 else -math.inf), words


def event_size(case: StepCase, tv_given: float) -> EventSize:
    """Both sizes of a difference seen given ``case``'s drafts: the TV given them (``tv_given``,
    an estimate or exact) and the bound on the emitted law's TV, ``P(E) * TV(given E) <= P(E)``
    (the TV given the other drafts of ``E`` is not measured, so it is bounded by 1)."""
    log10_p, words = draft_event(case)
    log10_bound = log10_p
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
    text = (
        f"TV {size['tv_given']:.3g} given {size['event']}, an event of probability {probability}; the emitted law "
        f"moves by at most {bound}"
    )
    if size["tv_bound"] < size["resolution"]:
        text += f", below the resolution {size['resolution']:g}: a float-edge finding, not a verdict"
    return text


def _power(log10: float) -> str:
    """``10 ** log10`` in words, also where it underflows a float (``1e-330``) or is 0."""
    if log10 == -math.inf:
        return "0"
    return f"{10.0**log10:.2g}" if log10 > -300 else f"1e{math.floor(log10)}"
