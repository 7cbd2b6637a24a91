"""Every random draw of the harness comes from a seed derived from what it is for.

``derive_seed(run_seed, "fit.step[random]", "confirm", fingerprint)`` is a pure function of its
parts, so a run is reproducible, a Hypothesis example always sees the same samples (which is what
lets shrinking work), and no seed is ever drawn or shrunk by Hypothesis.
"""

from __future__ import annotations

import hashlib

__all__ = ["derive_seed"]


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from any printable parts (order matters)."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)
