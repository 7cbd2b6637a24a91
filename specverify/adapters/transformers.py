"""Hugging Face transformers' speculative sampling (``generate(..., assistant_model=...)``).

Specs:

* ``specverify.adapters.transformers:sampler``: ``_speculative_sampling`` as ``generate()`` calls
  it for sampled assisted decoding, claimed lossless;
* ``specverify.adapters.transformers:ensemble``: the same with ``assistant_ensemble_weight=0.5``
  (static ensemble verification, lossy by design: the harness measures how lossy).

The library function takes one sequence (batch size 1), logits rather than probabilities, and
draws from the global torch generator.  The adapter

* passes ``log(p)`` (``-inf`` where ``p = 0``) in float32, as ``generate()`` casts its logits, so
  the library's softmax recovers exactly the law the contract's row stands for;
* seeds the global generator of the inputs' device from the contract's generator for the call and
  restores it afterwards (deterministic in the generator, no leak into the caller's random state);
* loops over the batch rows in Python (the library is batch-1), with the per-row work reduced to
  the library call itself;
* passes the draft tokens alone as ``candidate_input_ids`` (the library reads only their last
  ``candidate_length`` entries) and returns int64 tokens with ``-1`` padding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .._contract import Capabilities
from ..errors import AdapterUnavailable
from ._common import contract_output, import_library, logits_from_probs, parameter_names, seed_from, seeded_global_rng

__all__ = ["TransformersSampler", "ensemble", "sampler"]

_INSTALL = "pip install 'speculative-verify[transformers]'"


class TransformersSampler:
    """``transformers.generation.utils._speculative_sampling`` behind the sampler contract.

    Args:
        speculative_sampling: the library function (looked up lazily by :meth:`load`).
        ensemble_weight: ``assistant_ensemble_weight`` (``None``: the standard, lossless mode).
    """

    capabilities = Capabilities(
        device=None,
        # generate() verifies on float32 logits; narrower inputs are widened exactly.
        dtypes=(torch.float32, torch.bfloat16, torch.float16),
        batched=True,
        uniforms=False,
        # softmax(log p) renormalises any row, but generate() only ever passes it softmax outputs:
        # it is given rows normalised as well as their dtype allows, as generate() gives them.
        unnormalised=False,
    )

    def __init__(
        self, speculative_sampling: Callable[..., Any], *, ensemble_weight: float | None = None, version: str = "?"
    ) -> None:
        self._speculative_sampling = speculative_sampling
        self._kwargs = {} if ensemble_weight is None else {"assistant_ensemble_weight": ensemble_weight}
        suffix = "" if ensemble_weight is None else f" (assistant_ensemble_weight={ensemble_weight:g})"
        self.name = f"transformers {version} _speculative_sampling{suffix}"

    @classmethod
    def load(cls, *, ensemble_weight: float | None = None) -> TransformersSampler:
        """Import transformers and check that its function has the arguments this adapter passes."""
        utils = import_library("transformers.generation.utils", adapter="transformers", install=_INSTALL)
        function = getattr(utils, "_speculative_sampling", None)
        version = getattr(import_library("transformers", adapter="transformers", install=_INSTALL), "__version__", "?")
        if function is None:
            raise AdapterUnavailable(
                f"transformers {version} has no transformers.generation.utils._speculative_sampling"
            )
        names = parameter_names(function)
        expected = ["candidate_input_ids", "candidate_logits", "candidate_length", "new_logits"]
        if names[:4] != expected:
            raise AdapterUnavailable(
                f"transformers {version}: _speculative_sampling takes {names}, this adapter knows {expected}"
            )
        if ensemble_weight is not None and "assistant_ensemble_weight" not in names:
            raise AdapterUnavailable(f"transformers {version} has no assistant_ensemble_weight (ensemble verification)")
        return cls(function, ensemble_weight=ensemble_weight, version=version)

    def __call__(
        self,
        target_probs: torch.Tensor,
        draft_probs: torch.Tensor,
        draft_tokens: torch.Tensor,
        generator: torch.Generator | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        batch, k = draft_tokens.shape
        target_logits = logits_from_probs(target_probs).split(1)
        draft_logits = logits_from_probs(draft_probs).split(1)
        drafts = draft_tokens.split(1)
        emitted: list[torch.Tensor] = []
        matches: list[torch.Tensor] = []
        with seeded_global_rng(target_probs.device, seed_from(generator)):
            for row in range(batch):  # the library verifies one sequence per call
                valid_tokens, n_matches = self._speculative_sampling(
                    drafts[row], draft_logits[row], k, target_logits[row], **self._kwargs
                )
                emitted.append(valid_tokens[0])
                matches.append(n_matches)
        tokens = torch.nn.utils.rnn.pad_sequence(emitted, batch_first=True, padding_value=-1)
        tokens = torch.nn.functional.pad(tokens, (0, k + 1 - tokens.shape[1]), value=-1)
        # The library's own count of accepted drafts; the harness audits it against the tokens.
        return contract_output(tokens, torch.stack(matches))


def sampler() -> TransformersSampler:
    """The standard (lossless) mode; raises :class:`AdapterUnavailable` without transformers."""
    return TransformersSampler.load()


def ensemble() -> TransformersSampler:
    """Static ensemble verification with weight 0.5: lossy by design, so its loss is measured."""
    return TransformersSampler.load(ensemble_weight=0.5)
