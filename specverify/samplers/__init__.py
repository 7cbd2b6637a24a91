"""Built-in samplers.

* ``reference``: the canonical algorithm, vectorised, float64, any device, injected uniforms.
* ``triton``: the canonical step as one Triton kernel (CUDA, or Triton's interpreter on CPU);
  imported on first use, so importing specverify never imports triton.
"""

from typing import Any

from ._reference import ReferenceSampler, reference

__all__ = ["ReferenceSampler", "reference"]


def __getattr__(name: str) -> Any:
    if name == "triton":
        from ._triton import triton_sampler

        return triton_sampler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
