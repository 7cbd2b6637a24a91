"""Per-request seeded uniforms, vectorised: one counter-based stream per row.

Engines seed each request on its own (``SamplingParams(seed=...)``): a row's output must depend on
its seed alone, not on its neighbours in the batch or on how many calls came before.  A counter-based
generator gives that without a Python loop over rows: uniform ``j`` of a row is a hash of
``(seed, j)``, here SplitMix64 (Steele, Lea and Flood 2014), whose output passes BigCrush and whose
53 top bits make a float64 in ``[0, 1)``.
"""

from __future__ import annotations

import torch

__all__ = ["seeded_uniforms"]


def _signed(value: int) -> int:
    """A 64-bit constant as the int64 torch stores (two's complement)."""
    return value - (1 << 64) if value >= 1 << 63 else value


_GOLDEN = _signed(0x9E3779B97F4A7C15)
_MIX1 = _signed(0xBF58476D1CE4E5B9)
_MIX2 = _signed(0x94D049BB133111EB)


def _shift_right(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical (unsigned) right shift of int64 values."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def _splitmix64(x: torch.Tensor) -> torch.Tensor:
    z = x + _GOLDEN
    z = (z ^ _shift_right(z, 30)) * _MIX1
    z = (z ^ _shift_right(z, 27)) * _MIX2
    return z ^ _shift_right(z, 31)


def seeded_uniforms(seeds: torch.Tensor, count: int, *, offset: int = 0) -> torch.Tensor:
    """``[B, count]`` float64 uniforms in ``[0, 1)``; row ``b`` depends on ``seeds[b]`` alone.

    ``offset`` starts the row's stream further on (a second use of the same seed that must not
    repeat the first: a draft's noise versus the verifier's coins).
    """
    seeds = seeds.to(torch.int64)
    key = _splitmix64(seeds).unsqueeze(-1)
    counter = torch.arange(offset, offset + count, dtype=torch.int64, device=seeds.device)
    bits = _shift_right(_splitmix64(key + counter * _GOLDEN), 11)
    return bits.to(torch.float64) * (1.0 / (1 << 53))
