"""Engine presets: each major engine's own warp, as data, and the warp function it defines.

Speculative decoding promises the engine's *own* non-speculative law, and engines warp differently
(see docs/conventions.md, generated from this module): the order of the cuts, whether temperature
comes first or last, whether ``top_p`` is measured on the mass left after ``top_k`` or on the whole
law, whether the token at exactly the ``top_p`` boundary is kept, what happens to ties at the
``k``-th logit, and where greedy starts.  A :class:`Convention` states those rules; calling it warps
``logits [B, ..., V]`` under per-row :class:`~specverify._warps.rules.SamplingParams`, vectorised over rows
(no Python loop over rows), in float64.

Where an engine's rule is implementation-defined (an unstable sort among equal probabilities), the
preset breaks ties by increasing token id, and says so in :attr:`Convention.notes`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from .prefix import FIRST_PREFIX, kept_prefix, short_nucleus
from .rules import DEFAULT_ORDER, SamplingParams, asking, cut_on, warp

__all__ = ["PRESETS", "Convention", "WarpFunction", "preset"]

#: A warp: ``(logits [B, ..., V], params) -> probabilities [B, ..., V]`` (the engine's own law).
WarpFunction = Callable[[torch.Tensor, SamplingParams], torch.Tensor]


@dataclasses.dataclass(frozen=True)
class Convention:
    """One engine's warp, stated as data.

    Attributes:
        name: the preset's name (``warp="vllm"``).
        engine: the engine and the code it was read from.
        order: the order the cuts are applied in (each renormalising what it keeps), unless ``joint``.
        temperature_last: cuts are taken on the temperature-1 law and the temperature divides the
            kept logits afterwards (llama.cpp's default chain), instead of first.
        joint: ``top_k``, ``top_p`` and ``min_p`` are taken together on one sorted law, ``top_p``
            on the mass *not* renormalised after ``top_k`` (SGLang).
        top_p_inclusive: a token is kept iff the mass strictly before it is ``<= top_p`` (else ``<``).
        top_k_exact: exactly ``k`` tokens survive, by sorted position (ties by increasing id);
            else every token tied with the ``k``-th is kept.
        greedy_below: a temperature ``<=`` this is greedy: one-hot at the first largest logit.
        off: the "off" value of each parameter, as the engine spells it.
        notes: what the preset decides where the engine's own rule is implementation-defined.
    """

    name: str
    engine: str
    order: tuple[str, ...] = DEFAULT_ORDER
    temperature_last: bool = False
    joint: bool = False
    top_p_inclusive: bool = False
    top_k_exact: bool = False
    greedy_below: float = 0.0
    off: tuple[tuple[str, str], ...] = (("top_k", "0"), ("top_p", "1"), ("min_p", "0"))
    notes: str = ""

    def __call__(self, logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
        """The warped law, float64, of ``logits [B, ..., V]`` under each row's parameters."""
        if self.name == "transformers":  # specverify's own warp is transformers': one implementation
            return warp(logits, params)
        z = logits.to(torch.float64)
        extra = (1,) * (z.dim() - 2)

        def per_row(value: torch.Tensor) -> torch.Tensor:
            return value.to(z.device).reshape(-1, *extra, 1)

        temperature = per_row(params.temperature) if params.temperature is not None else None
        greedy = temperature <= self.greedy_below if temperature is not None else None
        scale = torch.where(greedy, 1.0, temperature) if temperature is not None and greedy is not None else None
        first = z if scale is None or self.temperature_last else z / scale
        probs = torch.softmax(first, dim=-1)
        keep = self._joint(probs, params, per_row) if self.joint else self._chain(probs, params, per_row)
        if self.temperature_last and scale is not None:
            probs = torch.softmax(torch.where(keep, z / scale, -torch.inf), dim=-1)
        else:
            kept = torch.where(keep, probs, 0.0)
            probs = kept / kept.sum(dim=-1, keepdim=True)
        if greedy is not None and bool(greedy.any()):
            one_hot = torch.zeros_like(probs).scatter_(-1, z.argmax(dim=-1, keepdim=True), 1.0)
            probs = torch.where(greedy, one_hot, probs)
        return probs

    def _chain(
        self, probs: torch.Tensor, params: SamplingParams, per_row: Callable[[torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        """The cuts one after the other, each on the law the previous one left (renormalised)."""
        keep = probs > 0
        for name in self.order:
            value = getattr(params, name)
            rows = None if name == "temperature" or value is None else asking(cut_on(name, value, probs.shape[-1]))
            if rows is None:
                continue
            law = torch.where(keep[rows], probs[rows], 0.0)
            law = law / law.sum(dim=-1, keepdim=True)
            cut = (
                self._min_p(law, per_row(value[rows]))
                if name == "min_p"
                else self._sorted_cuts(law, {name: per_row(value[rows])})
            )
            keep[rows] &= cut
        return keep

    def _joint(
        self, probs: torch.Tensor, params: SamplingParams, per_row: Callable[[torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        """Every cut on the same law: ``top_p`` measured on the whole mass, not after ``top_k``
        (one sort serves both ``top_k`` and ``top_p``)."""
        vocab = probs.shape[-1]
        keep = probs > 0
        sorted_on = [(name, value) for name in ("top_k", "top_p") if (value := getattr(params, name)) is not None]
        rows = (
            asking(torch.stack([cut_on(name, value, vocab) for name, value in sorted_on]).any(0)) if sorted_on else None
        )
        if rows is not None:
            keep[rows] &= self._sorted_cuts(probs[rows], {name: per_row(value[rows]) for name, value in sorted_on})
        if (min_p := params.min_p) is not None and (rows := asking(cut_on("min_p", min_p, vocab))) is not None:
            keep[rows] &= self._min_p(probs[rows], per_row(min_p[rows]))
        return keep

    def _top_k_cut(self, probs: torch.Tensor, top_k: torch.Tensor) -> torch.Tensor:
        """:meth:`_sorted_cuts` of ``top_k`` alone without the sort: the k-th value from a partial sort
        (``topk``) to the largest k asked; where exactly k are kept, the ties at the k-th value by
        increasing id, as the stable sort takes them.  The same set, at a fraction of the sort's cost."""
        vocab = probs.shape[-1]
        k = top_k.clamp(1, vocab)
        kth = probs.topk(int(k.max()), dim=-1).values.gather(-1, (k - 1).expand(*probs.shape[:-1], 1))
        if self.top_k_exact:  # ranks below k: the larger values, then the first ties by id
            above = probs > kth
            tied = probs == kth
            room = k - above.sum(dim=-1, keepdim=True)
            kept = above | (tied & (tied.cumsum(dim=-1) <= room))
        else:  # every token tied with the k-th survives too
            kept = probs >= kth
        return kept | (top_k <= 0) | (top_k >= vocab)

    @staticmethod
    def _min_p(probs: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """The tokens ``min_p`` keeps: at least ``value`` times the row's largest probability."""
        return probs >= value * probs.amax(dim=-1, keepdim=True)

    def _sorted_cuts(self, probs: torch.Tensor, values: dict[str, torch.Tensor]) -> torch.Tensor:
        """The tokens the sorted cuts in ``values`` (``top_k``, ``top_p``; each row's value, on or off)
        all keep of ``probs``, from one sort: decreasing, ties by increasing id."""
        vocab = probs.shape[-1]
        if set(values) == {"top_k"}:
            return self._top_k_cut(probs, values["top_k"])
        top_k, top_p = values.get("top_k"), values.get("top_p")

        def kept(sorted_probs: torch.Tensor) -> torch.Tensor:  # the largest values, in decreasing order
            keep_sorted = torch.ones_like(sorted_probs, dtype=torch.bool)
            if top_k is not None:
                rank_kept = torch.arange(sorted_probs.shape[-1], device=probs.device) < top_k.clamp(1, vocab)
                if not self.top_k_exact:  # every token tied with the k-th survives too
                    at = top_k.clamp(1, sorted_probs.shape[-1]) - 1  # an off row's k: any position (it keeps all)
                    kth = sorted_probs.gather(-1, at.expand(*probs.shape[:-1], 1))
                    rank_kept = sorted_probs >= kth
                keep_sorted = keep_sorted & (rank_kept | (top_k <= 0) | (top_k >= vocab))
            if top_p is not None:
                before = sorted_probs.cumsum(dim=-1) - sorted_probs
                within = (before <= top_p) if self.top_p_inclusive else (before < top_p)
                keep_sorted = keep_sorted & (within | (top_p >= 1))
            return keep_sorted

        # a k-th value is read at position k - 1: the partial sort reaches it (an off k: the whole row)
        reach = 1 if top_k is None else int(torch.where((top_k <= 0) | (top_k >= vocab), 1, top_k).max())
        # a row's kept prefix is short where its nucleus is, or its k on and small
        short = torch.zeros_like(probs[..., :1], dtype=torch.bool)
        if top_p is not None:
            short |= short_nucleus(probs, top_p)
        if top_k is not None:
            short |= (top_k > 0) & (top_k <= FIRST_PREFIX)
        return kept_prefix(probs, kept, at_least=reach, short=short)


PRESETS: dict[str, Convention] = {
    convention.name: convention
    for convention in (
        Convention(
            "transformers",
            "transformers 5.x GenerationMixin._get_logits_processor (Temperature, TopK, TopP, MinP warpers)",
            notes="temperature 0 is greedy (transformers itself uses do_sample=False); top-p ties by increasing id",
        ),
        Convention(
            "vllm",
            "vLLM V1 vllm/v1/sample/sampler.py: temperature, min-p, then topk_topp_sampler (top-k, top-p)",
            order=("temperature", "min_p", "top_k", "top_p"),
            greedy_below=1e-5,
            off=(("top_k", "0 or -1 (the vocabulary)"), ("top_p", "1"), ("min_p", "0")),
            notes="the non-speculative sampler's law; its rejection sampler skips min-p (vLLM #42744)",
        ),
        Convention(
            "sglang",
            "SGLang srt/layers/sampler.py top_k_top_p_min_p_sampling_from_probs_torch (joint)",
            joint=True,
            top_p_inclusive=True,
            top_k_exact=True,
            greedy_below=1e-6,
            off=(("top_k", "-1 (1 << 30)"), ("top_p", "1"), ("min_p", "0")),
            notes="exactly k by sorted position; torch.sort ties taken by increasing id",
        ),
        Convention(
            "llama.cpp",
            "llama.cpp common/common.h default chain: top-k, top-p, min-p, then temperature (dist)",
            order=("top_k", "top_p", "min_p"),
            temperature_last=True,
            top_k_exact=True,
            off=(("top_k", "<= 0 (the vocabulary)"), ("top_p", "1"), ("min_p", "0")),
            notes="exactly k by sorted position (a partial sort; ties taken by increasing id)",
        ),
    )
}


def preset(name: str) -> Convention:
    """The preset called ``name``; a one-line :class:`ValueError` naming the known ones otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown warp preset {name!r}; known presets: {', '.join(map(repr, PRESETS))}") from None
