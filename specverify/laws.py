"""The exact laws a lossless sampler must reproduce, computed without sampling.

Each function gives the distribution the checks compare a sampler's outputs to: the law of one
step's emitted tokens (:func:`step_law`), of the tokens a model-driven step emits
(:func:`emitted_law`), of ``n`` tokens straight from the target (:func:`target_law`), of the
completed sequence (:func:`completed_law`), of a whole generation loop's output
(:func:`generation_law`; :func:`history_generation_law` under the parameters that remember the
tokens so far, whose per-position logits are :func:`history_logits`), and the warped next-token
law of a row's sampling parameters (:func:`warp`).  Import it as ``from specverify import laws``; it imports torch.
"""

from __future__ import annotations

from ._history import history_generation_law, history_logits
from ._laws.exact import completed_law, emitted_law, step_law, target_law
from ._loop import generation_law
from ._warps.rules import warp

__all__ = [
    "completed_law",
    "emitted_law",
    "generation_law",
    "history_generation_law",
    "history_logits",
    "step_law",
    "target_law",
    "warp",
]
