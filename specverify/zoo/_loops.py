"""The zoo's generation loops: the reference loop with one stage wrong, as engines shipped it.

Each member declares the verdict the loop family must reach and the checks that must catch it,
like the step members in :mod:`specverify.zoo._members`; the story cites the engine issue.
"""

from __future__ import annotations

import dataclasses

import torch

from .._record.vocabulary import Verdict
from .._warps.presets import PRESETS
from .._warps.rules import SamplingParams
from ..samplers._loop_reference import LoopReference
from ._history_loops import HISTORY_ENTRIES
from ._rounded import bf16_prefix_sum_law

__all__ = ["LOOP_MEMBERS", "LoopMember"]


@dataclasses.dataclass(frozen=True)
class LoopMember:
    """A loop, its declared verdict under the loop family, and the check ids that catch it."""

    name: str
    loop: LoopReference
    verdict: Verdict
    caught_by: tuple[str, ...]
    story: str
    #: ``(EPS, verdict)``: a bug below every preset's reach declares ``verdict`` (conformant within
    #: reach) at the presets and this verdict for a run sized for TV EPS or smaller (``--tv``)
    at_tv: tuple[float, Verdict] | None = None

    def __post_init__(self) -> None:  # a misspelt declaration fails at import
        object.__setattr__(self, "verdict", Verdict(self.verdict))
        if self.at_tv is not None:
            object.__setattr__(self, "at_tv", (float(self.at_tv[0]), Verdict(self.at_tv[1])))

    @property
    def truth(self) -> Verdict:
        """The verdict the loop is: the one a run that reaches its bug must give."""
        return self.at_tv[1] if self.at_tv is not None else self.verdict

    def declared_at(self, tv: float | None) -> tuple[Verdict, str]:
        """The verdict a run sized for ``tv`` (``None``: a preset) must reach, and the budget that
        declaration is of (every preset member is caught at quick: tests/test_loop_battery.py)."""
        if self.at_tv is not None and tv is not None and tv <= self.at_tv[0] * (1 + 1e-9):
            return self.at_tv[1], f"tv<={self.at_tv[0]:g}"
        return self.verdict, "quick"


class _SharedCoins(LoopReference):
    def coins(self, params, rows, iteration, generator, device):
        drafts = super().coins(params, rows, iteration, generator, device)[:, : self.k]
        fresh = super().coins(params, rows, iteration, generator, device)[:, self.k :]
        # the verifier's acceptance coins are the draft's own noise (one stream for both)
        return torch.cat([drafts, drafts, fresh[:, -1:]], dim=1)


class _TargetUnwarped(LoopReference):
    def target_law(self, logits, params, position):
        return torch.softmax(logits.to(torch.float64), dim=-1)


class _RawDraftReported(LoopReference):
    def draft_law(self, logits, params):
        sampled, _ = super().draft_law(logits, params)
        return sampled, torch.softmax(logits.to(torch.float64), dim=-1)


class _SoftmaxTwice(LoopReference):
    def target_law(self, logits, params, position):
        return torch.softmax(super().target_law(logits, params, position), dim=-1)


class _MinPBonusOnly(LoopReference):
    def target_law(self, logits, params, position):
        if position == self.k or params.min_p is None:  # min-p on the bonus token only
            return super().target_law(logits, params, position)
        return super().target_law(logits, dataclasses.replace(params, min_p=None), position)


class _SeedsIgnored(LoopReference):
    def coins(self, params, rows, iteration, generator, device):
        return super().coins(dataclasses.replace(params, seeds=None), rows, iteration, generator, device)


class _GreedyAsSampling(LoopReference):
    def target_law(self, logits, params, position):
        return super().target_law(logits, _no_greedy(params), position)

    def draft_law(self, logits, params):
        return super().draft_law(logits, _no_greedy(params))


class _Bf16PrefixSumDraft(LoopReference):
    def draft_law(self, logits, params):
        law = self._law(logits, params)
        # the drafter draws through a bfloat16 prefix sum of q; the verifier is handed the float q
        return bf16_prefix_sum_law(law), law


class _ArgmaxDraftsVerifiedWithQ(LoopReference):
    def draft_law(self, logits, params):
        law = self._law(logits, params)
        # the drafter's argmax (a beam's best path) is drafted, its sampling law q reported to the verifier
        argmax = torch.nn.functional.one_hot(law.argmax(-1), law.shape[-1]).to(law.dtype)
        return argmax, law


class _WarpsByAnother(LoopReference):
    """Declares one preset and warps, draft and target alike, by another: its own law is a
    correct engine's, just not the one it declares."""

    def __init__(self, declared: str, actual: str) -> None:
        super().__init__(warp=declared)
        self.actual = PRESETS[actual]

    def target_law(self, logits, params, position):
        return self.actual(logits, params)

    def draft_law(self, logits, params):
        law = self.actual(logits, params)
        return law, law


def _no_greedy(params: SamplingParams) -> SamplingParams:
    if params.temperature is None:
        return params
    return dataclasses.replace(params, temperature=torch.where(params.temperature == 0, 1.0, params.temperature))


def _members() -> dict[str, LoopMember]:
    entries = [
        ("loop-reference", LoopReference(), "conformant", (), "The reference loop: every stage right."),
        (
            "shared-draft-and-verifier-coins",
            _SharedCoins(),
            "lossy",
            ("loop.law[plain]", "loop.positions"),
            "The draft's noise and the acceptance coin come from one stream (vLLM #47386, #54282).",
        ),
        (
            "target-unwarped",
            _TargetUnwarped(),
            "non-conformant",
            ("loop.output", "loop.law[top-k]"),
            "Drafts follow the warped draft, the target is verified at temperature 1 with no cuts (vLLM PR #10198).",
        ),
        (
            "raw-draft-reported-as-q",
            _RawDraftReported(),
            "lossy",
            ("loop.law[top-k]", "loop.law[temperature]"),
            "Drafts sampled from the processed draft law, the raw softmax reported as q (transformers #47932).",
        ),
        (
            "softmax-twice",
            _SoftmaxTwice(),
            "non-conformant",
            ("loop.output", "loop.law[plain]"),
            "Softmax applied to the target's probabilities again (vllm-ascend #6685).",
        ),
        (
            "min-p-bonus-only",
            _MinPBonusOnly(),
            "lossy",
            ("loop.law[min-p]", "loop.law[mixed]"),
            "min_p applied to the bonus token only, skipped at verified positions (vLLM #42744).",
        ),
        (
            "seeds-ignored",
            _SeedsIgnored(),
            "non-conformant",
            ("loop.seeds",),
            "Per-request seeds accepted and ignored: the batch generator decides (vLLM #6038).",
        ),
        (
            "greedy-as-sampling",
            _GreedyAsSampling(),
            "non-conformant",
            ("loop.output",),
            "Temperature 0 treated as 1: a greedy request samples.",
        ),
        (
            "bf16-prefix-sum-draft",
            _Bf16PrefixSumDraft(),
            "conformant",
            ("loop.law[temperature]", "loop.law[mixed]"),
            "The drafter draws through a bfloat16 prefix sum of q, as a sampling kernel scanning in the model's dtype "
            "does, while the verifier is handed the float q: the drafter/ratio mismatch class. Lossy: the law checks' "
            "generation laws move by TV 9.3e-4 to 2.8e-3 on average over the kinds (loop.law[plain] 2.0e-3, "
            "[temperature] 2.8e-3; chains of seeds 0-9, drafts of seeds 100-109), computed exactly by "
            "specverify.zoo._rounded.drafted_generation_law; below every preset's reach (standard's loop laws reach TV "
            "0.01): conformant within reach at the presets, lossy at --tv 0.001.",
        ),
        (
            "deterministic-drafts-verified-with-q",
            _ArgmaxDraftsVerifiedWithQ(),
            "lossy",
            ("loop.law[plain]", "loop.law[temperature]"),
            "Deterministic drafts (the drafter's argmax; a beam search's best path) verified with the drafter's "
            "sampling law q instead of the one-hot law they were drawn from: the draft is accepted with "
            "min(1, p/q) rather than p (apple/ml-recurrent-drafter #6).",
        ),
        # declared warps (issue 29): the engine's own law is the oracle
        *[
            (
                f"{name.replace('.', '-')}-reference",
                LoopReference(warp=name),
                "conformant",
                (),
                f"The reference loop warping as {name} does, and declaring it.",
            )
            for name in PRESETS
            if name != "transformers"
        ],
        (
            "declares-sglang-warps-transformers",
            _WarpsByAnother("sglang", "transformers"),
            "lossy",
            ("loop.law[separating]", "loop.law[mixed]"),
            "Declares SGLang's warp (joint top-k/top-p, exactly k at ties) and warps as transformers does: not its "
            "engine's own law.",
        ),
        (
            "vllm-min-p-bonus-only",
            _MinPBonusOnly(warp="vllm"),
            "lossy",
            ("loop.law[min-p]",),
            "Declares vLLM's warp; min_p skipped at verified positions, applied to the bonus (vLLM #42744, its "
            "rejection sampler).",
        ),
        # sampling state that remembers (issue 53): specverify.zoo._history_loops
        *HISTORY_ENTRIES,
    ]
    below_reach = {"bf16-prefix-sum-draft": (0.001, Verdict.LOSSY)}  # name -> (EPS, the verdict at --tv EPS)
    members = {}
    for name, loop, verdict, caught, story in entries:
        loop.name = f"zoo.{name}"
        members[name] = LoopMember(name, loop, Verdict(verdict), caught, story, at_tv=below_reach.get(name))
    return members


LOOP_MEMBERS = _members()
# each member's loop also by a module-level name (loop_<name with underscores>), so a worker
# process can import it by name and the loop runs isolated
globals().update({"loop_" + name.replace("-", "_"): member.loop for name, member in LOOP_MEMBERS.items()})
