"""Built-in samplers.

* ``reference``: the canonical algorithm, vectorised, float64, any device, injected uniforms.
* ``logits_reference``: the logits-level contract (``Capabilities(inputs="logits")``): each row's
  warps (temperature, top-k, top-p, min-p), then the canonical step.
* ``loop_reference``: a whole speculative generation loop (``specverify.check_loop``).
* ``engine_reference``: an engine on the harness's own models, speculation on or off (``specverify.check_engine``).
* ``triton``: the canonical step as one Triton kernel (CUDA, or Triton's interpreter on CPU);
  imported on first use, so importing specverify never imports triton.
* ``tree_triton``: the target-only tree verifier as one Triton kernel (tree contract), lazy like ``triton``.
* ``tree_reference`` (SpecInfer), ``tree_specinfer``, ``tree_without_replacement``, ``tree_target_only``,
  ``block_verification`` (and ``TREE_REFERENCES``, one per algorithm): reference samplers of the tree contract
  (:mod:`specverify.trees`, which exports them too); imported on first use.
"""

from typing import Any

from ._engine_reference import EngineReference, engine_reference
from ._logits_reference import LogitsReferenceSampler, logits_reference
from ._loop_reference import LoopReference, loop_reference
from ._reference import ReferenceSampler, reference

__all__ = [
    "EngineReference",
    "LogitsReferenceSampler",
    "LoopReference",
    "ReferenceSampler",
    "engine_reference",
    "logits_reference",
    "loop_reference",
    "reference",
]

_TREE_NAMES = (
    "TREE_REFERENCES",
    "block_verification",
    "tree_reference",
    "tree_specinfer",
    "tree_target_only",
    "tree_without_replacement",
)


def __getattr__(name: str) -> Any:
    if name == "triton":
        from ._triton import triton_sampler

        return triton_sampler
    if name == "tree_triton":
        from ._tree_triton import tree_triton

        return tree_triton
    if name in _TREE_NAMES:
        from . import _tree_reference

        return getattr(_tree_reference, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
