"""Sampling parameters and the warps they apply: the law a logits-level sampler must preserve.

Engines verify drafts against the target *as the request asked for it*: logits divided by the
temperature, cut to the top ``k``, cut to the nucleus of mass ``top_p``, cut below ``min_p`` times
the largest probability, renormalised.  The law to preserve at every position is that warped target,
and a greedy row (temperature 0) must emit the target's argmax path.  :func:`warp` is the harness's
own statement of those rules, vectorised over rows with heterogeneous per-row parameters; the exact
law of a logits-level step is the canonical step law on ``warp(target_logits)``.

Rules, stated once (engines agree on them away from ties):

* ``temperature``: ``0`` is greedy (a one-hot law at the first largest logit); otherwise logits are
  divided by it before the softmax, in float64.
* ``top_k``: ``0`` is off; else every token whose probability is at least the ``k``-th largest is
  kept (ties at the boundary are all kept).
* ``top_p``: ``1`` is off; else the smallest set of most probable tokens whose mass reaches
  ``top_p`` is kept: a token is kept iff the mass of the tokens strictly before it, in order of
  decreasing probability (ties by increasing id), is below ``top_p``.
* ``min_p``: ``0`` is off; else tokens below ``min_p`` times the largest probability are cut.

Each cut renormalises what it keeps, so ``top_p`` measures mass after ``top_k``.  The order is
:data:`DEFAULT_ORDER` (transformers'): this is the ``"transformers"`` preset, the law a sampler
that declares no warp is judged by.  Engines differ (llama.cpp applies the temperature last, SGLang
cuts jointly, vLLM applies ``min_p`` first); a sampler declares its own with ``warp=``
(:mod:`specverify._warps.presets`, :mod:`specverify._warps.declared`, docs/conventions.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import torch

from .prefix import kept_prefix, short_nucleus

__all__ = ["DEFAULT_ORDER", "HISTORY_PARAMETERS", "PARAMETERS", "SamplingParams", "asking", "cut_on", "warp"]

#: The warps, in the order Hugging Face applies them.
DEFAULT_ORDER: tuple[str, ...] = ("temperature", "top_k", "top_p", "min_p")
#: The parameters whose law depends on the tokens so far (:mod:`specverify._history`); off when not given.
HISTORY_PARAMETERS: tuple[str, ...] = (
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
    "penalty_window",
    "min_tokens",
    "stop_tokens",
    "logit_bias",
    "bad_words",
    "grammar",
)
#: Every per-row parameter a sampler can declare it supports.
PARAMETERS: tuple[str, ...] = (*DEFAULT_ORDER, "seeds", *HISTORY_PARAMETERS)

_DTYPES = {
    "temperature": torch.float64,
    "top_k": torch.int64,
    "top_p": torch.float64,
    "min_p": torch.float64,
    "seeds": torch.int64,
    "repetition_penalty": torch.float64,
    "presence_penalty": torch.float64,
    "frequency_penalty": torch.float64,
    "penalty_window": torch.int64,
    "min_tokens": torch.int64,
    "stop_tokens": torch.int64,
    "logit_bias": torch.float64,
    "bad_words": torch.int64,
    "grammar": torch.int64,
}
#: The parameters that are more than one value per row: ``[B, ...]`` of this many dimensions.
_DIMS = {"logit_bias": 2, "bad_words": 3, "grammar": 3}
_SHAPES = {
    "logit_bias": "a [B, V] tensor of one row per row",
    "bad_words": "a [B, W, M] tensor of W sequences per row",
    "grammar": "a [B, S, V] tensor of one transition table per row",
}


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    """Per-row sampling parameters, each a ``[B]`` tensor or ``None`` (not given).

    Attributes:
        temperature: float64, ``0`` means greedy.
        top_k: int64, ``0`` means off.
        top_p: float64 in ``(0, 1]``, ``1`` means off.
        min_p: float64 in ``[0, 1]``, ``0`` means off.
        seeds: int64 per-request seeds, for samplers that declare per-request seeding.
        repetition_penalty: float64 ``> 0``, ``1`` off; presence_penalty, frequency_penalty: float64, ``0`` off.
        penalty_window: int64, the tokens the penalties count: ``-1`` the convention's own sets,
            ``0`` the generated tokens only, ``n > 0`` the last ``n`` of prompt and generated tokens.
        min_tokens: int64, ``0`` off: the stop tokens are masked until that many tokens are generated.
        stop_tokens: int64 bit mask, token ``t`` a stop token iff bit ``t`` is set (``0``: none):
            generation ends at one (the loop pads the rest of the row with ``-1``).
        logit_bias: float64 ``[B, V]``, added to the logits.
        bad_words: int64 ``[B, W, M]``, ``W`` banned sequences of at most ``M`` tokens, left-padded
            with ``-1`` (a row of ``-1``: none): a sequence's last token is masked where the generated
            tokens end with its others (a one-token sequence: always).
        grammar: int64 ``[B, S, V]``, a token automaton: ``grammar[b, s, t]`` is the state after token
            ``t`` in state ``s``, ``-1`` where ``t`` is forbidden there; generation starts in state 0
            (one state of zeros: off).  Every state allows some token.
        (:mod:`specverify._history` states their law and order.)
    """

    temperature: torch.Tensor | None = None
    top_k: torch.Tensor | None = None
    top_p: torch.Tensor | None = None
    min_p: torch.Tensor | None = None
    seeds: torch.Tensor | None = None
    repetition_penalty: torch.Tensor | None = None
    presence_penalty: torch.Tensor | None = None
    frequency_penalty: torch.Tensor | None = None
    penalty_window: torch.Tensor | None = None
    min_tokens: torch.Tensor | None = None
    stop_tokens: torch.Tensor | None = None
    logit_bias: torch.Tensor | None = None
    bad_words: torch.Tensor | None = None
    grammar: torch.Tensor | None = None

    def __post_init__(self) -> None:
        sizes = set()
        for name in PARAMETERS:
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, torch.Tensor) or value.dim() != _DIMS.get(name, 1):
                what = _SHAPES.get(name, "a 1-d tensor of one value per row")
                raise ValueError(f"SamplingParams.{name} must be {what}")
            if value.dtype != _DTYPES[name]:
                raise ValueError(f"SamplingParams.{name} must be {_DTYPES[name]}, got {value.dtype}")
            sizes.add(value.shape[0])
        if len(sizes) > 1:
            raise ValueError(f"SamplingParams rows disagree: {sorted(sizes)}")
        checks = (
            ("temperature", lambda t: torch.isfinite(t) & (t >= 0), "finite and >= 0"),
            ("top_k", lambda k: k >= 0, ">= 0"),
            ("top_p", lambda p: (p > 0) & (p <= 1), "in (0, 1]"),
            ("min_p", lambda m: (m >= 0) & (m <= 1), "in [0, 1]"),
            ("repetition_penalty", lambda r: torch.isfinite(r) & (r > 0), "finite and > 0"),
            ("presence_penalty", torch.isfinite, "finite"),
            ("frequency_penalty", torch.isfinite, "finite"),
            ("penalty_window", lambda n: n >= -1, ">= -1"),
            ("min_tokens", lambda n: n >= 0, ">= 0"),
            ("stop_tokens", lambda m: m >= 0, "a bit mask >= 0"),
            ("logit_bias", lambda b: ~torch.isnan(b) & (b < float("inf")), "finite or -inf"),
            ("bad_words", _left_padded, "token ids, left-padded with -1"),
            ("grammar", _automaton, "states in [-1, S), every state allowing some token"),
        )
        for name, valid, text in checks:
            value = getattr(self, name)
            if value is not None and not bool(valid(value).all()):
                raise ValueError(f"SamplingParams.{name} must be {text}")

    @property
    def given(self) -> tuple[str, ...]:
        """The names of the parameters that are set."""
        return tuple(name for name in PARAMETERS if getattr(self, name) is not None)

    @property
    def rows(self) -> int | None:
        for name in self.given:
            return int(getattr(self, name).shape[0])
        return None

    def only(self, names: Iterable[str]) -> SamplingParams:
        """The same parameters less those not in ``names`` (what a sampler declares it takes)."""
        keep = set(names)
        return self._derived({name: getattr(self, name) if name in keep else None for name in PARAMETERS})

    def select(self, rows: torch.Tensor | slice) -> SamplingParams:
        """The parameters of some rows (an index tensor or a slice)."""
        return self._derived({name: None if (v := getattr(self, name)) is None else v[rows] for name in PARAMETERS})

    def to(self, device: torch.device | str) -> SamplingParams:
        return self._derived(
            {name: None if (v := getattr(self, name)) is None else v.to(device) for name in PARAMETERS}
        )

    @classmethod
    def _derived(cls, fields: dict[str, torch.Tensor | None]) -> SamplingParams:
        """Rows or columns of validated parameters: valid already, so not validated again (the
        checks read every value, which a loop over generation steps would pay for each step)."""
        made = object.__new__(cls)
        for name, value in fields.items():
            object.__setattr__(made, name, value)
        return made


def _left_padded(words: torch.Tensor) -> torch.Tensor:
    """Ids ``>= -1`` with no ``-1`` after a token of its sequence."""
    late = (words[..., 1:] == -1) & (words[..., :-1] >= 0)
    return (words >= -1).all() & ~late.any()


def _automaton(table: torch.Tensor) -> torch.Tensor:
    """Transitions to a state of the table or ``-1``, and some token allowed in every state."""
    return (table >= -1).all() & (table < table.shape[1]).all() & (table >= 0).any(-1).all()


def warp(logits: torch.Tensor, params: SamplingParams, order: Sequence[str] = DEFAULT_ORDER) -> torch.Tensor:
    """The warped law, float64, of ``logits [B, ..., V]`` under each row's parameters.

    ``-inf`` logits are tokens of probability 0.  Parameters not given are off.
    """
    unknown = set(order) - set(DEFAULT_ORDER)
    if unknown or len(set(order)) != len(order):
        raise ValueError(f"a warp order names each of {DEFAULT_ORDER} at most once, got {tuple(order)}")
    z = logits.to(torch.float64)
    extra = (1,) * (z.dim() - 2)  # broadcast a row's parameters over its positions

    def per_row(value: torch.Tensor) -> torch.Tensor:
        return value.to(z.device).reshape(-1, *extra, 1)

    greedy = None
    if params.temperature is not None and "temperature" in order:
        temperature = per_row(params.temperature)
        greedy = temperature == 0
        z = z / torch.where(greedy, 1.0, temperature)
    probs = torch.softmax(z, dim=-1)
    if greedy is not None and bool(greedy.any()):
        first_max = torch.zeros_like(probs).scatter_(-1, z.argmax(dim=-1, keepdim=True), 1.0)
        probs = torch.where(greedy, first_max, probs)
    vocab = probs.shape[-1]
    for name in order:
        value = getattr(params, name)
        if name == "temperature" or value is None:
            continue
        rows = asking(cut_on(name, value, vocab))
        if rows is None:  # a cut no row asks for: skip its sort
            continue
        # the cut runs on the rows that ask for it; the others keep their values bit for bit
        part = probs[rows]
        cut = part * _CUTS[name](part, per_row(value[rows]))
        probs[rows] = cut / cut.sum(dim=-1, keepdim=True)
    return probs


def asking(on: torch.Tensor) -> torch.Tensor | slice | None:
    """The rows where a cut is on, as an index (every row: a slice, no copy; none: ``None``).

    A batch mixes parameter groups, and a sort costs per row: rows that leave a cut off skip it.
    """
    if bool(on.all()):
        return slice(None)
    return on.nonzero().squeeze(-1) if bool(on.any()) else None


# The cuts below see only the rows that ask for them (``warp`` passes those: :func:`cut_on`).


def _top_k(probs: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    # the k-th largest value, the same float a full sort gives, from a partial sort to the largest k
    # asked (a sort of all V values cost 45x more at V = 32000, k = 50)
    largest = probs.topk(int(k.max()), dim=-1).values
    return probs >= largest.gather(-1, (k - 1).expand(*probs.shape[:-1], 1))


def _top_p(probs: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    # decreasing probability, ties by increasing id (a stable sort's order), from a partial sort
    def kept(sorted_probs: torch.Tensor) -> torch.Tensor:
        return sorted_probs.cumsum(dim=-1) - sorted_probs < top_p

    return kept_prefix(probs, kept, short=short_nucleus(probs, top_p))


def _min_p(probs: torch.Tensor, min_p: torch.Tensor) -> torch.Tensor:
    return probs >= min_p * probs.amax(dim=-1, keepdim=True)


_CUTS = {"top_k": _top_k, "top_p": _top_p, "min_p": _min_p}


def cut_on(name: str, value: torch.Tensor, vocab: int) -> torch.Tensor:
    """``[B]``: the rows on which the cut ``name`` (``top_k``, ``top_p``, ``min_p``) can change the law."""
    if name == "top_k":
        return (value > 0) & (value < vocab)
    return value < 1 if name == "top_p" else value > 0
