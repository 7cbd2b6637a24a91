"""Built-in samplers.

* ``reference``: the canonical algorithm, vectorised, float64, any device, injected uniforms.
"""

from ._reference import ReferenceSampler, reference

__all__ = ["ReferenceSampler", "reference"]
